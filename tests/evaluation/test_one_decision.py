"""One decision: what the replay allocates is what the operator's decision returns for the same history.

The replay keeps its history in a store of its own process; here every store write it made (each
recorded attempt, each attempt noted as started) is repeated, in order, against the SQL store on the
test database, and at sampled decisions the operator's advisor is asked on that store, at the
replay's clock, for the same try. Both must agree to the byte, on every trace and both histories.
"""

from __future__ import annotations

import functools
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.evaluation.live import Try, replay_settings
from airflow_adaptive.evaluation.replay import (
    ReplayConfig,
    arrival_order,
    replay,
    replay_cap_bytes,
    sizing_for,
)
from airflow_adaptive.store.learning import Learning
from airflow_adaptive.store.sql import SqlHistoryStore
from airflow_adaptive.traces.load import expand_paths, replay_input
from airflow_adaptive.traces.runs import TaskRun
from tests.conftest import EXAMPLES, SHARED_DATA, empty_history_tables

ARRIVALS = 30  # the first tasks of each trace (their decisions see every kind of history state)
CHECKED = 6  # decisions asked again of the SQL store, per trace and history


def traces() -> list[str]:
    found, _ = expand_paths([str(SHARED_DATA)]) if SHARED_DATA.exists() else ([], [])
    examples, _ = expand_paths(
        [str(EXAMPLES / name) for name in ("nextflow", "cctools", "wfformat", "lotaru")]
    )
    return sorted(found) + sorted(examples)


@functools.cache  # read once for both histories
def first_arrivals(path: str) -> tuple[tuple[TaskRun, ...], int]:
    runs, _ = replay_input(path)
    return tuple(runs[i] for i in arrival_order(runs)[:ARRIVALS]), replay_cap_bytes(ReplayConfig(), runs)


def _at(when: datetime) -> datetime:
    return when


def repeat_on(store: SqlHistoryStore, sizing: SizingSettings, journal: list[tuple[Any, ...]]) -> int:
    """Repeat the replay's store writes on ``store`` and ask its sampled decisions again; returns how
    many decisions were compared."""
    settings = replay_settings(sizing)
    decisions = [i for i, entry in enumerate(journal) if entry[0] == "decide"]
    sampled = set(decisions[:: max(1, len(decisions) // CHECKED)])
    for i, entry in enumerate(journal):
        if entry[0] == "record":
            store.record(entry[1])
        elif entry[0] == "start":
            store.mark_unfinished(entry[1], entry[2], entry[3], running=entry[4])
        elif i in sampled:
            _, attempt, when, replayed_bytes = entry
            assert isinstance(attempt, Try)
            advisor = Advisor(settings, lambda: store, clock=functools.partial(_at, when))
            live = advisor.memory.decide(
                attempt.family,
                attempt.user,
                attempt.key,
                input_size_bytes=attempt.input_size_bytes,
                image=attempt.image,
                program=attempt.program,
            )
            assert live.memory_request_bytes == replayed_bytes, (attempt, live.explanation)
    return len(sampled)


@pytest.mark.parametrize("history", ["completed", "sequential"])
def test_the_replay_allocates_what_the_live_decision_returns(history: str, engine: Any) -> None:
    paths = traces()
    assert len(paths) >= 5  # the shipped examples at least
    compared = 0
    for path in paths:
        runs, cap = first_arrivals(path)
        config = ReplayConfig(history=history, cap_bytes=cap)
        journal: list[tuple[Any, ...]] = []
        replay(runs, "adaptive", config, journal=journal)
        sizing = sizing_for("adaptive", config, cap, {})
        store = SqlHistoryStore(engine, Learning(sizing, replay_settings(sizing).history_window))
        compared += repeat_on(store, sizing, journal)
        empty_history_tables()  # the next trace starts empty
    assert compared >= CHECKED * len(paths)


def test_a_decision_that_differs_from_the_replay_is_caught(engine: Any) -> None:
    """The comparison can fail: the same journal asked under another strategy disagrees."""
    runs, cap = first_arrivals(str(Path(EXAMPLES) / "nextflow" / "chipseq_trace.txt"))
    config = ReplayConfig(history="sequential", cap_bytes=cap)
    journal: list[tuple[Any, ...]] = []
    replay(runs, "adaptive", config, journal=journal)
    other = sizing_for("pc95", config, cap, {})
    with pytest.raises(AssertionError):
        repeat_on(SqlHistoryStore(engine, Learning(other, 500)), other, journal)
