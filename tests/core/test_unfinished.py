"""The unfinished-attempt guard (core/unfinished.py) in the pure decision and in the replay."""

from __future__ import annotations

from airflow_adaptive.core.decide import SizingSettings, decide_memory
from airflow_adaptive.core.model import MemoryRequest
from airflow_adaptive.core.sizing.prior import PeakPrior
from airflow_adaptive.core.unfinished import STALE_AFTER_S, Running, Unfinished
from airflow_adaptive.core.units import GIB
from airflow_adaptive.evaluation.replay import ReplayConfig, replay
from airflow_adaptive.traces.runs import TaskRun
from tests.factories import attempt


def test_only_attempts_past_the_mean_and_not_lost_count() -> None:
    now_s = STALE_AFTER_S + 1000.0
    running = Running()
    for task, elapsed_s in enumerate([10.0, 60.0, 61.0, 500.0, 500.0, STALE_AFTER_S + 1]):
        running.start(task, now_s - elapsed_s)
    running.end(4)  # one of the two at 500 s finished
    running.end(99)  # never started: nothing happens
    assert len(running) == 5
    found = running.longer_than(60.0, now_s)
    assert found == Unfinished(2, 60.0)  # 61 s and 500 s; not 60 s, not the lost one
    assert found.outnumber(1) and not found.outnumber(2) and not found.outnumber(0)
    assert "2 unfinished attempts have run longer than the finished one took (1 min)" in found.explain(1)
    assert "than the 3 finished ones took on average (1 min)" in found.explain(3)


# A budget of 1 has no small-sample bound, which would keep one finished task's family at its
# request: these tests see the guard alone.
GUARD_ALONE = SizingSettings(max_oom_rate=1.0)


def prior() -> PeakPrior:
    peaks = PeakPrior()
    for _ in range(30):
        peaks.add(GIB)  # other families' tasks used 1 GiB
    return peaks


def test_the_decision_takes_the_larger_of_the_model_and_a_new_familys_start() -> None:
    history, user = [attempt(0, peak=GIB)], MemoryRequest(8 * GIB, 8 * GIB)
    plain = decide_memory(history, user, GUARD_ALONE, prior=prior())
    many = Unfinished(3, 60.0)
    floored = decide_memory(history, user, GUARD_ALONE, prior=prior(), unfinished=many)
    assert plain.memory_request_bytes == int(1.15 * GIB)
    assert floored.memory_request_bytes == 8 * GIB  # a new family's start: its request
    assert "but 3 unfinished attempts" in floored.explanation
    few = decide_memory(history, user, GUARD_ALONE, prior=prior(), unfinished=Unfinished(1, 60.0))
    assert few.memory_request_bytes == plain.memory_request_bytes
    small_request = MemoryRequest(GIB, GIB)  # the start would be below the model: the model stands
    below = decide_memory(history, small_request, GUARD_ALONE, prior=prior(), unfinished=many)
    assert below.memory_request_bytes == int(1.15 * GIB) and "unfinished" not in below.explanation


def test_without_a_request_the_guard_gives_what_a_new_family_gets() -> None:
    """A new family that asks for no memory starts at other families' P99 once 100 of their peaks
    are known, and with no limit before: a family whose unfinished tasks outnumber its finished
    ones gets the same, not its own model of the smallest tasks."""
    nothing = MemoryRequest()
    guarded = SizingSettings()  # the default budget: a P99 needs 100 peaks
    history = [attempt(n, peak=GIB // 8) for n in range(3)]
    waits = decide_memory(history, nothing, guarded, prior=prior(), unfinished=Unfinished(5, 60.0))
    assert (waits.memory_request_bytes, waits.memory_limit_bytes) == (None, None)
    assert "P99 of other task families' peaks needs 100 of them, the store holds 30" in waits.explanation
    ready = prior()
    for _ in range(70):
        ready.add(GIB // 2)
    floored = decide_memory(history, nothing, guarded, prior=ready, unfinished=Unfinished(5, 60.0))
    assert floored.memory_request_bytes == GIB  # P99 of 70 x 512 MiB and 30 x 1 GiB, + 10 %, at most 1 GiB
    assert "but 5 unfinished attempts" in floored.explanation


def fan_out(tasks: int) -> list[TaskRun]:
    """A task every 10 s, each running longer and needing more memory than the one before: the
    first to finish are the smallest."""
    return [
        TaskRun(
            "scatter",
            peak_bytes=int((0.5 + i / tasks) * GIB),
            wall_seconds=50.0 + 50.0 * i,
            user_request_bytes=4 * GIB,
            start_s=10.0 * i,
            finish_s=10.0 * i + 50.0 + 50.0 * i,
        )
        for i in range(tasks)
    ]


def test_the_replay_floors_a_scatter_while_its_unfinished_tasks_outnumber_its_finished() -> None:
    runs = fan_out(40)
    guarded = replay(runs, "adaptive", ReplayConfig(max_oom_rate=1.0))
    blind = replay(runs, "adaptive", ReplayConfig(guard_unfinished=False, max_oom_rate=1.0))
    assert guarded.retries < blind.retries / 2  # the first finisher sized the rest in the blind replay
    assert blind.retries >= 20
    sequential = ReplayConfig(history="sequential")
    assert (
        replay(runs, "adaptive", sequential).retries
        == replay(runs, "adaptive", ReplayConfig(history="sequential", guard_unfinished=False)).retries
    )
    anchor = [replay(runs, "pc95", ReplayConfig(guard_unfinished=g)).waste_byte_s for g in (True, False)]
    assert anchor[0] == anchor[1]  # the anchors stay as published
