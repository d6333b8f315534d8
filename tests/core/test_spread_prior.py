"""The small-sample bound's prior spread, learnt across families (limma's moment estimate):
``SpreadMoments`` kept by the store, read by ``adaptive`` through the prior."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.special import digamma, polygamma

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.model import MemoryRequest
from airflow_adaptive.core.rollup import Distributions, contributions
from airflow_adaptive.core.sizing.adaptive import AdaptivePredictor
from airflow_adaptive.core.sizing.base import Sample
from airflow_adaptive.core.sizing.pooled import PooledAdaptivePredictor
from airflow_adaptive.core.sizing.prior import HistogramPeakPrior
from airflow_adaptive.core.sizing.small_samples import SpreadMoments, next_peak_bound, trigamma_inverse
from airflow_adaptive.core.sketch import LogHistogram
from airflow_adaptive.core.units import GIB
from airflow_adaptive.store.api import HistoryStore
from tests.factories import attempt

EULER_GAMMA = 0.5772156649015329


def moments_of(variances: list[float], df: int) -> SpreadMoments:
    moments = SpreadMoments()
    for variance in variances:
        moments.add(variance, df)
    return moments


def test_three_families_by_hand() -> None:
    # d = 2: e = log s² - digamma(1) + log(1) = log s² + gamma, and trigamma(1) = pi² / 6.
    # s² = 1, e^-4, e^-8: mean e = gamma - 4, their variance 16, less pi²/6 = 14.355 = trigamma(d0 / 2)
    prior = moments_of([1.0, math.exp(-4.0), math.exp(-8.0)], 2).prior()
    assert prior is not None
    excess = 16.0 - math.pi**2 / 6.0
    assert float(polygamma(1, prior.weight / 2)) == pytest.approx(excess, rel=1e-6)
    half = prior.weight / 2
    scale = math.exp(EULER_GAMMA - 4.0 + float(digamma(half)) - math.log(half))
    assert prior.log_spread == pytest.approx(math.sqrt(scale), rel=1e-6)


def test_equal_spreads_share_one_spread_weighing_all_their_peaks() -> None:
    # no more difference between the families than sampling explains: d0 is infinite, at most sum(d)
    prior = moments_of([0.01, 0.01, 0.01, 0.01], 4).prior()
    assert prior is not None
    assert prior.weight == 16.0
    # s0² = exp(mean e), e = log 0.01 - digamma(2) + log 2
    assert prior.log_spread == pytest.approx(math.sqrt(0.01 * 2.0 * math.exp(-float(digamma(2.0)))))


def test_drawn_families_recover_their_spread_and_how_much_they_differ() -> None:
    rng = np.random.default_rng(0)
    alike, unlike = SpreadMoments(), SpreadMoments()
    for _ in range(300):
        alike.add(float(rng.normal(0.0, 0.1, 6).var(ddof=1)), 5)
        spread = math.exp(rng.normal(math.log(0.1), 1.0))
        unlike.add(float(rng.normal(0.0, spread, 6).var(ddof=1)), 5)
    same, differ = alike.prior(), unlike.prior()
    assert same is not None and differ is not None
    assert same.log_spread == pytest.approx(0.1, rel=0.1) and same.weight > 20
    assert differ.weight < 3  # a weak prior: each family's own peaks soon dominate


def test_removing_a_family_undoes_it_and_too_few_families_know_nothing() -> None:
    moments = moments_of([0.01, 0.04], 3)
    assert moments.prior() is None  # two families: too few
    moments.add(0.09, 3)
    before = moments.prior()
    moments.add(0.5, 7)
    moments.add(0.5, 7, -1)
    assert moments.prior() == before  # exactly: the sums are integers
    moments.add(0.02, 0)  # one peak: no spread, nothing counted
    assert moments.families == 3
    for variance in (0.01, 0.04, 0.09):
        moments.add(variance, 3, -1)
    assert moments == SpreadMoments()


def test_trigamma_inverse() -> None:
    for x in (0.05, 0.7, 3.0, 250.0):
        assert trigamma_inverse(float(polygamma(1, x))) == pytest.approx(x, rel=1e-6)


def test_a_histogram_knows_the_variance_of_its_logs_within_a_bucket() -> None:
    values = [GIB, math.e * GIB, math.e**2 * GIB]  # logs 0, 1, 2 above ln(1 GiB): variance 1
    histogram = LogHistogram()
    for v in values:
        histogram.add(v)
    variance, df = histogram.log_variance()
    assert df == 2 and variance == pytest.approx(1.0, abs=0.02)
    assert LogHistogram().log_variance() == (0.0, 0)


def test_the_distributions_move_a_family_between_spreads_and_say_when_they_never_counted() -> None:
    distributions = Distributions()
    peaks = [attempt(n, family="f", peak=p) for n, p in enumerate((GIB, 2 * GIB, 4 * GIB))]
    two, three = contributions("f", peaks[:2]), contributions("f", peaks)
    distributions.move_family(None, two)
    distributions.move_family(two, three)
    assert distributions.spread is not None and distributions.spread.families == 1
    assert distributions.spread.df_sum == 2
    again = Distributions.from_json(distributions.to_json())
    assert again.spread == distributions.spread
    assert Distributions.from_json(None).spread == SpreadMoments()  # a new store counts from the start
    older = {k: v for k, v in distributions.to_json().items() if k != "spread"}
    assert Distributions.from_json(older).spread is None  # written before: unknown until rebuilt


def steady_prior() -> HistogramPeakPrior:
    """Twenty families whose log peaks spread by about 5 %."""
    rng = np.random.default_rng(1)
    moments = moments_of([float(rng.normal(0.0, 0.05, 8).var(ddof=1)) for _ in range(20)], 7)
    return HistogramPeakPrior(LogHistogram(), moments)


def test_a_store_of_steady_families_tightens_a_new_familys_bound() -> None:
    two = [Sample(2 * GIB), Sample(int(2.1 * GIB))]
    fixed = AdaptivePredictor().fit(two).predict(None, 64 * GIB)
    learnt = PooledAdaptivePredictor().fit(two, steady_prior())
    assert 2.1 * GIB < learnt.predict(None, 64 * GIB) < fixed / 2
    assert "spread pooled with other families'" in learnt.explain()
    assert "spread pooled" not in AdaptivePredictor().fit(two, steady_prior()).explain()  # a fixed prior
    bound = learnt.details()["small_sample_bound_bytes"]
    assert isinstance(bound, int) and 2 * GIB < bound <= learnt.predict(None, 64 * GIB)
    wide = [Sample(GIB), Sample(4 * GIB)]  # its own peaks differ: the weak prior does not hide it
    assert PooledAdaptivePredictor().fit(wide, steady_prior()).predict(None, 64 * GIB) > 8 * GIB


def test_a_family_steadier_than_the_learnt_prior_is_bounded_and_explained_by_its_own_spread() -> None:
    def five(logs: list[float]) -> list[Sample]:
        return [Sample(int(GIB * math.exp(v))) for v in logs]

    # spread 0.0079: below the learnt prior's (0.0433) by more than F(4, 140)'s 1 % quantile
    steady = PooledAdaptivePredictor().fit(five([0.0, 0.005, 0.01, 0.015, 0.02]), steady_prior())
    peaks = np.array([float(s.peak_memory_bytes) for s in five([0.0, 0.005, 0.01, 0.015, 0.02])])
    assert steady.details()["small_sample_bound_bytes"] == int(next_peak_bound(peaks, 0.01, 0.0, 0.0))
    assert steady.details()["small_sample_bound_own_spread"] == pytest.approx(0.0079, abs=1e-4)
    assert "their own spread 0.0079 alone: far below the prior's 0.0433)" in steady.explain()
    assert "spread pooled" not in steady.explain()
    # spread 0.029: far below the fixed prior's 0.3, within the learnt one's reach: pooled with it
    pooled = PooledAdaptivePredictor().fit(five([0.0, 0.04, 0.08, 0.03, 0.05]), steady_prior())
    assert pooled.details()["small_sample_bound_own_spread"] is None
    assert "spread pooled with other families'" in pooled.explain() and "own spread" not in pooled.explain()


def test_the_advisor_learns_the_spread_from_the_store(store: HistoryStore) -> None:
    rng = np.random.default_rng(2)
    store.record(
        [
            attempt(10 * f + n, family=f"g{f}", peak=int(GIB * rng.lognormal(0.0, 0.05)))
            for f in range(10)
            for n in range(5)
        ]
    )
    # two peaks 10 % apart: within the learnt spread's reach, too far apart to be steadier than the fixed one
    store.record([attempt(1000 + n, family="f", peak=p) for n, p in enumerate((2 * GIB, int(2.2 * GIB)))])
    request = MemoryRequest(16 * GIB, 16 * GIB)
    settings = get_settings()
    pooled = replace(settings, sizing=replace(settings.sizing, strategy="adaptive-pooled"))
    decision = Advisor(pooled, lambda: store).memory.decide("f", request)
    assert "spread pooled with other families'" in decision.explanation
    assert (decision.memory_request_bytes or 0) < 4 * GIB
    fixed = Advisor(settings, lambda: store).memory.decide("f", request)  # the default: a fixed prior
    assert "spread pooled" not in fixed.explanation and (fixed.memory_request_bytes or 0) > 8 * GIB


def test_a_capped_weight_keeps_the_fitted_scale() -> None:
    # Spreads that differ a little more than sampling explains: d0 is large but finite, above the
    # 9 degrees of freedom it was learnt from. The weight is capped there; the scale is d0's own.
    variances = [0.0100, 0.0104, 0.0098]
    moments = moments_of(variances, 3)
    prior = moments.prior()
    assert prior is not None and prior.weight == 9.0
    d = 3.0
    e = [math.log(v) - float(digamma(d / 2)) + math.log(d / 2) for v in variances]
    mean = sum(e) / 3
    excess = sum((x - mean) ** 2 for x in e) / 2 - float(polygamma(1, d / 2))
    if excess > 0:  # a finite d0: its scale, not the capped weight's
        fitted = 2 * trigamma_inverse(excess)
        assert fitted > 9.0
        scale = math.exp(mean + float(digamma(fitted / 2)) - math.log(fitted / 2))
    else:  # the spreads differ no more than sampling explains
        scale = math.exp(mean)
    assert prior.log_spread == pytest.approx(math.sqrt(scale), rel=1e-6)


@pytest.mark.parametrize(
    "stored",
    [
        [3, 1, 1, 1],
        [3, 1, 1, 1, "2"],
        [3, 1, 1, 1, True],
        [-1, 0, 0, 0, 0],
        [5, 0, 0, 0, 2],
        [3, 0, 0, -1, 9],
    ],
)
def test_unreadable_or_impossible_moments_are_not_known(stored: list[object]) -> None:
    assert SpreadMoments.from_json(stored) is None
    assert Distributions.from_json({"peaks": {}, "spread": stored}).spread is None


def test_absurd_moments_raise_nothing() -> None:
    for moments in (SpreadMoments(3, 10**40, 10**70, 3 * 10**9, 9), SpreadMoments(3, -(10**40), 0, 0, 9)):
        prior = moments.prior()  # a spread past any cap (the request then stands) or none, not an error
        assert prior is None or (math.isfinite(prior.log_spread) and prior.weight > 0)


def test_a_histogram_variance_does_not_depend_on_the_order_of_its_buckets() -> None:
    rng = np.random.default_rng(4)
    values = rng.lognormal(20.0, 0.4, 300)
    forward, backward = LogHistogram(), LogHistogram()
    for v in values:
        forward.add(float(v))
    for v in values[::-1]:
        backward.add(float(v))
    assert list(forward.counts) != list(backward.counts)
    assert forward.log_variance() == backward.log_variance()
