"""What a user who may not read every DAG is shown of a task family's next decision.

A family can be shared by several DAGs (``task_family=``), and its stored model, the warm start it
borrows, the store-wide prior and its running count all draw on every DAG's attempts. For such a
user the decision is fitted again on the attempts of the DAGs they may read, and nothing else; a
family that other DAGs also ran says that part of its history is hidden (never how much).
"""

from __future__ import annotations

from typing import Any

from airflow_adaptive.advisor import Advisor, keep_user
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.decide import decide_memory
from airflow_adaptive.core.model import Decision, MemoryRequest
from airflow_adaptive.exceptions import AdaptiveError, HistoryUnavailableError
from airflow_adaptive.failopen import first_line
from airflow_adaptive.store.api import HistoryStore

Dags = frozenset[str] | None
HIDDEN = "part of this family's history is in DAGs you may not read: decided from the rest"


def history_hidden(store: HistoryStore, dags: Dags, task_family: str) -> bool:
    """Whether DAGs outside ``dags`` also ran this family (None: the user reads every DAG)."""
    return dags is not None and any(d not in dags for d in store.family_dags(task_family))


def next_decision(
    store: HistoryStore,
    settings: AdaptiveSettings,
    advisor: Advisor,
    dags: Dags,
    task_family: str,
    request: MemoryRequest,
) -> Decision:
    """The family's next decision as this user may see it."""
    if dags is None:
        return advisor.memory.decide(task_family, request)
    try:
        readable = store.history(task_family, limit=settings.history_window, dag_ids=dags)
        return decide_memory(readable, request, settings.sizing)
    except HistoryUnavailableError:
        raise  # the page says the store is unavailable, as for every user
    except Exception as err:  # a misspelt strategy, a predictor's bug: the request, as pods get it
        return keep_user(request, first_line(err) if isinstance(err, AdaptiveError) else type(err).__name__)


def hidden_note(hidden: bool) -> dict[str, Any]:
    return {"history_hidden": hidden, "hidden_note": HIDDEN if hidden else None}
