"""Unfinished attempts on both stores: noted at pod creation (Pending) and again when running,
removed by recording, counted by a decision that floors a family whose finished attempts are
outnumbered by running ones (core/unfinished.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.model import MemoryRequest, Observation, TaskKey, Usage
from airflow_adaptive.core.units import GIB
from airflow_adaptive.exceptions import HistoryUnavailableError
from airflow_adaptive.failopen import forget_warnings
from airflow_adaptive.store.api import HistoryStore
from tests.factories import attempt
from tests.memory_store import InMemoryHistoryStore

NOW = datetime.now(timezone.utc)
USER = MemoryRequest(8 * GIB, 8 * GIB)


def key(n: int, try_number: int = 1) -> TaskKey:
    return TaskKey("dag", "task", f"run{n}", -1, try_number)


def count(
    store: HistoryStore, family: str = "f", *, older_than_s: float = 0.0, running_only: bool = False
) -> int:
    return store.count_unfinished(
        family,
        started_after=NOW - timedelta(days=1),
        started_before=NOW - timedelta(seconds=older_than_s),
        running_only=running_only,
    )


def test_notes_are_counted_by_family_and_start(store: HistoryStore) -> None:
    for n, minutes in enumerate((1, 5, 10)):
        store.mark_unfinished(key(n), "f", NOW - timedelta(minutes=minutes))
    store.mark_unfinished(key(9), "g", NOW - timedelta(minutes=10))
    store.mark_unfinished(key(8), "f", NOW - timedelta(days=2))  # before the window
    assert count(store) == 3 and count(store, "g") == 1 and count(store, "none") == 0
    assert count(store, older_than_s=4 * 60) == 2  # started more than 4 minutes ago
    store.mark_unfinished(key(0), "f", NOW - timedelta(minutes=20))  # the same attempt again: moved
    assert count(store) == 3 and count(store, older_than_s=4 * 60) == 3


def test_a_pending_pod_is_counted_but_not_as_running_until_noted_again(store: HistoryStore) -> None:
    store.mark_unfinished(key(0), "f", NOW - timedelta(minutes=10), running=False)  # created, Pending
    store.mark_unfinished(key(1), "f", NOW - timedelta(minutes=10))
    assert count(store) == 2 and count(store, running_only=True) == 1
    store.mark_unfinished(key(0), "f", NOW - timedelta(minutes=1))  # it runs now
    assert count(store) == 2 and count(store, running_only=True) == 2
    store.record([replace(attempt(0), key=key(0))])
    assert count(store) == 1 and count(store, running_only=True) == 1


def test_recording_an_attempt_removes_its_note_only(store: HistoryStore) -> None:
    for n in range(3):
        store.mark_unfinished(attempt(n).key, "f", NOW - timedelta(minutes=1))
    store.mark_unfinished(replace(attempt(0).key, try_number=2), "f", NOW - timedelta(minutes=1))
    store.record([attempt(0), attempt(1)])
    assert count(store) == 2  # run2, and run0's second try


def test_a_new_try_replaces_the_earlier_tries_note_and_an_unrecorded_end_removes_it(
    store: HistoryStore,
) -> None:
    store.mark_unfinished(key(0), "f", NOW - timedelta(minutes=5))  # its pod was never created
    store.mark_unfinished(key(1), "f", NOW - timedelta(minutes=5))
    store.mark_unfinished(key(0, try_number=2), "f", NOW - timedelta(minutes=1))
    assert count(store) == 2 and count(store, older_than_s=120) == 1
    store.unmark_unfinished(key(0, try_number=2))  # killed: nothing to record
    store.unmark_unfinished(key(5))  # never noted: nothing happens
    assert count(store) == 1


def test_a_failed_recording_keeps_the_notes(store: HistoryStore) -> None:
    store.mark_unfinished(attempt(0).key, "f", NOW - timedelta(minutes=1))

    def batches() -> Iterator[list[Observation]]:
        yield [attempt(0)]
        raise ValueError("the trace file broke off")

    with pytest.raises(ValueError):
        store.record_batches(batches())
    assert count(store) == 1


def test_prune_removes_notes_whose_attempts_were_never_recorded(store: HistoryStore) -> None:
    store.mark_unfinished(key(0), "f", NOW - timedelta(days=3))  # its worker died
    store.mark_unfinished(key(1), "f", NOW - timedelta(hours=1))
    store.prune(keep_attempts=0, keep_days=0, now=NOW, dry_run=True)
    assert count(store, older_than_s=0) == 1  # the window already leaves the lost one out
    store.prune(keep_attempts=0, keep_days=0, now=NOW)
    everything = store.count_unfinished("f", started_after=NOW - timedelta(days=30), started_before=NOW)
    assert everything == 1


def scatter(store: HistoryStore, running: int, *, pending: bool = False) -> Advisor:
    """One finished attempt of 'f' (1 GiB, 60 s) and ``running`` attempts started 10 minutes ago
    (``pending``: whose pods were created then and wait still); other families used a quarter of
    their 4 GiB requests."""
    others = [replace(attempt(n, family=f"g{n}", peak=GIB), memory_request_bytes=4 * GIB) for n in range(30)]
    first = replace(attempt(100, peak=GIB), usage=Usage(peak_memory_bytes=GIB, wall_seconds=60.0))
    store.record([*others, first])
    for n in range(running):
        store.mark_unfinished(key(200 + n), "f", NOW - timedelta(minutes=10), running=not pending)
    settings = get_settings()  # a budget of 1 has no small-sample bound: the guard alone
    return Advisor(replace(settings, sizing=replace(settings.sizing, max_oom_rate=1.0)), lambda: store)


def test_a_scatter_sized_by_its_first_finisher_starts_as_a_new_family(store: HistoryStore) -> None:
    decision = scatter(store, running=5).memory.decide("f", USER)
    assert decision.memory_request_bytes == 8 * GIB  # as a new family: its request
    assert (
        "but 5 unfinished attempts have run longer than the finished one took (1 min)" in decision.explanation
    )
    assert "its request 8 GiB, as a new family starts" in decision.explanation
    assert decision.details["unfinished_longer_than_mean"] == 5  # decide --json shows it


def test_pods_waiting_pending_have_not_run_and_change_nothing(store: HistoryStore) -> None:
    decision = scatter(store, running=5, pending=True).memory.decide("f", USER)  # a full cluster
    assert decision.memory_request_bytes == pytest.approx(1.15 * GIB, rel=0.01)  # P95 + 15 %
    assert "unfinished" not in decision.explanation


def test_unfinished_attempts_that_do_not_outnumber_change_nothing(store: HistoryStore) -> None:
    decision = scatter(store, running=1).memory.decide("f", USER)
    assert decision.memory_request_bytes == pytest.approx(1.15 * GIB, rel=0.01)  # P95 + 15 %
    assert "unfinished" not in decision.explanation


def test_an_anchor_strategy_is_never_floored(store: HistoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__STRATEGY", "pc95")
    get_settings.cache_clear()
    decision = scatter(store, running=5).memory.decide("f", USER)
    assert decision.memory_request_bytes == GIB and "unfinished" not in decision.explanation


class _Silent(InMemoryHistoryStore):
    """A store whose errors carry no message at all."""

    def mark_unfinished(
        self, key: TaskKey, task_family: str, started_at: datetime, *, running: bool = True
    ) -> None:
        raise HistoryUnavailableError("")

    def unmark_unfinished(self, key: TaskKey) -> None:
        raise HistoryUnavailableError("")


def test_an_error_without_a_message_is_logged_by_its_type(caplog: pytest.LogCaptureFixture) -> None:
    forget_warnings()
    advisor = Advisor(get_settings(), _Silent)
    advisor.recording.started("f", key(0))
    advisor.recording.ended_unrecorded(key(0))
    logged = [r.getMessage() for r in caplog.records]
    assert any("attempt not noted as started: HistoryUnavailableError" in m for m in logged)
    assert any("unrecorded attempt not cleared: HistoryUnavailableError" in m for m in logged)


def test_noting_a_start_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    down = InMemoryHistoryStore()
    down.faults.down = True
    forget_warnings()
    advisor = Advisor(get_settings(), lambda: down)
    advisor.recording.started("f", key(0))
    advisor.recording.started("f", key(1))
    assert sum("attempt not noted as started" in r.getMessage() for r in caplog.records) == 1
