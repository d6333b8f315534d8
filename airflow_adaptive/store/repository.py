"""Reads and writes task attempts; returns core types, never rows."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.dialects import mysql, postgresql, sqlite

from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.store.tables import task_attempt

log = logging.getLogger(__name__)

_KEY_COLUMNS = ("dag_id", "task_id", "run_id", "map_index", "try_number")


def _row_values(obs: Observation) -> dict[str, Any]:
    usage = obs.usage
    return {
        "dag_id": obs.key.dag_id,
        "task_id": obs.key.task_id,
        "run_id": obs.key.run_id,
        "map_index": obs.key.map_index,
        "try_number": obs.key.try_number,
        "task_family": obs.task_family,
        "finished_at": obs.finished_at or datetime.now(timezone.utc),
        "memory_request_bytes": obs.memory_request_bytes,
        "memory_limit_bytes": obs.memory_limit_bytes,
        "peak_memory_bytes": usage.peak_memory_bytes,
        "peak_kind": usage.peak_kind.value,
        "cpu_core_seconds": usage.cpu_core_seconds,
        "wall_seconds": usage.wall_seconds,
        "read_bytes": usage.read_bytes,
        "write_bytes": usage.write_bytes,
        "input_size_bytes": obs.input_size_bytes,
        "node_name": obs.node_name,
        "exit_reason": obs.exit_reason.value,
        "exit_code": obs.exit_code,
        "strategy": obs.strategy,
        "explanation": obs.explanation,
    }


def _upsert(dialect: str, rows: list[dict[str, Any]]) -> Any:
    """INSERT … ON CONFLICT DO UPDATE on the attempt key, per dialect."""
    if dialect == "postgresql" or dialect == "sqlite":
        module = postgresql if dialect == "postgresql" else sqlite
        stmt = module.insert(task_attempt).values(rows)
        update = {c: stmt.excluded[c] for c in rows[0] if c not in _KEY_COLUMNS}
        return stmt.on_conflict_do_update(index_elements=list(_KEY_COLUMNS), set_=update)
    if dialect in ("mysql", "mariadb"):
        stmt = mysql.insert(task_attempt).values(rows)
        return stmt.on_duplicate_key_update({c: stmt.inserted[c] for c in rows[0] if c not in _KEY_COLUMNS})
    raise NotImplementedError(f"history store does not support the {dialect} dialect")


def _nonnegative(value: Any, kind: type) -> Any:
    if value is None:
        return None
    number = kind(value)
    if number < 0:
        raise ValueError(f"negative value {value!r}")
    return number


def _observation(row: Any) -> Observation:
    finished = row.finished_at
    if finished is not None and finished.tzinfo is None:
        finished = finished.replace(tzinfo=timezone.utc)
    return Observation(
        key=TaskKey(row.dag_id, row.task_id, row.run_id, int(row.map_index), int(row.try_number)),
        task_family=row.task_family,
        usage=Usage(
            peak_memory_bytes=_nonnegative(row.peak_memory_bytes, int),
            cpu_core_seconds=_nonnegative(row.cpu_core_seconds, float),
            wall_seconds=_nonnegative(row.wall_seconds, float),
            read_bytes=_nonnegative(row.read_bytes, int),
            write_bytes=_nonnegative(row.write_bytes, int),
            peak_kind=PeakKind(row.peak_kind),
        ),
        exit_reason=ExitReason.parse(row.exit_reason),
        exit_code=row.exit_code,
        memory_request_bytes=_nonnegative(row.memory_request_bytes, int),
        memory_limit_bytes=_nonnegative(row.memory_limit_bytes, int),
        input_size_bytes=_nonnegative(row.input_size_bytes, int),
        node_name=row.node_name,
        finished_at=finished,
        strategy=row.strategy,
        explanation=row.explanation,
    )


def _observations(rows: Iterable[Any]) -> list[Observation]:
    result = []
    for row in rows:
        try:
            result.append(_observation(row))
        except (ValueError, TypeError) as err:
            log.warning("skipping malformed history row id=%s: %s", getattr(row, "id", "?"), err)
    return result


class HistoryRepository:
    """The history store behind one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(self, observations: Sequence[Observation]) -> None:
        """Insert or replace attempts (idempotent on the attempt key), in one transaction."""
        if not observations:
            return
        rows = [_row_values(o) for o in observations]
        with self.engine.begin() as conn:
            conn.execute(_upsert(self.engine.dialect.name, rows))

    def history(self, task_family: str, *, limit: int = 500) -> list[Observation]:
        """The family's most recent attempts, oldest first."""
        stmt = (
            select(task_attempt)
            .where(task_attempt.c.task_family == task_family)
            .order_by(task_attempt.c.finished_at.desc(), task_attempt.c.id.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return _observations(reversed(rows))

    def attempt(self, key: TaskKey) -> Observation | None:
        stmt = select(task_attempt).where(
            *(task_attempt.c[name] == getattr(key, name) for name in _KEY_COLUMNS)
        )
        with self.engine.connect() as conn:
            found = _observations(conn.execute(stmt).all())
        return found[0] if found else None

    def attempts_for_try(
        self, dag_id: str, task_id: str, try_number: int, *, limit: int = 200
    ) -> list[Observation]:
        """Recent attempts of a task at one try number (for callers that only know sanitised run ids)."""
        stmt = (
            select(task_attempt)
            .where(
                task_attempt.c.dag_id == dag_id,
                task_attempt.c.task_id == task_id,
                task_attempt.c.try_number == try_number,
            )
            .order_by(task_attempt.c.finished_at.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return _observations(conn.execute(stmt).all())

    def request_ratios(self, *, limit: int = 2000) -> list[tuple[int, int]]:
        """(peak, request) bytes of the most recent measured, completed attempts of every family."""
        stmt = (
            select(task_attempt.c.peak_memory_bytes, task_attempt.c.memory_request_bytes)
            .where(
                task_attempt.c.exit_reason == ExitReason.COMPLETED.value,
                task_attempt.c.peak_kind == PeakKind.MEASURED.value,
                task_attempt.c.peak_memory_bytes > 0,
                task_attempt.c.memory_request_bytes > 0,
            )
            .order_by(task_attempt.c.finished_at.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [(int(p), int(r)) for p, r in conn.execute(stmt).all()]

    def families(self) -> list[tuple[str, int, int]]:
        """(task family, attempts, OOM kills) for every family, most attempts first."""
        oom = func.sum(
            func.cast(
                task_attempt.c.exit_reason == ExitReason.OOM_KILLED.value, task_attempt.c.try_number.type
            )
        )
        stmt = (
            select(task_attempt.c.task_family, func.count(), oom)
            .group_by(task_attempt.c.task_family)
            .order_by(func.count().desc(), task_attempt.c.task_family)
        )
        with self.engine.connect() as conn:
            return [(f, int(n), int(k or 0)) for f, n, k in conn.execute(stmt).all()]
