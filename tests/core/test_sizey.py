"""Sizey's definitions on hand-computed cases, and the strategy built from them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from airflow_adaptive.core.sizing import Sample, make_predictor
from airflow_adaptive.core.sizing.sizey import (
    DEFAULT_OFFSET,
    SizeyPredictor,
    accuracy,
    combine,
    doubling_waste,
    dynamic_offset,
    offset,
    raq,
    relative_errors,
    sizey_retry,
)
from airflow_adaptive.core.sizing.state import fitted_state, restore_state

ERRORS = np.array([0.1, -0.2, 0.3, -0.05])  # two under-predictions (positive), two over


def test_relative_errors_and_accuracy() -> None:
    assert relative_errors(np.array([2.0, 4.0]), np.array([1.0, 5.0])).tolist() == [0.5, -0.25]
    # |errors| 0.5 and 1 (capped at 1 from 3): mean 0.75
    assert accuracy(np.array([1.0, 2.0]), np.array([1.5, 8.0])) == pytest.approx(-0.75)


def test_the_four_offsets() -> None:
    assert offset("median-under", ERRORS) == pytest.approx(0.2)  # median of 0.1 and 0.3
    assert offset("std-under", ERRORS) == pytest.approx(0.1)  # std of 0.1 and 0.3
    assert offset("median-all", ERRORS) == pytest.approx(0.15)  # median of .05 .1 .2 .3
    # no absolute error lies outside P10/P90 -/+ 1.5 of their distance: the std of all four
    assert offset("std", ERRORS) == pytest.approx(0.0960143, rel=1e-5)
    assert offset("std", np.array([0.1])) == DEFAULT_OFFSET
    assert offset("median-under", np.array([-0.1, -0.2])) == DEFAULT_OFFSET  # never under-predicted
    with pytest.raises(ValueError, match="unknown Sizey offset"):
        offset("max", ERRORS)


def test_an_outlying_error_is_trimmed_from_the_std_offset() -> None:
    errors = np.r_[np.full(20, 0.1), 0.11, 5.0]
    assert offset("std", errors) < 0.01 < float(np.std(np.abs(errors)))


def test_doubling_waste_charges_killed_tries_and_the_final_excess() -> None:
    # 1 -> 2 -> 4 for a peak of 3: killed 1 + 2, then 1 left over; 4 for a peak of 3: 1 left over
    assert doubling_waste(np.array([1.0, 4.0]), np.array([3.0, 3.0])) == pytest.approx(5.0)
    assert doubling_waste(np.array([2.0]), np.array([2.0])) == 0.0


def test_the_dynamic_offset_is_the_one_that_wasted_least() -> None:
    # errors of 0.2 everywhere: the medians say 0.2, which sizes peaks of 1.2 exactly; the stds say 0
    errors = np.full(4, 0.2)
    assert dynamic_offset(errors, np.ones(4), np.full(4, 1.2)) == pytest.approx(0.2)
    # for peaks of 1.25 (errors of 0.2 relative to the peak), 1.2 is killed: 0 (then 2) wastes less
    assert dynamic_offset(errors, np.ones(4), np.full(4, 1.25)) == 0.0
    # a model that is 20 % high: medians of under-predictions have none (default 5 %), std 0
    over = np.full(4, -0.2)
    assert dynamic_offset(over, np.full(4, 1.2), np.ones(4)) == 0.0


def test_raq_weighs_efficiency_against_accuracy() -> None:
    scores = raq(np.array([2.0, 4.0]), np.array([-0.1, -0.3]), alpha=0.5)
    assert scores.tolist() == pytest.approx([0.5 * -0.5 + 0.5 * -0.1, 0.5 * -1.0 + 0.5 * -0.3])
    assert raq(np.array([2.0, 4.0]), np.array([-0.1, -0.3]), alpha=0.0).tolist() == [-0.1, -0.3]


def test_softmax_blend_and_argmax() -> None:
    predicted, offsets = np.array([2.0, 4.0]), np.array([0.1, 0.3])
    scores = np.array([0.0, np.log(3.0)])  # weights 1/4 and 3/4
    # (0.25 * 2 + 0.75 * 4) * (1 + 0.25 * 0.1 + 0.75 * 0.3) = 3.5 * 1.25
    assert combine(predicted, offsets, scores, softmax=True) == pytest.approx(4.375)
    assert combine(predicted, offsets, scores, softmax=False) == pytest.approx(5.2)


def test_the_retry_after_a_kill() -> None:
    assert sizey_retry(4.0, 1.0, 10.0, 5.0, tau=0.9) == 10.0  # the largest peak seen
    assert sizey_retry(9.6, 1.0, 10.0, 5.0, tau=0.9) == 19.2  # within 5 % of it: double
    assert sizey_retry(12.0, 1.0, 10.0, 5.0, tau=0.9) == 24.0  # above it: double
    assert sizey_retry(4.0, 8.0, 10.0, 5.0, tau=0.5) == 8.0  # larger input, peaks rank with inputs
    assert sizey_retry(4.0, 8.0, 10.0, 5.0, tau=0.2) == 10.0  # they do not


def _linear(n: int, seed: int = 0) -> list[Sample]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(1e8, 1e10, n)
    y = 0.3 * x + 5e8 + rng.normal(0, 1e8, n)
    return [Sample(int(p), int(i), 60.0) for p, i in zip(y, x, strict=True)]


def test_sizey_learns_a_peak_that_follows_the_input() -> None:
    samples = _linear(40)
    sizey = SizeyPredictor().fit(samples)
    small, large = sizey.predict(int(1e9)), sizey.predict(int(9e9))
    assert 0.8e9 < small < 1.5e9 and 3.0e9 < large < 3.8e9
    assert sizey.errors_.shape == (4, 36)  # one online error per model for each task after the 4th


def test_without_input_sizes_sizey_is_the_mean_plus_its_offset() -> None:
    samples = [Sample(p, None, 60.0) for p in (100, 110, 120, 130, 140)]
    sizey = SizeyPredictor(offset="median-under").fit(samples)
    # the one online error: the 5th task (140) sized at the mean of the first four (115)
    assert sizey.predict() == pytest.approx(120 * (1 + (140 - 115) / 140), abs=1)


def test_a_moving_window_keeps_the_errors_already_known() -> None:
    samples = _linear(30)
    moved = SizeyPredictor().fit(samples[:29]).fit(samples[1:30])
    assert moved.errors_.shape == (4, 26)  # 25 kept (the oldest task's left) + the new task's
    restored = restore_state(SizeyPredictor(), json.loads(json.dumps(fitted_state(moved))))
    assert restored.predict(int(5e9)) == moved.predict(int(5e9))


def test_killed_tries_are_not_learnt_as_peaks() -> None:
    samples = _linear(20)
    with_kills = [*samples, Sample(10**6, int(5e9), 60.0, lower_bound=True)]
    assert SizeyPredictor().fit(with_kills).predict(int(5e9)) == SizeyPredictor().fit(samples).predict(
        int(5e9)
    )


def test_sizey_is_a_registered_anchor() -> None:
    sizey = make_predictor("sizey")
    assert sizey.fit(_linear(3)).predict(None, 2 * 10**9) == 2 * 10**9  # cold: the user's request


def test_from_scratch_the_earliest_errors_come_from_models_on_fewer_tasks_than_tuned_on() -> None:
    rng = np.random.default_rng(0)  # peaks unrelated to inputs: the search picks many neighbours
    noisy = [Sample(int(2e9 + rng.normal(0, 5e8)), int(rng.uniform(1e8, 1e10)), 60.0) for _ in range(40)]
    sizey = SizeyPredictor().fit(noisy)
    assert dict(sizey.params_[3])["n_neighbors"] > 4  # more than the first prefix refitted here
    assert np.isfinite(sizey.errors_).all() and sizey.errors_.shape == (4, 36)


def test_the_forest_grid_scored_from_one_forest_per_depth_is_the_grid_search() -> None:
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import KFold, cross_val_score

    from airflow_adaptive.core.sizing.sizey import GRIDS, _estimator, _forest_scores

    samples = _linear(20, seed=5)
    x = np.array([float(s.input_size_bytes or 0) for s in samples])
    y = np.array([float(s.peak_memory_bytes) for s in samples])
    folds, scorer = KFold(5), make_scorer(accuracy)
    searched = [
        float(np.mean(cross_val_score(_estimator("forest", p), x[:, None], y, cv=folds, scoring=scorer)))
        for p in GRIDS["forest"]
    ]
    assert _forest_scores(x, y, folds, GRIDS["forest"]) == pytest.approx(searched, rel=1e-12)


def test_unknown_sizes_zero_peaks_and_bad_settings() -> None:
    samples = _linear(12)
    partly = [*samples[:-1], Sample(samples[-1].peak_memory_bytes, None, 60.0)]
    unsized = SizeyPredictor().fit([Sample(s.peak_memory_bytes, None, 60.0) for s in partly])
    assert SizeyPredictor().fit(partly).predict(int(5e9)) == unsized.predict(int(5e9))  # no 0-byte inputs
    assert SizeyPredictor().fit([*samples, Sample(0, int(5e9), 60.0)]).predict(int(5e9)) > 0
    from airflow_adaptive.exceptions import InvalidSettingError

    for bad in (SizeyPredictor(offset="max"), SizeyPredictor(alpha=2.0)):
        with pytest.raises(InvalidSettingError, match="sizey: "):
            bad.fit(samples)
