"""The small-sample bound's level, calibrated on the scores of the store's families' first peaks
(``core/sizing/bound_calibration.py``): hand-computed scores and levels, and what a calibrated
level does to a young family's allocation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from airflow_adaptive.core.fitted_model import FittedModel
from airflow_adaptive.core.rollup import Distributions
from airflow_adaptive.core.sizing.adaptive import AdaptivePredictor
from airflow_adaptive.core.sizing.base import Sample
from airflow_adaptive.core.sizing.bound_calibration import (
    MAX_LEVEL,
    UNSCORED,
    bound_score,
    bound_scores,
    calibrated_level,
)
from airflow_adaptive.core.sizing.prior import HistogramPeakPrior
from airflow_adaptive.core.sizing.small_samples import next_peak_bound, steadier_than_prior
from airflow_adaptive.core.sketch import LogHistogram
from airflow_adaptive.core.units import GIB

FIXED = (0.3, 1.0)  # the default's prior spread and weight


def histogram_of(values: list[float]) -> LogHistogram:
    histogram = LogHistogram()
    for value in values:
        histogram.add(value)
    return histogram


def test_the_score_of_a_third_peak_computed_by_hand() -> None:
    # logs (0, 0.2): mean = median = 0.1; squares above it 0.1² = 0.01; s = sqrt((0.09 + 2 * 0.01) / 2)
    # = 0.23452 on 2 degrees of freedom; widened by sqrt(1 + 1/2): 0.28723. A third peak at e^0.5:
    # t = 0.4 / 0.28723 = 1.39263; Student's t on 2 df has P(T > t) = 1/2 - t / (2 sqrt(2 + t²)),
    # = 0.5 - 1.39263 / (2 x 1.98480) = 0.14918. The gap bound: the top 0.2, its gap 0.2, so e^0.5 is
    # c = 1.5 gaps above it: 2 / ((2 + 1)(2 + 1.5)) = 0.19048; the score is the lesser.
    before = np.array([1.0, math.exp(0.2)]) * GIB
    assert bound_score(before, math.exp(0.5) * GIB, *FIXED) == pytest.approx(0.14918, abs=2e-5)
    # Just above the top, at e^0.25: t = 0.52223, P(T > t) = 0.5 - 0.52223 / (2 x 1.50756) = 0.32679;
    # the gap's c = 0.25, 2 / (3 x 2.25) = 0.29630, the lesser.
    assert bound_score(before, math.exp(0.25) * GIB, *FIXED) == pytest.approx(0.29630, abs=2e-5)
    assert bound_score(before, 0.5 * GIB, *FIXED) > 0.5  # below the centre


def test_a_bound_at_a_peaks_score_is_that_peak() -> None:
    rng = np.random.default_rng(4)
    for n in (2, 3, 7, 30):
        before = GIB * rng.lognormal(0.0, 0.4, n)
        peak = float(GIB * rng.lognormal(0.6, 0.2))
        score = bound_score(before, peak, *FIXED)
        assert next_peak_bound(before, 0.01, *FIXED, level=score) == pytest.approx(peak, rel=1e-9)


def test_the_first_peaks_are_scored_the_first_two_and_lower_bounds_are_not() -> None:
    samples = [Sample(GIB), Sample(int(1.25 * GIB)), Sample(2 * GIB), Sample(3 * GIB, lower_bound=True)]
    samples += [Sample(GIB)] * 5 + [Sample(GIB // 2)] + [Sample(GIB)] * 2  # the tenth at half the rest
    peaks = np.array([float(s.peak_memory_bytes) for s in samples])
    scores, steady = bound_scores(peaks, samples, 0.1, FIXED)  # a 10 % target scores the first 10 peaks
    assert scores.size == 10 and not steady.any()
    assert list(scores[[0, 1, 3]]) == [UNSCORED] * 3
    assert scores[2] == pytest.approx(bound_score(peaks[:2], 2 * GIB, *FIXED))
    assert all(0.0 < s <= 1.0 for s in scores[4:])
    assert scores[-1] == 1.0  # a peak below the family's centre scores above any level: kept as 1
    known = (np.array([UNSCORED, UNSCORED, 0.123]), np.zeros(3, bool))
    kept = bound_scores(peaks, samples, 0.1, FIXED, known)[0]
    assert kept[2] == 0.123 and np.array_equal(kept[3:], scores[3:])  # a known prefix is not recomputed
    assert bound_scores(peaks, samples, None, FIXED)[0].size == 0


def test_no_scores_keep_the_target_and_scores_above_it_raise_the_level() -> None:
    assert calibrated_level(None, 0.1) == calibrated_level(Distributions().scores, 0.1) == 0.1
    # ten scores of 1 beside 1 / 0.1 = 10 uniform pseudo-scores: (10 a + 0) / 20 = 0.1 at a = 0.2
    assert calibrated_level(histogram_of([1.0] * 10), 0.1) == pytest.approx(0.2)
    # a thousand: the level would be 10.1, past the centre of the peaks
    assert calibrated_level(histogram_of([1.0] * 1000), 0.1) == MAX_LEVEL


def test_scores_below_the_target_lower_the_level_to_where_they_are() -> None:
    # five scores at 0.02 and five at 1: the mixed share jumps from 10 x 0.02 / 20 = 0.01 to 0.26 at 0.02,
    # past the target 0.1 there, so the level is 0.02 (within the histogram's 1 % buckets, below it).
    level = calibrated_level(histogram_of([0.02] * 5 + [1.0] * 5), 0.1)
    assert 0.02 / 1.0101 <= level <= 0.02
    # a share of low scores just at the target leaves it about where it was
    spread = np.linspace(0.001, 1.0, 1000)
    assert calibrated_level(histogram_of(list(spread)), 0.1) == pytest.approx(0.1, rel=0.03)


def model_with(scores: list[float], steady: list[float] = []) -> FittedModel:  # noqa: B006 (never changed)
    return FittedModel("adaptive", "v", {}, 0, 0, 0, bound_scores=tuple(scores), steady_scores=tuple(steady))


def steady_store(score: float, steady_score: float | None = None) -> HistogramPeakPrior:
    """A store of 400 pooled bound scores at ``score`` (and as many steady ones at ``steady_score``)."""
    distributions = Distributions()
    distributions.move_scores(None, model_with([score] * 400, [steady_score] * 400 if steady_score else []))
    return HistogramPeakPrior(distributions.peaks, None, distributions.scores, distributions.steady_scores)


def test_a_young_familys_bound_follows_the_stores_calibrated_level() -> None:
    four = [Sample(2 * GIB), Sample(int(2.2 * GIB)), Sample(int(1.9 * GIB)), Sample(int(2.1 * GIB))]
    alone = AdaptivePredictor().fit(four).predict(None, 64 * GIB)
    overcovered = AdaptivePredictor().fit(four, steady_store(0.9))  # no first peak came near the bound
    undercovered = AdaptivePredictor().fit(four, steady_store(1e-5))  # first peaks went through it
    assert (overcovered.bound_basis().level or 0.0) > 0.01 > (undercovered.bound_basis().level or 1.0)
    assert "P95 gap bound" in overcovered.explain() and "let 1.0% of their next" in overcovered.explain()
    assert overcovered.details()["small_sample_bound_level"] == pytest.approx(0.05)  # (0.01 x 500) / 100
    assert 2.2 * GIB < overcovered.predict(None, 64 * GIB) < alone < undercovered.predict(None, 64 * GIB)
    assert AdaptivePredictor().fit(four, steady_store(0.9)).draws_on_prior(64 * GIB)  # it reads the store


def test_the_distributions_move_a_models_scores_and_keep_them_in_json() -> None:
    distributions = Distributions()
    distributions.move_scores(None, model_with([0.5, 0.01], [0.2]))
    distributions.move_scores(model_with([0.5]), model_with([0.02, 0.3], [0.004]))
    assert distributions.scores.total == 3 and distributions.steady_scores.total == 2
    again = Distributions.from_json(distributions.to_json())
    assert again.scores == distributions.scores and again.steady_scores == distributions.steady_scores
    written_before = Distributions.from_json({"peaks": {}})  # a store written before either: none yet
    assert written_before.scores.total == written_before.steady_scores.total == 0


def test_a_far_outlier_inverts_too_and_cannot_hold_every_young_family_at_its_request() -> None:
    # a family whose peaks step up: 50 within ±20 % (spread plausible under the prior), then five times them
    steady, stepped = np.exp(np.linspace(-0.204, 0.204, 50)) * GIB, 5.0 * GIB
    score = bound_score(steady, stepped, *FIXED)
    assert 0.0 < score < 1e-15  # beyond any level 1 - level can tell apart from 1
    assert next_peak_bound(steady, 0.01, *FIXED, level=score) == pytest.approx(stepped, rel=1e-6)
    store = histogram_of([1e-20, 2e-6] + [0.5] * 98)  # two such scores among a hundred ordinary ones
    assert calibrated_level(store, 0.01) == pytest.approx(0.001)  # a tenth of the target, no lower


def test_a_score_is_recomputed_once_its_peak_is_no_longer_a_lower_bound() -> None:
    before = [Sample(GIB), Sample(int(1.25 * GIB)), Sample(int(1.2 * GIB), lower_bound=True), Sample(GIB)]
    after = [*before[:2], Sample(int(1.2 * GIB)), Sample(GIB)]  # the sampled peak, re-recorded as measured
    peaks = np.array([float(s.peak_memory_bytes) for s in after])
    known = bound_scores(peaks, before, 0.1, FIXED)
    assert known[0][2] == UNSCORED
    resumed = bound_scores(peaks, after, 0.1, FIXED, known=known)[0]
    assert np.array_equal(resumed, bound_scores(peaks, after, 0.1, FIXED)[0]) and resumed[2] != UNSCORED


def test_a_model_refitted_on_no_samples_keeps_no_scores() -> None:
    from airflow_adaptive.core.decide import SizingSettings
    from airflow_adaptive.core.fitted_model import fit_model

    samples = [Sample(GIB), Sample(int(1.25 * GIB)), Sample(2 * GIB), Sample(GIB)]
    model = fit_model(samples, SizingSettings(), len(samples))
    assert len(model.bound_scores) == 2 and model.steady_scores == ()  # the third and fourth peaks
    assert fit_model([], SizingSettings(), 0, previous=model).bound_scores == ()  # its attempts moved away


def test_a_pooled_bound_says_the_target_it_is_drawn_at() -> None:
    from airflow_adaptive.core.sizing.pooled import PooledAdaptivePredictor
    from tests.core.test_spread_prior import steady_prior

    two = [Sample(2 * GIB), Sample(int(2.1 * GIB))]
    prior = steady_prior()
    prior.scores = histogram_of([0.9] * 400)  # a level the fixed spread would be drawn at: 0.05
    pooled = PooledAdaptivePredictor().fit(two, prior)
    assert "spread pooled" in pooled.explain() and pooled.details()["small_sample_bound_level"] == 0.01
    assert AdaptivePredictor().fit(two, prior).details()["small_sample_bound_level"] == pytest.approx(0.05)


def test_an_unfitted_pooled_predictor_names_a_level_without_raising() -> None:
    from airflow_adaptive.core.sizing.pooled import PooledAdaptivePredictor

    # no fit, so no learnt spread in use: the store's level for the fixed one
    assert PooledAdaptivePredictor().use_prior(steady_store(0.9)).bound_basis().level == pytest.approx(0.05)


def test_a_family_far_steadier_than_the_prior_is_bounded_by_its_own_spread_at_its_level() -> None:
    # logs (0, 0.01, 0.02): variance 1e-4, 1/900 of the prior's 0.09, below F(2, 1)'s 1 % quantile
    # (1 / 98.50 = 0.01015). Its own spread alone: mean = median = 0.01, squares above 0.01² = 1e-4,
    # s = sqrt(2e-4 / 2) = 0.01 on 2 df; t(0.99; 2) = 6.96456, widened by sqrt(4/3): the bound is
    # e^(0.01 + 0.0804198) = 1.09463 GiB (pooled with the prior, 2.51 GiB).
    steady = np.exp(np.array([0.0, 0.01, 0.02])) * GIB
    assert steadier_than_prior(np.log(steady), *FIXED, 0.01)
    assert next_peak_bound(steady, 0.01, *FIXED) == pytest.approx(1.094634 * GIB, rel=1e-6)
    assert next_peak_bound(steady, 0.01, *FIXED, level=0.2) < next_peak_bound(steady, 0.01, *FIXED)
    # a fourth peak at e^0.1 is scored against that bound, apart: t = 0.09 / (0.01 sqrt(4/3)) = 7.79423
    # on 2 df, P(T > t) = 1/2 - t / (2 sqrt(2 + t²)) = 0.5 - 7.79423 / (2 x 7.92157) = 0.00804
    samples = [Sample(int(p)) for p in steady] + [Sample(int(math.exp(0.1) * GIB))]
    peaks = np.array([float(s.peak_memory_bytes) for s in samples])
    scores, kinds = bound_scores(peaks, samples, 0.01, FIXED)
    assert scores[3] == pytest.approx(0.00804, abs=2e-5) and kinds[3]
    assert scores[2] != UNSCORED and not kinds[2]  # two peaks cannot yet tell it from the prior
    # resumed: a model stored without the kinds scores all again; a prefix that changed kind from there
    assert np.array_equal(bound_scores(peaks, samples, 0.01, FIXED, (scores, None))[0], scores)
    was = np.array([UNSCORED, UNSCORED, 0.3, 0.3])  # the fourth scored against the pooled bound before
    flipped = bound_scores(peaks, samples, 0.01, FIXED, (was, np.zeros(4, bool)))[0]
    assert flipped[2] == 0.3 and flipped[3] == scores[3]  # kept up to the peak whose kind changed
    wide = np.exp(np.array([0.0, 0.2])) * GIB  # variance 0.02: 0.22 of the prior's, above 1 / 4052
    assert not steadier_than_prior(np.log(wide), *FIXED, 0.01)
    # a store of pooled scores only (level 0.05 for the others) leaves a steady family at the target
    predictor = AdaptivePredictor().fit([Sample(int(p)) for p in steady], steady_store(0.9))
    assert predictor.bound_basis().own_spread == pytest.approx(0.01) and predictor.bound_basis().level == 0.01
    assert predictor.details()["small_sample_bound_own_spread"] == pytest.approx(0.01)
    assert "P99 prediction bound 1.09 GiB (their own spread 0.01 alone: far below the prior's 0.3)" in (
        predictor.explain()
    )
    # steady families whose next peaks went through their bounds: the level falls to its floor, a
    # tenth of the target, and the bound is e^(0.01 + t(0.999; 2) 0.01 sqrt(4/3)) = e^0.267814 GiB
    tight = AdaptivePredictor().fit([Sample(int(p)) for p in steady], steady_store(0.9, 1e-5))
    assert tight.bound_basis().level == pytest.approx(0.001) and tight.predict(
        None, 64 * GIB
    ) == pytest.approx(1.30708 * GIB, rel=1e-4)
    assert (
        "(their own spread 0.01 alone: far below the prior's 0.3; P99.9, not P99: on the store's steady"
        in (tight.explain())
    )
    # identical peaks: their spread is the resolution's, log(1.01) / sqrt(12) = 0.0029, at the target
    same = AdaptivePredictor().fit([Sample(GIB)] * 5, steady_store(0.9))
    assert (
        same.bound_basis().level == 0.01
        and "P99 prediction bound 1.01 GiB (their own spread 0.0029" in same.explain()
    )
