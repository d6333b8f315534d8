"""The modes the UI shows: per DAG (its ``adaptive:<mode>`` tag, read from Airflow's own tables) and
per task family, for each pod kind, with what set each (core/modes.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from airflow_adaptive.attempt import pod_mode
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.modes import TAG_PREFIX, Mode, ModeChoice, dag_mode

Dags = frozenset[str] | None


def _tags(session: Session, dag_ids: Iterable[str] | None) -> dict[str, list[str]]:
    """The adaptive tags of the DAGs (of all DAGs when None)."""
    from airflow.models.dag import DagTag

    tagged = func.lower(DagTag.name).startswith(TAG_PREFIX, autoescape=True)  # as pods read it, without case
    query = select(DagTag.dag_id, DagTag.name).where(tagged)
    if dag_ids is not None:
        query = query.where(DagTag.dag_id.in_(sorted(dag_ids)))
    tags: dict[str, list[str]] = {}
    for dag_id, name in session.execute(query):
        tags.setdefault(dag_id, []).append(name)
    return tags


def _tag_mode(tags: list[str] | None) -> tuple[Mode | None, str | None]:
    """The DAG's mode and, for a tag that names no mode, why it is ignored."""
    try:
        return dag_mode(tags), None
    except ValueError as err:
        return None, str(err)


def _dag_row(
    settings: AdaptiveSettings, family: str, dag_id: str, tags: list[str] | None
) -> tuple[dict[str, Any], list[ModeChoice]]:
    """The DAG's row, and the modes its pods of the family get (plain and executor, the operator's)."""
    mode, problem = _tag_mode(tags)
    pods, operator_pods = (
        pod_mode(settings, family, dag=mode, task=None, operator=operator) for operator in (False, True)
    )
    row = {
        "dag_id": dag_id,
        "tag": mode.value if mode else None,
        "tag_problem": problem,
        "pods": pods.note(),
        "operator_pods": operator_pods.note(),
    }
    return row, [pods, operator_pods]


def family_modes(settings: AdaptiveSettings, session: Session, task_family: str, dag_ids: list[str]) -> dict:
    """The family's mode in each of its DAGs, for each pod kind; ``recommending``: some pod of it
    keeps the user's resources (observe or recommend), so the UI shows what enforcing would do."""
    tags = _tags(session, dag_ids)
    found = [_dag_row(settings, task_family, dag_id, tags.get(dag_id)) for dag_id in dag_ids]
    kept = any(c.mode.records and not c.mode.enforces for _, choices in found for c in choices)
    return {"dags": [row for row, _ in found], "recommending": kept}


def dag_modes(settings: AdaptiveSettings, session: Session, readable: Dags) -> dict[str, Any]:
    """Every DAG Airflow knows (that the user may read) with the mode its pods get."""
    from airflow.models.dag import DagModel

    query = select(DagModel.dag_id).where(DagModel.is_stale.is_(False)).order_by(DagModel.dag_id)
    dag_ids = [d for d in session.scalars(query) if readable is None or d in readable]
    tags = _tags(session, dag_ids)
    return {
        "default": settings.mode.value,
        "family_rules": [{"pattern": r.pattern, "mode": r.mode.value} for r in settings.family_modes],
        # A DAG's own row, for a family no rule names (the family's view shows the rest).
        "dags": [_dag_row(settings, "", dag_id, tags.get(dag_id))[0] for dag_id in dag_ids],
    }
