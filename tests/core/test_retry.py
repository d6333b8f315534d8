"""The retry after an OOM kill as a decision: adaptive's candidates, and the ``strategy`` policy."""

from __future__ import annotations

from airflow_adaptive.core.decide import SizingSettings, decide_memory
from airflow_adaptive.core.model import ExitReason, MemoryRequest, Observation, TaskKey, Usage
from airflow_adaptive.core.sizing import Sample, make_predictor
from airflow_adaptive.core.sizing.retry import vpa_bump
from airflow_adaptive.core.units import GIB, MIB, format_bytes

BIMODAL = [Sample((2 if i % 2 else 10) * GIB, wall_seconds=60.0) for i in range(40)]


def test_a_bimodal_family_retries_at_its_upper_mode_instead_of_doubling_twice() -> None:
    model = make_predictor("adaptive").fit(BIMODAL)
    retry = model.retry(int(2.3 * GIB))
    assert 10 * GIB <= retry < 11.5 * GIB  # the upper mode: one kill, where doubling takes three
    assert model.retry(int(2.3 * GIB)) == retry  # pure: the same answer twice


def test_a_limit_above_most_peaks_is_doubled_or_bumped_by_cost() -> None:
    model = make_predictor("adaptive").fit(BIMODAL)
    # Nothing recorded lies above 12 GiB: doubling, as before there was a choice.
    assert model.retry(12 * GIB) == 24 * GIB
    # Just below the upper mode, the VPA bump (x1.2) covers every peak above for less than doubling.
    assert model.retry(9 * GIB) == min(vpa_bump(9 * GIB), int(10 * GIB * 1.15), 10 * GIB)


def test_other_strategies_keep_doubling() -> None:
    assert make_predictor("pc95").fit(BIMODAL).retry(int(2.3 * GIB)) == int(4.6 * GIB)


def completed(n: int, peak: int) -> Observation:
    return Observation(
        key=TaskKey("d", "t", f"r{n}", -1, 1),
        task_family="d.t",
        usage=Usage(peak_memory_bytes=peak, wall_seconds=60.0),
        exit_reason=ExitReason.COMPLETED,
    )


def test_the_strategy_policy_asks_the_fitted_strategy_and_says_so() -> None:
    history = [completed(i, s.peak_memory_bytes) for i, s in enumerate(BIMODAL)]
    killed = Observation(
        key=TaskKey("d", "t", "now", -1, 1),
        task_family="d.t",
        usage=Usage(),
        exit_reason=ExitReason.OOM_KILLED,
        memory_request_bytes=int(2.3 * GIB),
        memory_limit_bytes=int(2.3 * GIB),
    )
    user = MemoryRequest(4 * GIB, 4 * GIB)
    settings = SizingSettings(cap_bytes=64 * GIB, floor_bytes=64 * MIB)
    chosen = decide_memory(history, user, settings, previous_attempt=killed)
    assert chosen.strategy == "adaptive+strategy" and (chosen.memory_request_bytes or 0) >= 10 * GIB
    doubled = decide_memory(history, user, SizingSettings(retry_policy="double"), previous_attempt=killed)
    # Both end at the history's prediction here; what each policy itself gave differs.
    assert f"strategy gives {format_bytes(10 * GIB)}" in chosen.explanation
    assert f"double gives {format_bytes(int(4.6 * GIB))}" in doubled.explanation
