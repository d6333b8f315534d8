"""Which task family a task's page opens: the per-task tab knows only ``dag_id`` and ``task_id``.

An ``AdaptiveKubernetesPodOperator`` with ``task_family=`` shares its family with other tasks, so
``dag_id.task_id`` is wrong for it. The serialised DAG holds the operator's ``task_family`` (a
template field): the family its next pod is sized from. A task without one (a plain
KubernetesPodOperator, a DAG not parsed yet, a templated family) takes the family its recorded
attempts carry, and only then the default ``dag_id.task_id``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_adaptive.core.model import family_of_task
from airflow_adaptive.store.api import HistoryStore


def serialised_family(session: Any, dag_id: str, task_id: str) -> str | None:
    """The operator's own ``task_family`` in the newest serialised DAG (None: none, or a template)."""
    from airflow.models.dagbag import DBDagBag

    dag = DBDagBag().get_latest_version_of_dag(dag_id, session=session)
    task = next((t for t in getattr(dag, "tasks", ()) if t.task_id == task_id), None)
    family = getattr(task, "task_family", None)
    if not isinstance(family, str) or not family or "{{" in family:
        return None  # a Jinja template is rendered per run: its attempts tell what it became
    return family


def task_family_for(
    session: Any, open_store: Callable[[], HistoryStore], dag_id: str, task_id: str
) -> dict[str, str]:
    """The task's family and where it came from (``dag``, ``attempts`` or ``default``)."""
    family = serialised_family(session, dag_id, task_id)
    if family is not None:
        return {"task_family": family, "source": "dag"}
    recorded = open_store().attempts_for_try(dag_id, task_id, 1, limit=1)
    if recorded:
        return {"task_family": recorded[0].task_family, "source": "attempts"}
    return {"task_family": family_of_task(dag_id, task_id), "source": "default"}
