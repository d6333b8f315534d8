"""The gap bound on the next peak (``small_samples.gap_exponent``): the largest log peak plus ``c``
times the gap to the second, ``c`` chosen so the next of n + 1 peaks whose logs have an
exponential tail passes it with chance ``share``; the small-sample bound is the lesser of it and
the log-normal one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from airflow_adaptive.core.sizing.adaptive import AdaptivePredictor
from airflow_adaptive.core.sizing.base import Sample
from airflow_adaptive.core.sizing.small_samples import gap_bound_bytes, gap_exponent, gap_score
from airflow_adaptive.core.units import GIB


def test_the_gap_bound_computed_by_hand() -> None:
    # peaks 10, 10.5, 10.9, 12 GiB: the gap in logs log(12 / 10.9) = 0.09614; at a share of 4 % with
    # 4 peaks, c = 2 / (0.04 x 5) - 2 = 8, so 12 GiB x (12 / 10.9)^8 = 25.9 GiB
    peaks = np.array([10.0, 10.5, 12.0, 10.9]) * GIB
    assert gap_bound_bytes(peaks, 0.04) == pytest.approx(12 * (12 / 10.9) ** 8 * GIB, rel=1e-9)
    # at a share of 20 %, 2 / (0.2 x 5) - 2 = 0: the largest peak itself, and never below it
    assert gap_bound_bytes(peaks, 0.2) == pytest.approx(12 * GIB)
    assert gap_bound_bytes(peaks, 0.5) == pytest.approx(12 * GIB)
    # equal largest peaks: the gap is the peaks' 1 % resolution; 3 peaks at 5 %, c = 2 / 0.2 - 2 = 8:
    # 10.9 GiB x 1.01^8
    assert gap_bound_bytes(np.array([10.9, 10.9, 10.0]) * GIB, 0.05) == pytest.approx(10.9 * 1.01**8 * GIB)
    assert math.isinf(gap_exponent(np.log(np.array([GIB])), 0.01))  # one peak bounds nothing


def test_a_peak_at_the_gap_bound_scores_its_share() -> None:
    logs = np.log(np.array([3.0, 5.0, 4.0, 4.5, 4.9]) * GIB)
    for share in (0.001, 0.01, 0.05, 0.1):
        assert gap_score(logs, gap_exponent(logs, share) + 1e-12) == pytest.approx(share, rel=1e-6)
    assert gap_score(logs, float(logs.max())) == 1.0  # at the largest: no share lets it through
    assert gap_score(logs, float(logs.min())) == 1.0


def test_the_gap_bound_lets_its_share_through_on_an_exponential_tail_and_less_on_lighter_ones() -> None:
    # Log peaks exponential (peaks with a Pareto tail): the next of n + 1 passes c gaps above the
    # largest with chance 2 / ((n + 1)(2 + c)), here 5 % (n = 9, c = 2).
    rng = np.random.default_rng(7)

    def passed(draws: np.ndarray) -> float:
        return float(np.mean([row[-1] > gap_exponent(row[:-1], 0.05) for row in draws]))

    assert passed(rng.exponential(1.0, (40_000, 10))) == pytest.approx(0.05, abs=0.004)
    # under a ceiling (uniform logs: 1 / ((n + 1)(1 + c)) = 3.3 %) and a log-normal family: fewer
    assert passed(rng.uniform(0.0, 10.0, (40_000, 10))) == pytest.approx(1 / 30, abs=0.004)
    assert 0.01 < passed(rng.normal(0.0, 1.0, (40_000, 10))) < 0.045


def test_a_pile_under_a_ceiling_is_bounded_just_above_it_and_a_high_peak_keeps_room() -> None:
    # bwa's shape: 29 peaks piled at 10.7-10.9 GiB, two of 5-6 GiB. The log-normal bound, with the
    # prior's spread, says 12.4 GiB; the gap bound at 1 % over 31 peaks: 10.9 x 1.01^(200 / 32 - 2) = 11.4 GiB
    pile = [Sample(int(g * GIB)) for g in np.linspace(10.7, 10.89, 28)] + [Sample(int(10.9 * GIB))]
    family = AdaptivePredictor().fit([Sample(5 * GIB), *pile, Sample(6 * GIB)])
    details = family.details()
    assert details["small_sample_bound_kind"] == "gap"
    assert 10.9 * GIB < details["small_sample_bound_bytes"] < 11.5 * GIB  # type: ignore[operator]
    assert "gap bound over their two largest peaks" in family.explain()
    # the same pile with one peak far above: the gap is wide, the log-normal bound is the lesser
    high = AdaptivePredictor().fit([*pile, Sample(16 * GIB)]).details()
    assert high["small_sample_bound_kind"] == "log-normal"
    assert high["small_sample_bound_bytes"] > 12 * GIB  # type: ignore[operator]


def test_a_killed_try_and_its_retry_are_one_task_not_a_narrow_gap() -> None:
    # Six peaks near 10 GiB, then a try killed at 20 GiB (a lower bound) and its retry at 20.3 GiB:
    # counted as two peaks they would make a gap of 1.5 %; the gap is the finished peaks' instead,
    # 20.3 against 10.5 GiB, so the bound keeps room above the new largest
    near = [Sample(int(g * GIB)) for g in (9.6, 9.8, 10.0, 10.1, 10.3, 10.5)]
    killed = [Sample(20 * GIB, lower_bound=True), Sample(int(20.3 * GIB))]
    logs = np.log(np.array([s.peak_memory_bytes for s in [*near, *killed]], dtype=float))
    finished = np.array([not s.lower_bound for s in [*near, *killed]])
    narrow, wide = gap_exponent(logs, 0.01), gap_exponent(logs, 0.01, finished)
    # 7 finished peaks: c = 2 / (0.01 x 8) - 2 = 23 gaps of log(20.3 / 10.5) above 20.3 GiB
    assert wide == pytest.approx(math.log(20.3 * GIB) + 23 * math.log(20.3 / 10.5), rel=1e-6)
    assert narrow < math.log(30 * GIB) < wide
    bound = AdaptivePredictor().fit([*near, *killed]).details()["small_sample_bound_bytes"]
    assert isinstance(bound, int) and bound > 30 * GIB  # the log-normal one, not the narrow gap's 27 GiB
    assert gap_score(logs, math.log(25 * GIB), finished) > gap_score(logs, math.log(25 * GIB))
