"""The replay evaluator on hand-checked cases: what a kill costs, retries, the cap, histories."""

from __future__ import annotations

import numpy as np
import pytest

from airflow_adaptive.core.units import GIB, MIB
from airflow_adaptive.evaluation.replay import ReplayConfig, default_cap_bytes, replay
from airflow_adaptive.exceptions import InvalidSettingError
from airflow_adaptive.traces.runs import TaskRun


def run(peak_mib: int, seconds: float = 3600.0, request_mib: int | None = None, family: str = "f") -> TaskRun:
    return TaskRun(family, peak_mib * MIB, seconds, None, None if request_mib is None else request_mib * MIB)


def test_replay_applies_the_oom_budget() -> None:
    rng = np.random.default_rng(5)
    runs = [run(int(2048 * v), 600.0) for v in rng.lognormal(0.0, 0.25, 400)]
    budgets = [0.01, 0.2]
    kills = [
        replay(runs, "adaptive", ReplayConfig(time_to_failure=0.1, max_oom_rate=b)).retries for b in budgets
    ]
    assert kills[0] < kills[1]
    assert kills[0] <= 0.01 * 400 + 10  # the budget, plus the kills of the first tasks (cold, no rule yet)


def test_replay_charges_failed_attempts_and_counts_retries() -> None:
    runs = [run(1000, request_mib=512), run(400, request_mib=512)]
    result = replay(runs, "user", ReplayConfig(history="sequential", cap_bytes=4096 * MIB))
    # Task 1: 512 killed (512 MiB·h wasted), 1024 succeeds (24 MiB·h over). Task 2: 112 MiB·h over.
    expected_mib_h = 512 + 24 + 112
    assert result.waste_byte_s == pytest.approx(expected_mib_h * MIB * 3600)
    metrics = result.metrics()
    assert metrics["waste_gb_h"] == pytest.approx(expected_mib_h * MIB / 1e9)
    assert metrics["retries_per_100"] == 50.0 and metrics["failed"] == 0
    assert metrics["maq"] == pytest.approx(1400 / (1400 + expected_mib_h))
    assert metrics["ate"] == pytest.approx((1000 / (512 + 1024) + 400 / 512) / 2)
    whole = (4096 - 1000) + (4096 - 400)
    assert metrics["wrr"] == pytest.approx(1 - expected_mib_h / whole)


def test_time_to_failure_scales_the_cost_of_a_kill() -> None:
    runs = [run(1000, request_mib=512)]
    full = replay(runs, "user", ReplayConfig(cap_bytes=4096 * MIB)).waste_byte_s
    tenth = replay(runs, "user", ReplayConfig(cap_bytes=4096 * MIB, time_to_failure=0.1)).waste_byte_s
    assert full - tenth == pytest.approx(512 * MIB * 3600 * 0.9)


def test_a_task_above_the_cap_never_succeeds() -> None:
    result = replay([run(5000, request_mib=1024)], "user", ReplayConfig(cap_bytes=4096 * MIB))
    assert result.failed == 1 and result.retries == 3  # 1024, 2048, 4096: all killed


def test_completed_history_hides_tasks_still_running() -> None:
    first = TaskRun("f", 100 * MIB, 100.0, None, 1000 * MIB, start_s=0.0, finish_s=100.0)
    overlapping = TaskRun("f", 100 * MIB, 10.0, None, 1000 * MIB, start_s=50.0, finish_s=60.0)
    later = TaskRun("f", 100 * MIB, 10.0, None, 1000 * MIB, start_s=200.0, finish_s=210.0)
    completed = replay(
        [first, overlapping, later], "pc95", ReplayConfig(history="completed", cap_bytes=4 * GIB)
    )
    sequential = replay(
        [first, overlapping, later], "pc95", ReplayConfig(history="sequential", cap_bytes=4 * GIB)
    )
    assert [a for _, a, _ in completed.first_allocations] == [1000 * MIB, 1000 * MIB, 100 * MIB]
    assert [a for _, a, _ in sequential.first_allocations] == [1000 * MIB, 100 * MIB, 100 * MIB]


def test_default_cap_is_the_largest_peak_rounded_up_to_a_power_of_two() -> None:
    assert default_cap_bytes([run(3000), run(100)]) == 4096 * MIB
    assert default_cap_bytes([run(4096)]) == 4096 * MIB


def test_replay_is_deterministic_for_random_strategies() -> None:
    runs = [run(100 + (i * 37) % 900, 60.0, family=f"f{i % 3}") for i in range(300)]
    a = replay(runs, "greedy-buckets").metrics()
    b = replay(runs, "greedy-buckets").metrics()
    assert a == b
    assert a["waste_gb_h"] > 0


def test_bad_replay_settings_are_rejected() -> None:
    with pytest.raises(InvalidSettingError, match="history"):
        ReplayConfig(history="future")
    with pytest.raises(InvalidSettingError, match="time_to_failure"):
        ReplayConfig(time_to_failure=0.0)
