"""Recompute every family's rollup and model and the store-wide distributions from the attempts.

Used after a bulk load with SQL or a manual fix (``airflow-adaptive history rebuild``) and by the
migration that introduced rollups; :func:`count_spreads` by the one that introduced spreads.
Attempts are streamed in family order, so memory stays at one family's window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, Table, delete, inspect, select

from airflow_adaptive.core.cpu import cpu_history
from airflow_adaptive.core.decide import to_samples
from airflow_adaptive.core.fitted_model import fit_model
from airflow_adaptive.core.model import Observation
from airflow_adaptive.core.rollup import (
    DayKey,
    DayTotals,
    Distributions,
    contributions,
)
from airflow_adaptive.core.runtimes import recorded_runs
from airflow_adaptive.core.sizing.small_samples import SpreadMoments
from airflow_adaptive.core.sketch import LogHistogram
from airflow_adaptive.store import rows
from airflow_adaptive.store.api import FamilyState
from airflow_adaptive.store.learning import Learning, day_deltas
from airflow_adaptive.store.tables import aggregate, family, family_day, task_attempt

_BATCH = 1000


def _present(conn: Connection, table: Table) -> list[str]:
    """The table's columns that the database has: a migration rebuilds before later ones add theirs."""
    found = {column["name"] for column in inspect(conn).get_columns(table.name)}
    return [column.name for column in table.columns if column.name in found]


def _families(conn: Connection) -> Iterator[tuple[str, list[tuple[int, Observation]]]]:
    """(family, [(id, attempt) ...]) in family order, oldest attempt first."""
    columns = [task_attempt.c[name] for name in _present(conn, task_attempt)]
    stmt = select(*columns).order_by(
        task_attempt.c.task_family, task_attempt.c.finished_at, task_attempt.c.id
    )
    current: str | None = None
    batch: list[tuple[int, Observation]] = []
    # Options on the statement, not the connection: a server-side cursor must not stick to later ones.
    for row in conn.execute(stmt.execution_options(stream_results=True, yield_per=_BATCH)):
        if row.task_family != current and current is not None:
            yield current, batch
            batch = []
        current = row.task_family
        for obs in rows.observations([row]):
            batch.append((row.id, obs))
    if current is not None:
        yield current, batch


def family_state(
    name: str, attempts: list[tuple[int, Observation]], learning: Learning | None
) -> FamilyState:
    rollup = contributions(name, [obs for _, obs in attempts])
    if learning is None or not attempts:
        return FamilyState(rollup)
    window = deque(attempts, maxlen=learning.history_window)
    newest_id = max(i for i, _ in window)
    observations = [obs for _, obs in window]
    cpu = cpu_history(observations, learning.sizing.cpu_quantile)
    samples = to_samples(observations)
    runs = recorded_runs(observations)
    model = fit_model(samples, learning.sizing, rollup.usable_samples, newest_id, None, cpu, runs)
    return FamilyState(rollup, model)


def rebuild_states(
    families: Iterable[tuple[str, list[tuple[int, Observation]]]], learning: Learning | None
) -> tuple[list[FamilyState], Distributions, dict[DayKey, DayTotals]]:
    """Every family's state, the distributions and the day totals, from
    (family, [(id, attempt) oldest first])."""
    states = []
    distributions = Distributions()
    days: dict[DayKey, DayTotals] = {}
    for name, attempts in families:
        state = family_state(name, attempts, learning)
        observations = [obs for _, obs in attempts]
        for obs in observations:
            distributions.replace_attempt(None, obs)
        days.update(day_deltas(observations, {}))  # keys start with the family: no overlap between them
        distributions.move_family(None, state.rollup)
        distributions.move_scores(None, state.model)
        states.append(state)
    return states, distributions, days


def rebuild_all(conn: Connection, learning: Learning | None) -> int:
    """Replace every family row and the distributions; models too unless ``learning`` is None."""
    states, distributions, days = rebuild_states(_families(conn), learning)
    now = datetime.now(timezone.utc)
    present = set(_present(conn, family))
    values: list[dict[str, Any]] = [
        {
            name: value
            for name, value in {
                "task_family": state.rollup.task_family,
                **rows.family_values(state),
                "model_fitted_at": now if state.model is not None else None,
            }.items()
            if name in present
        }
        for state in states
    ]
    conn.execute(delete(family))
    for start in range(0, len(values), _BATCH):
        conn.execute(family.insert(), values[start : start + _BATCH])
    conn.execute(delete(family_day))
    day_values = rows.day_rows(days)
    for start in range(0, len(day_values), _BATCH):
        conn.execute(family_day.insert(), day_values[start : start + _BATCH])
    conn.execute(delete(aggregate))
    conn.execute(aggregate.insert().values(id=1, distributions=distributions.to_json(), updated_at=now))
    return len(values)


def count_spreads(conn: Connection) -> None:
    """Count every family's spread of log peaks into the store-wide row, from the families' peak
    histograms (the migration that introduced the counts; a store without that row has nothing)."""
    stored = conn.execute(select(aggregate.c.distributions).where(aggregate.c.id == 1)).first()
    if stored is None:
        return
    distributions = Distributions.from_json(stored.distributions)
    distributions.spread = SpreadMoments()
    for (peaks,) in conn.execute(select(family.c.peaks).execution_options(yield_per=_BATCH)):
        histogram = LogHistogram(peaks if isinstance(peaks, dict) else None)
        distributions.spread.add(*histogram.log_variance())
    conn.execute(aggregate.update().where(aggregate.c.id == 1).values(distributions=distributions.to_json()))
