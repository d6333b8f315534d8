"""The small-sample bound: until a family has ``1 / target`` peaks (the target: half the OOM budget
``max_oom_rate``), ``adaptive`` allocates at least their one-sided prediction bound at
``1 - target`` (the lesser of the log-normal one and the gap bound), at most the request."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.decide import SizingSettings, decide_memory
from airflow_adaptive.core.model import MemoryRequest
from airflow_adaptive.core.sizing.adaptive import AdaptivePredictor
from airflow_adaptive.core.sizing.base import Sample
from airflow_adaptive.core.sizing.prior import PeakPrior
from airflow_adaptive.core.sizing.state import fitted_state, restore_state
from airflow_adaptive.core.units import GIB
from airflow_adaptive.evaluation.replay import ReplayConfig, replay
from airflow_adaptive.store.api import HistoryStore
from airflow_adaptive.traces.runs import TaskRun
from tests.core.test_core import obs
from tests.factories import attempt

ONE_TWO_FOUR = [Sample(GIB), Sample(2 * GIB), Sample(4 * GIB)]
TARGET_2 = 0.04  # a budget whose target is 2 %: the hand-computed cases below use t(0.98)


def test_the_bound_of_three_peaks_computed_by_hand() -> None:
    # logs: ln(1 GiB) + (0, ln 2, ln 4); mean ln(2 GiB); squares about it 2 (ln 2)² = 0.961;
    # pooled with the prior (0.3² for 1 degree of freedom): s = sqrt((0.09 + 0.961) / 3) = 0.5919;
    # t(0.98, 3 df) = 3.482 (tables); 2 GiB x exp(3.482 x 0.5919 x sqrt(1 + 1/3)) = 21.60 GiB.
    predictor = AdaptivePredictor(max_oom_rate=TARGET_2).fit(ONE_TWO_FOUR)
    assert predictor.predict(None, 64 * GIB) == pytest.approx(21.60 * GIB, rel=1e-3)
    assert predictor.predict(None, 8 * GIB) == 8 * GIB  # never above the request
    assert "log-normal P98 prediction bound 21.6 GiB" in predictor.explain()
    # one peak at a 0.1 % target: t(0.999, 1 df) = 318, so the bound runs past any node (about
    # e^135 bytes), and is said to, not in digits
    one = AdaptivePredictor(max_oom_rate=0.002).fit(ONE_TWO_FOUR[:1]).explain()
    assert "prediction bound over 1 PiB" in one and "e+" not in one
    assert predictor.details()["small_sample_bound_bytes"] == pytest.approx(21.60 * GIB, rel=1e-3)


def test_the_bound_ends_once_the_peaks_can_show_the_budget() -> None:
    noisy = [Sample(int(GIB * f)) for f in np.random.default_rng(3).lognormal(0.0, 0.3, 60)]
    at_49, at_50 = (AdaptivePredictor(max_oom_rate=TARGET_2).fit(noisy[:n]) for n in (49, 50))
    assert at_49.details()["small_sample_bound_bytes"] and not at_50.details()["small_sample_bound_bytes"]
    assert at_49.predict(None, 64 * GIB) > at_49._predict(None)  # the bound lifts the rule
    assert at_50.predict(None, 64 * GIB) == int(at_50._predict(None))  # the rule alone
    tens = AdaptivePredictor(max_oom_rate=0.2).fit(noisy[:10])  # 1 / (0.2 / 2) = 10 peaks suffice
    assert AdaptivePredictor().fit(noisy[:50]).details()["small_sample_bound_bytes"]  # the default: 100
    assert not tens.details()["small_sample_bound_bytes"]


def test_a_lower_budget_keeps_more_headroom_and_steady_peaks_need_less() -> None:
    bounds = [
        AdaptivePredictor(max_oom_rate=b).fit(ONE_TWO_FOUR).predict(None, 64 * GIB)
        for b in (0.005, 0.02, 0.05)
    ]
    assert bounds[0] > bounds[1] > bounds[2]
    steady = AdaptivePredictor().fit([Sample(2 * GIB)] * 3).predict(None, 64 * GIB)
    assert 2 * GIB < steady < bounds[1] / 4
    assert AdaptivePredictor(max_oom_rate=0.0).fit([Sample(GIB)] * 100).predict(None, 8 * GIB) == 8 * GIB
    assert AdaptivePredictor(max_oom_rate=None).fit(ONE_TWO_FOUR).predict(None, 64 * GIB) < 8 * GIB


def test_without_a_request_the_bound_stops_at_what_other_families_used() -> None:
    prior = PeakPrior()
    for _ in range(30):
        prior.add(8 * GIB)
    predictor = AdaptivePredictor().fit(ONE_TWO_FOUR, prior)
    assert predictor.predict(None, None) == int(8 * GIB * 1.1)  # P98 of their peaks + the prior's 10 %
    assert AdaptivePredictor().fit(ONE_TWO_FOUR).predict(None, None) > 16 * GIB  # nothing to stop it


def test_a_young_family_without_a_request_and_nothing_to_cap_its_bound_keeps_no_limit() -> None:
    """One peak bounds nothing: with no request and no prior the bound reaches the largest
    allocatable memory, which as a request might fit no node, for a pod that asked for none."""
    settings = SizingSettings(cap_bytes=64 * GIB)
    young = decide_memory([obs(GIB // 16)], MemoryRequest(None, None), settings)
    assert (young.memory_request_bytes, young.memory_limit_bytes, young.adaptive) == (None, None, False)
    assert "all the allocatable memory, for a pod that asks for none: keeping the user's request unset" in (
        young.explanation
    )
    asked = decide_memory([obs(GIB // 16)], MemoryRequest(8 * GIB, 8 * GIB), settings)
    assert asked.memory_request_bytes == 8 * GIB  # with a request, the bound stops there
    steady = [obs(GIB // 16) for _ in range(30)]
    tight = decide_memory(steady, MemoryRequest(None, None), settings).memory_request_bytes
    assert tight is not None and tight < GIB


def test_a_restored_model_bounds_as_the_fitted_one() -> None:
    fitted = AdaptivePredictor().fit(ONE_TWO_FOUR)
    restored = restore_state(AdaptivePredictor(), fitted_state(fitted))
    assert restored.predict(None, 64 * GIB) == fitted.predict(None, 64 * GIB)


def test_the_decision_explains_the_bound() -> None:
    decision = decide_memory(
        [obs(GIB), obs(2 * GIB), obs(4 * GIB)],
        MemoryRequest(64 * GIB, 64 * GIB),
        SizingSettings(max_oom_rate=TARGET_2),
    )
    assert decision.memory_request_bytes == pytest.approx(21.60 * GIB, rel=1e-3)
    assert (
        "3 of the 50 peaks a 2.0% target needs: at least the lesser of their log-normal P98"
        in decision.explanation
    )


def test_the_advisor_reads_other_families_for_a_family_that_asks_for_nothing(store: HistoryStore) -> None:
    store.record([attempt(n, family=f"g{n}", peak=8 * GIB) for n in range(30)])
    store.record([attempt(100 + n, family="f", peak=p) for n, p in enumerate((GIB, 2 * GIB, 4 * GIB))])
    settings = get_settings()
    capped = replace(settings, sizing=replace(settings.sizing, cap_bytes=64 * GIB))
    decision = Advisor(capped, lambda: store).memory.decide("f", MemoryRequest(None, None))
    # what other families' tasks used at the budget's quantile (their histogram's bin) + 10 %, not 21.6 GiB
    assert decision.memory_request_bytes == pytest.approx(8 * GIB * 1.1, rel=0.05)


def noisy_families(families: int = 20, tasks: int = 40) -> list[TaskRun]:
    rng = np.random.default_rng(7)
    return [
        TaskRun(f"f{f}", int(GIB * rng.lognormal(0.0, 0.25)), 60.0, user_request_bytes=8 * GIB)
        for f in range(families)
        for _ in range(tasks)
    ]


def test_in_the_replay_a_lower_budget_trades_memory_for_fewer_kills() -> None:
    runs = noisy_families()
    results = [
        replay(runs, "adaptive", ReplayConfig(history="sequential", max_oom_rate=b)) for b in (0.005, 0.1)
    ]
    strict, loose = results
    assert strict.retries < loose.retries / 2
    assert strict.waste_byte_s > loose.waste_byte_s
    assert strict.retries <= 0.02 * strict.instances  # kills within the budget it was given, and then some


def test_a_family_sized_by_its_inputs_is_bounded_by_its_line_not_by_the_spread_of_all_its_peaks() -> None:
    rng = np.random.default_rng(5)
    inputs = np.sort(rng.uniform(1, 40, 39)) * GIB  # growing, as a workflow's inputs may
    samples = [Sample(int(x * 0.5 + rng.normal(0, 0.01) * GIB), int(x), 100.0) for x in inputs]
    predictor = AdaptivePredictor().fit(samples)
    assert "line on input size" in predictor.rule_
    assert "the line's one-sided P99 prediction interval" in predictor.explain()
    small = predictor.predict(2 * GIB, 256 * GIB)
    assert GIB <= small < 3 * GIB  # the log-normal bound of all 39 peaks would be above 40 GiB
    assert predictor.details()["small_sample_bound_bytes"] is None  # the line's own interval, not it


def test_the_bound_reads_the_spread_above_the_mean_not_a_tail_below() -> None:
    # Peaks piled under a ceiling with one far below (bwa's 10 GiB with a 5 GiB task): the spread
    # above the mean is small, so the bound stays near the pile; mirrored (one far above), it does not.
    pile = [Sample(int(9.9 * GIB))] * 8
    below = AdaptivePredictor().fit([*pile, Sample(5 * GIB)]).details()["small_sample_bound_bytes"]
    above = (
        AdaptivePredictor().fit([*pile, Sample(int(9.9**2 / 5 * GIB))]).details()["small_sample_bound_bytes"]
    )
    assert isinstance(below, int) and isinstance(above, int)
    # below: squares above the mean 2 x 8 x 0.0759² = 0.092; with the prior's 0.09 over 9 degrees of
    # freedom s = 0.142, so 9.17 GiB x exp(t(0.99; 9) 2.821 x 0.142 x 1.054) = 14.0 GiB (all squares:
    # 18.5); about the median, the pile, nothing is above: s = sqrt(0.09 / 9) = 0.1, so
    # 9.9 GiB x exp(2.821 x 0.1 x 1.054) = 13.33 GiB, the lesser log-normal one. The gap bound: the two
    # largest are equal, so the gap is the peaks' 1 % resolution, c = 2 / (0.01 x 10) - 2 = 18 of them:
    # 9.9 GiB x 1.01^18 = 11.84 GiB, the lesser still
    assert below == pytest.approx(11.84 * GIB, rel=0.001)
    # above: about the mean (10.68 GiB, squares 0.737, s = 0.303) 26.3 GiB; about the median (9.9
    # GiB, squares 0.933, s = 0.337) 27.0 GiB: the tail above counts in full either way; the gap
    # bound is 19.6 GiB x (19.6 / 9.9)^18, far more
    assert above == pytest.approx(26.3 * GIB, rel=0.005)
