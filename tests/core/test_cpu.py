"""CPU requests from recorded cores busy (size_cpu), on hand-computed cases."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_adaptive.core.cpu import CpuHistory, cpu_history, decide_cpu
from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage


def attempt(
    cpu_s: float | None, wall_s: float | None, reason: ExitReason = ExitReason.COMPLETED
) -> Observation:
    return Observation(
        TaskKey("d", "t", f"r{cpu_s}-{wall_s}"),
        "f",
        Usage(1, cpu_s, wall_s, None, None, PeakKind.MEASURED),
        reason,
    )


def test_cores_busy_of_completed_attempts_only() -> None:
    window = [attempt(100.0, 100.0), attempt(300.0, 100.0), attempt(200.0, 100.0), attempt(400.0, 100.0),
              attempt(900.0, 100.0, ExitReason.OOM_KILLED), attempt(None, 100.0), attempt(50.0, 0.0)]  # fmt: skip
    history = cpu_history(window, 0.9)
    # cores 1, 2, 3, 4: numpy's P90 is 3 + 0.7 x (4 - 3) = 3.7; the kill, no CPU, no wall: left out
    assert history.attempts == 4 and history.cores == 3.7000000000000002
    assert cpu_history([attempt(None, 10.0)], 0.9) == CpuHistory(None, 0)


def test_the_request_has_a_floor_and_two_ceilings() -> None:
    history = CpuHistory(3.7000000000000002, 4)  # the quantile above: 3.7 cores, 3700m (not 3701m)
    args = {"limit_millicores": None, "largest_node_millicores": 8000}
    assert decide_cpu(history, 0.9, 100, **args) == (
        3700,
        "cpu: P90 of 4 attempts' cores busy = 3.70 -> request 3700m",
    )
    assert decide_cpu(CpuHistory(3.7001, 4), 0.9, 100, **args)[0] == 3701  # up to whole millicores
    assert decide_cpu(CpuHistory(0.02, 4), 0.9, 100, **args)[0] == 100
    assert decide_cpu(CpuHistory(12.0, 4), 0.9, 100, **args) == (
        8000, "cpu: P90 of 4 attempts' cores busy = 12.00 -> request 8000m (capped at the largest node)")  # fmt: skip
    limited = decide_cpu(history, 0.9, 100, limit_millicores=2000, largest_node_millicores=8000)
    assert limited[0] == 2000 and limited[1].endswith("(capped at the CPU limit)")
    assert decide_cpu(history, 0.9, 100, limit_millicores=None, largest_node_millicores=None)[0] is None
    assert decide_cpu(None, 0.9, 100, **args) == (None, "cpu: no recorded cores busy yet, the request stays")


def test_bad_cpu_settings_are_one_typed_line(monkeypatch: Any) -> None:
    from airflow_adaptive.config import load_settings
    from airflow_adaptive.exceptions import InvalidConfigError

    for option, value, says in (
        ("MIN_CPU", "lots", "[adaptive] min_cpu: 'lots' is not a Kubernetes quantity"),
        ("MIN_CPU", "0", "[adaptive] min_cpu: '0' must be a positive quantity"),
        ("CPU_QUANTILE", "1.5", "[adaptive] cpu_quantile = '1.5' is not between 0 and 1"),
    ):
        monkeypatch.setenv(f"AIRFLOW__ADAPTIVE__{option}", value)
        with pytest.raises(InvalidConfigError) as raised:
            load_settings()
        assert str(raised.value).startswith(says) and "\n" not in str(raised.value)
        monkeypatch.delenv(f"AIRFLOW__ADAPTIVE__{option}")
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MIN_CPU", "250m")
    assert load_settings().sizing.min_cpu_millicores == 250
