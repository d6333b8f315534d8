"""The :class:`~airflow_adaptive.store.learning.Transaction` of the SQL store: the reads and writes
recording needs, in the connection's one transaction (see :mod:`.recording`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple
from datetime import datetime, timezone

from sqlalchemy import Connection, bindparam, delete, select, update

from airflow_adaptive.core.model import Observation, TaskKey
from airflow_adaptive.core.rollup import DayKey, DayTotals, Distributions
from airflow_adaptive.store import rows
from airflow_adaptive.store.api import FamilyState
from airflow_adaptive.store.bulk import (
    BULK_FROM_ROWS,
    Background,
    can_copy,
    copy_lookup,
    copy_upsert,
    executemany_compiled,
)
from airflow_adaptive.store.dialects import add_to, insert_missing, upsert
from airflow_adaptive.store.learning import Transaction
from airflow_adaptive.store.rows import DAY_KEYS, day_rows
from airflow_adaptive.store.tables import aggregate, family, family_day, task_attempt, unfinished_attempt


class SqlTransaction(Transaction):
    """Large upserts on PostgreSQL run in the background (:class:`~.bulk.Background`); every other
    use of the connection waits for them, through :attr:`conn`. Call :meth:`close` at the end."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.dialect = conn.dialect.name
        self._background = Background()
        self._any_unfinished: bool | None = None  # whether any unfinished attempt is noted (read once)

    @property
    def conn(self) -> Connection:
        self._background.settle()
        return self._conn

    def close(self) -> None:
        """Wait for a write still running (raising its error)."""
        self._background.close()

    def lock_families(self, names: Sequence[str]) -> dict[str, FamilyState]:
        values = [{"task_family": n} for n in sorted(names)]
        self.conn.execute(insert_missing(self.dialect, family, values, ["task_family"]))
        stmt = (
            select(family)
            .where(family.c.task_family.in_(names))
            .order_by(family.c.task_family)
            .with_for_update()
        )
        return {r.task_family: rows.family_state(r) for r in self.conn.execute(stmt)}

    def existing(self, keys: Sequence[TaskKey]) -> dict[TaskKey, Observation]:
        """Stored attempts with these keys: per (DAG, task, run), equality on the unique index's
        leading columns and an IN list of map indexes, which both databases answer from the index
        even with no statistics yet (mid-import, PostgreSQL's planner would otherwise scan every
        row of the DAG); the exact keys are then picked here."""
        wanted = set(keys)
        if can_copy(self.conn, len(wanted)):  # a trace imported again: one join, not a query a task
            found_rows = copy_lookup(self.conn, task_attempt, [astuple(k) for k in wanted], rows.KEY_COLUMNS)
            return {obs.key: obs for obs in rows.observations(found_rows)}
        groups: dict[tuple[str, str, str], set[int]] = {}
        for k in wanted:
            groups.setdefault((k.dag_id, k.task_id, k.run_id), set()).add(k.map_index)
        found: dict[TaskKey, Observation] = {}
        for (dag_id, task_id, run_id), indexes in groups.items():
            ordered = sorted(indexes)
            for start in range(0, len(ordered), 500):
                stmt = select(task_attempt).where(
                    task_attempt.c.dag_id == dag_id,
                    task_attempt.c.task_id == task_id,
                    task_attempt.c.run_id == run_id,
                    task_attempt.c.map_index.in_(ordered[start : start + 500]),
                )
                for obs in rows.observations(self.conn.execute(stmt)):
                    if obs.key in wanted:
                        found[obs.key] = obs
        return found

    def stored_runs(self, runs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        found = set()
        for dag_id, run_id in runs:
            stmt = select(task_attempt.c.id).where(
                task_attempt.c.dag_id == dag_id, task_attempt.c.run_id == run_id
            )
            if self.conn.execute(stmt.limit(1)).first() is not None:
                found.add((dag_id, run_id))
        return found

    def upsert(self, observations: Sequence[Observation], *, all_new: bool = False) -> None:
        columns = rows.attempt_columns(observations)
        if can_copy(self._conn, len(observations)):  # the text is built while an earlier write runs
            write = copy_upsert(self._conn, task_attempt, columns, rows.KEY_COLUMNS, all_new=all_new)
            self._background.submit(write)
            return
        stmt = upsert(self.dialect, task_attempt, list(columns), rows.KEY_COLUMNS)
        if self.dialect == "sqlite":
            if len(observations) >= BULK_FROM_ROWS:  # a trace: index pages stay cached (default 2 MB)
                self.conn.exec_driver_sql("PRAGMA cache_size = -32768")  # 32 MiB, this connection
            executemany_compiled(self.conn, stmt, columns)
        else:
            self.conn.execute(
                stmt, [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]
            )

    def forget_unfinished(self, keys: Sequence[TaskKey]) -> None:
        """One DELETE per key, executed for all; none while no attempt is noted (a trace import)."""
        if self._any_unfinished is None:
            self._any_unfinished = (
                self.conn.execute(select(unfinished_attempt.c.try_number).limit(1)).first() is not None
            )
        if not self._any_unfinished or not keys:
            return
        stmt = delete(unfinished_attempt).where(
            *(unfinished_attempt.c[name] == bindparam(f"k_{name}") for name in rows.KEY_COLUMNS)
        )
        self.conn.execute(
            stmt, [{f"k_{n}": v for n, v in zip(rows.KEY_COLUMNS, astuple(k), strict=True)} for k in keys]
        )

    def window(
        self, task_family: str, limit: int, dag_ids: frozenset[str] | None = None
    ) -> tuple[list[Observation], int | None]:
        conditions = [task_attempt.c.task_family == task_family]
        if dag_ids is not None:
            conditions.append(task_attempt.c.dag_id.in_(sorted(dag_ids)))
        stmt = (
            select(task_attempt)
            .where(*conditions)
            .order_by(task_attempt.c.finished_at.desc(), task_attempt.c.id.desc())
            .limit(limit)
        )
        found = self.conn.execute(stmt).all()
        return rows.observations(reversed(found)), (max(r.id for r in found) if found else None)

    def save_families(self, states: Sequence[FamilyState], *, refitted: bool) -> None:
        """One UPDATE executed for every family (a batch of a trace touches hundreds)."""
        if not states:
            return
        now = datetime.now(timezone.utc)
        values = []
        for state in states:
            row = rows.family_values(state, with_model=refitted)  # else the model read under the lock stands
            if refitted:
                row["model_fitted_at"] = now
            values.append({"family_key": state.rollup.task_family, **row})
        columns = [name for name in values[0] if name != "family_key"]
        stmt = (
            update(family)
            .where(family.c.task_family == bindparam("family_key"))
            .values({name: bindparam(name) for name in columns})
        )
        self.conn.execute(stmt, values)

    def add_days(self, totals: dict[DayKey, DayTotals]) -> None:
        if totals:
            self.conn.execute(add_to(self.dialect, family_day, DAY_KEYS), day_rows(totals))

    def lock_distributions(self) -> Distributions:
        self.conn.execute(insert_missing(self.dialect, aggregate, [{"id": 1, "distributions": {}}], ["id"]))
        found = self.conn.execute(
            select(aggregate.c.distributions).where(aggregate.c.id == 1).with_for_update()
        )
        return Distributions.from_json(found.scalar())

    def save_distributions(self, distributions: Distributions) -> None:
        self.conn.execute(
            update(aggregate)
            .where(aggregate.c.id == 1)
            .values(distributions=distributions.to_json(), updated_at=datetime.now(timezone.utc))
        )
