"""The history store in the provider's tables of Airflow's metadata database (SQLAlchemy core).

Every driver or OS error becomes :class:`HistoryUnavailableError` (or :class:`HistoryRejectedError` for
input the database refuses for good) right here, so no caller catches a SQLAlchemy error. Every
transaction carries the store's timeout, whoever owns the engine: PostgreSQL gets statement and lock
timeouts, SQLite waits that long for a writer to finish (it has one writer at a time).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import astuple
from datetime import date, datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Connection, Engine, delete, func, or_, select, text

from airflow_adaptive.core.grouping import Grouping, NodeProfile
from airflow_adaptive.core.lff import FamilyProgress
from airflow_adaptive.core.locality import CachedInput, InputState, InputUse
from airflow_adaptive.core.model import Observation, TaskKey
from airflow_adaptive.core.node_groups import StoredNode
from airflow_adaptive.core.normalise import fit_key, fit_task_key
from airflow_adaptive.core.retention import prune_cutoff
from airflow_adaptive.core.rollup import DayTotals, Distributions, FamilyRollup
from airflow_adaptive.core.sizing.similar import Identity
from airflow_adaptive.core.unfinished import STALE_AFTER_S
from airflow_adaptive.exceptions import HistoryUnavailableError
from airflow_adaptive.store import inputs, rows, totals
from airflow_adaptive.store.api import FamilyState, FamilyTotals, PruneResult, RecordResult, TotalsQuery
from airflow_adaptive.store.dialects import upsert
from airflow_adaptive.store.errors import map_errors
from airflow_adaptive.store.learning import DEFAULT_LEARNING, Learning
from airflow_adaptive.store.rebuild import rebuild_all
from airflow_adaptive.store.recording import record_batches_in
from airflow_adaptive.store.sql_transaction import SqlTransaction
from airflow_adaptive.store.tables import (
    aggregate,
    family,
    family_day,
    node,
    task_attempt,
    unfinished_attempt,
)


@contextlib.contextmanager
def _savepoint(conn: Connection) -> Iterator[None]:
    """A savepoint where an error would abort the surrounding transaction (not SQLite's)."""
    if conn.dialect.name == "sqlite" or not conn.in_transaction():
        yield
        return
    with conn.begin_nested():
        yield


def _same_instance(key: TaskKey) -> tuple[Any, ...]:
    """Conditions on an unfinished attempt's task instance (every try of it)."""
    c = unfinished_attempt.c
    return (
        c.dag_id == key.dag_id,
        c.task_id == key.task_id,
        c.run_id == key.run_id,
        c.map_index == key.map_index,
    )


class SqlHistoryStore:
    """:class:`~airflow_adaptive.store.api.HistoryStore` on one SQLAlchemy engine."""

    def __init__(
        self, engine: Engine, learning: Learning = DEFAULT_LEARNING, *, timeout_seconds: float | None = None
    ) -> None:
        self._engine = engine
        self.learning = learning
        self.timeout_seconds = timeout_seconds
        self._borrowed: Connection | None = None

    @classmethod
    def reading_through(cls, conn: Connection) -> SqlHistoryStore:
        """A read-only store on a connection inside someone else's transaction (the scheduler's
        session): it never commits, and on PostgreSQL each read runs in a savepoint, so a failed
        read does not abort the owner's transaction. Plain reads take no row locks there."""
        store = cls(conn.engine)
        store._borrowed = conn
        return store

    @contextlib.contextmanager
    def _connection(self, *, write: bool = False) -> Iterator[Connection]:
        if self._borrowed is not None:
            if write:
                raise HistoryUnavailableError("history store unavailable: this store only reads")
            with map_errors(), _savepoint(self._borrowed):
                yield self._borrowed
            return
        with map_errors(), self._engine.begin() if write else self._engine.connect() as conn:
            if self.timeout_seconds and conn.dialect.name == "postgresql":
                millis = str(max(1, int(self.timeout_seconds * 1000)))
                conn.execute(
                    text(
                        "select set_config('statement_timeout', :ms, true), set_config('lock_timeout', :ms, true)"
                    ),
                    {"ms": millis},
                )
            yield conn

    # -- writes ----------------------------------------------------------------------------------
    def record(self, observations: Sequence[Observation]) -> RecordResult:
        return self.record_batches([observations])

    def record_batches(self, batches: Iterable[Sequence[Observation]]) -> RecordResult:
        with self._connection(write=True) as conn:
            tx = SqlTransaction(conn)
            try:
                return record_batches_in(tx, batches, self.learning)
            finally:
                tx.close()  # before commit or rollback: no write may still be running

    def save_nodes(self, profiles: Sequence[NodeProfile], grouping: Grouping) -> None:
        now = datetime.now(timezone.utc)
        values = []
        for p in profiles:
            group = grouping.group_of(p.node)
            values.append(
                rows.node_values(p, group.id if group else None, dict(group.ranks) if group else None, now)
            )
        with self._connection(write=True) as conn:
            conn.execute(delete(node).where(node.c.node.not_in([p.node for p in profiles])))
            inputs.forget_nodes_except(conn, [p.node for p in profiles])
            if values:
                conn.execute(upsert(conn.dialect.name, node, list(values[0]), ["node"]), values)

    def mark_unfinished(
        self, key: TaskKey, task_family: str, started_at: datetime, *, running: bool = True
    ) -> None:
        key = fit_task_key(key)
        values: dict[str, Any] = dict(zip(rows.KEY_COLUMNS, astuple(key), strict=True))
        values.update(task_family=fit_key(task_family), started_at=started_at, running=running)
        earlier = unfinished_attempt.c.try_number < key.try_number
        with self._connection(write=True) as conn:
            conn.execute(delete(unfinished_attempt).where(*_same_instance(key), earlier))
            conn.execute(
                upsert(conn.dialect.name, unfinished_attempt, list(values), rows.KEY_COLUMNS), values
            )

    def unmark_unfinished(self, key: TaskKey) -> None:
        key = fit_task_key(key)
        this_try = unfinished_attempt.c.try_number == key.try_number
        with self._connection(write=True) as conn:
            conn.execute(delete(unfinished_attempt).where(*_same_instance(key), this_try))

    def prune(
        self, *, keep_attempts: int, keep_days: float, now: datetime | None = None, dry_run: bool = False
    ) -> PruneResult:
        now = now or datetime.now(timezone.utc)
        doomed = self._doomed(keep_attempts, keep_days, now)
        count = families = 0
        with self._connection(write=not dry_run) as conn:
            if doomed is not None:
                count, families = conn.execute(
                    select(func.count(), func.count(doomed.c.task_family.distinct()))
                ).one()
            if not dry_run and count:
                conn.execute(delete(task_attempt).where(task_attempt.c.id.in_(select(doomed.c.id))))
            if not dry_run:  # notes of attempts never recorded (their workers died)
                lost = now - timedelta(seconds=STALE_AFTER_S)
                conn.execute(delete(unfinished_attempt).where(unfinished_attempt.c.started_at < lost))
        return PruneResult(int(count), int(families), dry_run)

    def _doomed(self, keep_attempts: int, keep_days: float, now: datetime) -> Any:
        """A subquery of the attempts a prune removes (None when both limits are off)."""
        conditions = []
        cutoff = prune_cutoff(now, keep_days)
        if cutoff is not None:
            conditions.append(task_attempt.c.finished_at < cutoff)
        if keep_attempts > 0:
            rank = (
                func.row_number()
                .over(
                    partition_by=task_attempt.c.task_family,
                    order_by=(task_attempt.c.finished_at.desc(), task_attempt.c.id.desc()),
                )
                .label("newest_rank")
            )
            ranked = select(task_attempt.c.id, task_attempt.c.task_family, rank).subquery()
            conditions.append(
                task_attempt.c.id.in_(select(ranked.c.id).where(ranked.c.newest_rank > keep_attempts))
            )
        if not conditions:
            return None
        return select(task_attempt.c.id, task_attempt.c.task_family).where(or_(*conditions)).subquery()

    def rebuild(self, *, fit_models: bool = True) -> int:
        with self._connection(write=True) as conn:
            return rebuild_all(conn, self.learning if fit_models else None)

    # -- reads -----------------------------------------------------------------------------------
    def family(self, task_family: str) -> FamilyState | None:
        task_family = fit_key(task_family)
        with self._connection() as conn:
            row = conn.execute(select(family).where(family.c.task_family == task_family)).first()
        return rows.family_state(row) if row is not None and row.attempts else None

    def families_named(self, task_families: Sequence[str]) -> dict[str, FamilyState]:
        names = sorted({fit_key(name) for name in task_families})
        if not names:
            return {}
        stmt = select(family).where(family.c.task_family.in_(names), family.c.attempts > 0)
        with self._connection() as conn:
            found = conn.execute(stmt).all()
        return {row.task_family: rows.family_state(row) for row in found}

    def count_unfinished(
        self,
        task_family: str,
        *,
        started_after: datetime,
        started_before: datetime,
        running_only: bool = False,
    ) -> int:
        stmt = select(func.count()).where(
            unfinished_attempt.c.task_family == fit_key(task_family),
            unfinished_attempt.c.started_at > started_after,
            unfinished_attempt.c.started_at < started_before,
            *([unfinished_attempt.c.running.is_(True)] if running_only else []),
        )
        with self._connection() as conn:
            return int(conn.execute(stmt).scalar() or 0)

    def progress(self, task_family: str) -> FamilyProgress | None:
        task_family = fit_key(task_family)
        stmt = select(family.c.attempts, family.c.completed).where(family.c.task_family == task_family)
        with self._connection() as conn:
            row = conn.execute(stmt).first()
        return FamilyProgress.of(row.attempts, row.completed) if row and row.attempts else None

    def history(
        self, task_family: str, *, limit: int = 500, dag_ids: frozenset[str] | None = None
    ) -> list[Observation]:
        task_family = fit_key(task_family)
        with self._connection() as conn:
            return SqlTransaction(conn).window(task_family, limit, dag_ids)[0]

    def newest_requests(
        self, task_families: Sequence[str], *, dag_ids: frozenset[str] | None = None
    ) -> dict[str, int | None]:
        names = sorted({fit_key(name) for name in task_families})
        if not names:
            return {}
        a = task_attempt.c
        conditions = [a.task_family == family.c.task_family]
        if dag_ids is not None:
            conditions.append(a.dag_id.in_(sorted(dag_ids)))
        # one statement, one index probe per family (the same one history(limit=1) makes)
        newest = (
            select(a.user_request_bytes)
            .where(*conditions)
            .order_by(a.finished_at.desc(), a.id.desc())
            .limit(1)
            .correlate(family)
            .scalar_subquery()
        )
        stmt = select(family.c.task_family, newest).where(family.c.task_family.in_(names))
        with self._connection() as conn:
            found = {name: request for name, request in conn.execute(stmt)}
        return {name: found.get(name) for name in names}

    def attempt(self, key: TaskKey) -> Observation | None:
        key = fit_task_key(key)
        with self._connection() as conn:
            return SqlTransaction(conn).existing([key]).get(key)

    def attempts_for_try(
        self, dag_id: str, task_id: str, try_number: int, *, limit: int = 200
    ) -> list[Observation]:
        dag_id, task_id = fit_key(dag_id), fit_key(task_id)
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
        with self._connection() as conn:
            return rows.observations(conn.execute(stmt).all())

    def distributions(self) -> Distributions:
        with self._connection() as conn:
            return Distributions.from_json(
                conn.execute(select(aggregate.c.distributions).where(aggregate.c.id == 1)).scalar()
            )

    def families(self, *, limit: int = 100, offset: int = 0) -> list[FamilyRollup]:
        stmt = (
            select(family)
            .where(family.c.attempts > 0)
            .order_by(family.c.attempts.desc(), family.c.task_family)
            .limit(limit)
            .offset(offset)
        )
        with self._connection() as conn:
            return [rows.family_state(r).rollup for r in conn.execute(stmt)]

    def donor_candidates(self, *, limit: int) -> list[tuple[Identity, int]]:
        c = family.c
        stmt = (
            select(c.task_family, c.image, c.program, c.usable_samples)
            .where(c.attempts > 0)
            .order_by(c.attempts.desc(), c.task_family)
            .limit(limit)
        )
        with self._connection() as conn:
            return [
                (Identity(r.task_family, r.image, r.program), r.usable_samples) for r in conn.execute(stmt)
            ]

    def family_count(self) -> int:
        with self._connection() as conn:
            return int(
                conn.execute(select(func.count()).select_from(family).where(family.c.attempts > 0)).scalar()
                or 0
            )

    def family_dags(self, task_family: str) -> list[str]:
        task_family = fit_key(task_family)
        stmt = (
            select(family_day.c.dag_id)
            .where(family_day.c.task_family == task_family, family_day.c.attempts != 0)
            .distinct()
            .order_by(family_day.c.dag_id)
        )
        with self._connection() as conn:
            return list(conn.execute(stmt).scalars())

    def day_totals(self, query: TotalsQuery) -> list[tuple[date, DayTotals]]:
        with self._connection() as conn:
            return totals.day_totals(conn, query)

    def family_totals(
        self,
        query: TotalsQuery,
        *,
        sort: str = "attempts",
        descending: bool = True,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[FamilyTotals], int]:
        with self._connection() as conn:
            return totals.family_totals(conn, query, sort, descending, limit, offset)

    def nodes(self) -> list[StoredNode]:
        with self._connection() as conn:
            return [rows.stored_node(r) for r in conn.execute(select(node).order_by(node.c.node))]

    def input_state(self, uris: Sequence[str], keys: Sequence[str]) -> InputState:
        with self._connection() as conn:
            return inputs.read_state(conn, uris, keys)

    def record_inputs(
        self, node: str | None, uses: Sequence[InputUse], evicted: Sequence[str], dag_id: str | None = None
    ) -> None:
        with self._connection(write=True) as conn:
            inputs.record(conn, node, uses, evicted, datetime.now(timezone.utc), dag_id)

    def cached_inputs(self, dag_ids: frozenset[str] | None = None) -> list[CachedInput]:
        with self._connection() as conn:
            return inputs.cached(conn, dag_ids=dag_ids)
