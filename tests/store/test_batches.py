"""Batches written to the history store: counted, atomic, exact, and refitted once per family."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.model import Observation
from airflow_adaptive.core.units import GIB
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.store.api import HistoryStore, TotalsQuery
from airflow_adaptive.store.learning import Learning
from airflow_adaptive.store.sql import SqlHistoryStore
from airflow_adaptive.store.sql_transaction import SqlTransaction
from airflow_adaptive.store.tables import task_attempt
from tests.conftest import DB_KIND
from tests.factories import T0, attempt
from tests.memory_store import InMemoryHistoryStore


def keyed(n: int, peak: int, run: str = "import") -> Observation:
    obs = attempt(n, family=f"f{n % 5}", peak=peak)
    return replace(obs, key=replace(obs.key, run_id=run, map_index=n))


def stored_peaks(store: HistoryStore) -> dict[tuple[str, int], int | None]:
    found = [o for f in range(5) for o in store.history(f"f{f}", limit=10**5)]
    return {(o.key.run_id, o.key.map_index): o.usage.peak_memory_bytes for o in found}


def test_batches_count_new_replaced_and_repeated_keys_and_keep_the_last(store: HistoryStore) -> None:
    """Large batches (the import path: only keys that can be stored are looked up; on PostgreSQL,
    COPY, straight into the table for a run never stored, else through a temporary table) give
    the same attempts and totals as recording each attempt, and say exactly which keys were new,
    already stored, or repeated in the input."""
    store.record([keyed(n, 1) for n in range(500)])
    batches = [
        [keyed(n, 2) for n in range(2500)],
        [keyed(n, 3) for n in range(2000, 4500)] + [keyed(4499, 4)],
        [keyed(n, 5) for n in range(10)] + [keyed(n, 6, run="fresh") for n in range(2500)],
    ]
    result = store.record_batches(iter(batches))
    assert (result.new, result.replaced, result.repeated) == (2000 + 2000 + 2500, 500, 500 + 1 + 10)
    want = {("import", n): 5 if n < 10 else 2 if n < 2000 else 4 if n == 4499 else 3 for n in range(4500)}
    assert stored_peaks(store) == {**want, **{("fresh", n): 6 for n in range(2500)}}
    live = {r.task_family: r for r in store.families(limit=100)}
    assert store.rebuild() == 5
    for name, rollup in live.items():
        rebuilt = store.family(name).rollup  # type: ignore[union-attr]
        assert (
            (rollup.attempts, rollup.peak_memory_n)
            == (rebuilt.attempts, rebuilt.peak_memory_n)
            == (1400, 1400)
        )
        assert rollup.peak_memory_sum == pytest.approx(rebuilt.peak_memory_sum)


def test_a_failing_input_leaves_nothing_of_its_batches(store: HistoryStore) -> None:
    store.record([keyed(n, 1) for n in range(10)])

    def batches() -> Iterator[list[Observation]]:
        yield [keyed(n, 2) for n in range(3000)]
        raise TraceFormatError("trace.csv:3002: broken")

    with pytest.raises(TraceFormatError, match="3002"):
        store.record_batches(batches())
    assert stored_peaks(store) == {("import", n): 1 for n in range(10)}


def test_a_large_batch_keeps_every_text_exactly(store: HistoryStore) -> None:
    """On PostgreSQL a large batch travels as COPY text: separators, backslashes and empty strings
    must come back as they went in (and nothing as NULL that was not)."""
    odd = ["tab\there", "line\nbreak", "back\\slash", "", "\\N", "carriage\rreturn", "ünïcode ✓"]
    batch = [
        replace(keyed(n, 7), explanation=odd[n % len(odd)], node_name=odd[(n + 1) % len(odd)])
        for n in range(2500)
    ]
    store.record_batches([batch])
    found = {
        o.key.map_index: (o.explanation, o.node_name)
        for f in range(5)
        for o in store.history(f"f{f}", limit=10**4)
    }
    assert found == {n: (odd[n % len(odd)], odd[(n + 1) % len(odd)]) for n in range(2500)}


@pytest.mark.skipif(DB_KIND != "postgres", reason="only PostgreSQL writes large batches in the background")
def test_a_background_write_that_fails_fails_its_transaction(engine: Any) -> None:
    """A COPY runs while Python reads the next batch; its error must reach the caller at the next
    use of the connection, and nothing of the transaction may stay."""
    batch = [keyed(n, 1) for n in range(2500)]
    with pytest.raises(IntegrityError, match="adaptive_task_attempt_key_uq"), engine.begin() as conn:
        tx = SqlTransaction(conn)
        try:
            tx.upsert(batch, all_new=True)
            tx.upsert(batch, all_new=True)  # claimed new, but stored: the unique index refuses it
            tx.lock_distributions()
        finally:
            tx.close()
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(task_attempt)).scalar() == 0


@pytest.mark.parametrize("kind", ["memory", "sql"])
def test_an_import_refits_each_family_once_as_a_rebuild_would(kind: str, engine: Any) -> None:
    """An import over batches refits each family once, at the end: the model must be the one a
    rebuild fits on the store's own window (finish time, then insertion order; ties, out-of-order
    times, a family stored before and a window shorter than the import included)."""
    learning = Learning(SizingSettings(), history_window=50)
    store = InMemoryHistoryStore(learning) if kind == "memory" else SqlHistoryStore(engine, learning)
    rng = random.Random(7)
    made = [
        replace(
            attempt(n, family=f"g{n % 3}", peak=rng.randint(1, 50) * 10**8, run=f"r{n}"),
            finished_at=T0 + timedelta(minutes=rng.randrange(60)),
        )
        for n in range(5000)
    ]
    store.record([attempt(0, family="old", peak=GIB)])  # a family stored before: read back
    store.record_batches([made[:2500], [*made[2500:], attempt(1, family="old", peak=2 * GIB)]])
    names = ["g0", "g1", "g2", "old"]
    imported = {name: store.family(name).model for name in names}  # type: ignore[union-attr]
    assert store.rebuild() == 4
    for name in names:
        state = store.family(name)
        rebuilt, before = state.model if state else None, imported[name]
        assert before is not None and rebuilt is not None
        assert (before.state, before.window_samples) == (
            rebuilt.state,
            rebuilt.window_samples,
        )


def test_an_attempt_recorded_again_without_a_time_keeps_its_first(store: HistoryStore) -> None:
    """A trace without times (CCTools) imported twice: its attempts, their family's last finish and
    its days stay as the first import left them, instead of moving to the second import's time."""
    untimed = [replace(keyed(n, 1), finished_at=None) for n in range(5)]
    store.record(untimed)
    first = {o.key: o.finished_at for o in store.history("f0", limit=10)}
    last, days = store.family("f0").rollup.last_finished_at, store.day_totals(TotalsQuery())  # type: ignore[union-attr]
    assert last is not None and last in first.values()  # the rollup says when, as the attempts do
    assert store.record(untimed).replaced == 5
    assert {o.key: o.finished_at for o in store.history("f0", limit=10)} == first
    assert store.family("f0").rollup.last_finished_at == last  # type: ignore[union-attr]
    assert store.day_totals(TotalsQuery()) == days
