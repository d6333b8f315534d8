"""Least-finished-first as Airflow's priority weight: ``weight_rule="airflow_adaptive.LeastFinishedFirst"``.

Airflow calls ``get_weight`` where task instances are created or cleared (scheduler, api-server,
CLI, ``dag.test()``), never on a retry: a task instance keeps the weight of its creation through
all its tries, and clearing it computes a new one. Within a DAG run every task instance is created
when the run starts, so the weights reflect the history at that moment; the pod's PriorityClass,
chosen when the pod is created, follows the history as it is then.

The weight is the task's own ``priority_weight`` plus the LFF rank (below 10^6; see
``core.priority.lff_weight``). It is read with Airflow's own session (one primary-key read of two
columns, in a savepoint on PostgreSQL, never a commit) and cached per family for a few seconds, so
a scheduling loop reads each family once. On any error the task's own weight is used and the
reason logged once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from airflow.task.priority_strategy import PriorityWeightStrategy

from airflow_adaptive.core.lff import FamilyProgress, lff_weight
from airflow_adaptive.core.model import family_of_task
from airflow_adaptive.failopen import warn_once

CACHE_SECONDS = 5.0  # a few scheduling loops; twice per task instance and per mapped index hit it
_cache: dict[str, tuple[float, FamilyProgress | None]] = {}
_down_until = 0.0  # after a store error, no reads until then
_lock = threading.Lock()


class _RecentlyFailed(Exception):
    """The store failed moments ago (and that was logged): not asked again yet."""


def task_family_of(task: Any, dag_id: str, task_id: str) -> str:
    """The operator's ``task_family`` (serialised with the DAG), else ``dag_id.task_id``."""
    family = getattr(task, "task_family", None)
    return family if isinstance(family, str) and family else family_of_task(dag_id, task_id)


def static_weight(task: Any) -> int:
    weight = getattr(task, "priority_weight", 1)
    return weight if isinstance(weight, int) else 1


def _read(task_family: str) -> FamilyProgress | None:
    from airflow import settings

    from airflow_adaptive.advisor import Advisor
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.store.sql import SqlHistoryStore

    make_session: Any = settings.Session  # None until Airflow configured its ORM: raises, fails open
    session = make_session()
    if session.in_transaction():  # the scheduler's: read inside it, never commit
        scheduler = SqlHistoryStore.reading_through(session.connection())
        return Advisor(get_settings(), lambda: scheduler).placement.progress(task_family)
    return Advisor(get_settings()).placement.progress(task_family)


def family_progress(task_family: str) -> FamilyProgress | None:
    """The family's progress, cached for CACHE_SECONDS; raises when the store cannot answer."""
    global _down_until
    now = time.monotonic()
    with _lock:
        cached = _cache.get(task_family)
        if cached is not None and cached[0] > now:
            return cached[1]
        if _down_until > now:
            raise _RecentlyFailed
    try:
        progress = _read(task_family)
    except Exception:
        with _lock:
            _down_until = now + CACHE_SECONDS
        raise
    with _lock:
        _cache[task_family] = (now + CACHE_SECONDS, progress)
    return progress


def forget() -> None:
    """Drop cached progress (tests, and after a history import in this process)."""
    global _down_until
    with _lock:
        _cache.clear()
        _down_until = 0.0


class LeastFinishedFirst(PriorityWeightStrategy):
    """Fewest successful attempts of the task family first; then failed attempts (``[adaptive]
    lff_failures``: ``persevere``, more first, or ``postpone``)."""

    def get_weight(self, ti: Any) -> int:
        task = ti.task
        own = static_weight(task)
        try:
            from airflow_adaptive.config import get_settings

            mode = get_settings().lff_failures
            progress = family_progress(task_family_of(task, ti.dag_id, ti.task_id))
        except _RecentlyFailed:
            return own
        except Exception as err:  # the store, the config or this process's ORM: fall back, say why once
            warn_once(
                f"least-finished-first unavailable ({_reason(err)})", "tasks keep their own priority weight"
            )
            return own
        return lff_weight(progress or FamilyProgress(0, 0), mode, own)


def _reason(err: BaseException) -> str:
    text = str(err).splitlines()[0][:200] if str(err) else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


# Registered and serialised by qualname: the short, documented name users write.
LeastFinishedFirst.__module__ = "airflow_adaptive"
