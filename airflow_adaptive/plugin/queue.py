"""The queue page: pending and running task instances ordered least-finished-first, and why.

Reads Airflow's ``task_instance`` rows (the request's own session) for the DAGs the user may read,
keeps the tasks that use the least-finished-first weight rule or our operator, and ranks their
families by what the history store knows now. Each row shows the weight Airflow stored when it
created the task instance (what the scheduler orders by) beside the rank the family has now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.lff import FamilyProgress, PriorityChoice
from airflow_adaptive.exceptions import HistoryUnavailableError
from airflow_adaptive.plugin.readable import history_hidden
from airflow_adaptive.store.api import HistoryStore
from airflow_adaptive.weight_rule import static_weight, task_family_of

PENDING = ("scheduled", "queued", "up_for_retry", "up_for_reschedule", "deferred")
ACTIVE = (*PENDING, "running")
OPERATOR = "AdaptiveKubernetesPodOperator"


def _task_instances(session: Any, dags: frozenset[str] | None, limit: int) -> list[Any]:
    from airflow.models.taskinstance import TaskInstance as TI

    stmt = select(
        TI.dag_id, TI.task_id, TI.run_id, TI.map_index, TI.try_number, TI.state, TI.priority_weight,
        TI.operator, TI.pool, TI.queued_dttm, TI.start_date,
    ).where(TI.state.in_(ACTIVE))  # fmt: skip
    if dags is not None:
        stmt = stmt.where(TI.dag_id.in_(sorted(dags)))
    stmt = stmt.order_by(TI.priority_weight.desc(), TI.dag_id, TI.task_id, TI.map_index).limit(limit)
    return list(session.execute(stmt).all())


def _adaptive_tasks(session: Any, dag_ids: set[str]) -> dict[tuple[str, str], Any]:
    """(dag, task) -> the serialised task, for tasks ordered least-finished-first or ours."""
    from airflow.models.dagbag import DBDagBag

    bag = DBDagBag()
    found = {}
    for dag_id in sorted(dag_ids):
        dag = bag.get_latest_version_of_dag(dag_id, session=session)
        for task in getattr(dag, "tasks", ()):
            lff = type(getattr(task, "weight_rule", None)).__name__ == "LeastFinishedFirst"
            if lff or getattr(task, "task_type", "") == OPERATOR:
                found[(dag_id, task.task_id)] = task
    return found


def queue_view(
    session: Any,
    open_store: Callable[[], HistoryStore],
    settings: AdaptiveSettings,
    dags: frozenset[str] | None,
    limit: int,
) -> dict[str, Any]:
    rows = _task_instances(session, dags, limit)
    tasks = _adaptive_tasks(session, {r.dag_id for r in rows})
    rows = [r for r in rows if (r.dag_id, r.task_id) in tasks]
    listed = {(r.dag_id, r.task_id) for r in rows}  # the tasks shown, not every task of their DAGs
    families = {key: task_family_of(tasks[key], *key) for key in listed}
    note = ""
    choices: dict[tuple[str, str], PriorityChoice] = {}
    counts: dict[tuple[str, str], FamilyProgress] = {}
    advisor = Advisor(settings, open_store)  # one for the page: the store is opened and read once
    try:
        names = sorted(set(families.values()))
        advisor.session.read_families(names)  # one read for the page's families
        progress = {f: advisor.placement.progress(f) or FamilyProgress(0, 0) for f in names}
        hidden = {f for f in names if history_hidden(advisor.session.store(), dags, f)}
        counts = {key: progress[f] for key, f in families.items() if f not in hidden}
        if dags is None:  # a rank compares with every DAG's families: only for who may read them all
            for key, family in families.items():
                choice = advisor.placement.priority(family, static_weight(tasks[key]))
                if choice is not None:
                    choices[key] = choice
        else:
            note = RESTRICTED + (f"; {HIDDEN_COUNTS}" if hidden else "")
    except HistoryUnavailableError as err:
        note = f"{err}: ranks unknown, Airflow's stored weights shown"
    keys = [(r.dag_id, r.task_id) for r in rows]
    items = [_row(r, families[k], choices.get(k), counts.get(k)) for r, k in zip(rows, keys, strict=True)]
    # Ranked only by weights worked out here: for a restricted user (or with the store down) Airflow's
    # stored weights came from every DAG's history, and their order is no rank this page may show.
    ranked = sorted((i for i in items if i["state"] in PENDING and i["lff_weight_now"] is not None),
                    key=lambda i: -i["lff_weight_now"])  # fmt: skip
    for position, item in enumerate(ranked, start=1):
        item["lff_rank"] = position
    return {"tasks": items, "failures_rule": settings.lff_failures, "note": note, "limit": limit}


RESTRICTED = "ranks compare with every DAG's families, some of which you may not read: not shown"
HIDDEN_COUNTS = "the counts of families also run by those DAGs are not shown either"


def _row(r: Any, family: str, choice: PriorityChoice | None, counts: FamilyProgress | None) -> dict[str, Any]:
    return {
        "dag_id": r.dag_id,
        "task_id": r.task_id,
        "run_id": r.run_id,
        "map_index": r.map_index,
        "try_number": r.try_number,
        "state": str(r.state.value if hasattr(r.state, "value") else r.state),
        "pool": r.pool,
        "task_family": family,
        "airflow_weight": r.priority_weight,
        "lff_weight_now": choice.weight if choice else None,
        "lff_rank": None,
        "successes": counts.successes if counts else None,
        "failures": counts.failures if counts else None,
        "priority_class": choice.class_name if choice else None,
        "why": choice.explain() if choice else "",
        "queued_at": r.queued_dttm.isoformat() if r.queued_dttm else None,
        "started_at": r.start_date.isoformat() if r.start_date else None,
    }
