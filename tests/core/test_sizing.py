"""Every registered predictor through one contract; the replay evaluator on hand-checked cases."""

from __future__ import annotations

import json
import pickle
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_adaptive.core.sizing import ANCHORS, base, make_predictor, predictor_names
from airflow_adaptive.core.sizing.adaptive import AdaptivePredictor
from airflow_adaptive.core.sizing.base import Sample, linear_quantiles, prefix_quantiles
from airflow_adaptive.core.sizing.lines import SIZE_MODELS, fit_line
from airflow_adaptive.core.sizing.prior import PeakPrior
from airflow_adaptive.core.sizing.state import fitted_state, restore_state
from airflow_adaptive.core.units import GIB, MIB

CAP = 64 * GIB


def history(n: int = 40, *, sized: bool = True) -> list[Sample]:
    """Peaks that grow with input size plus a deterministic wobble."""
    return [
        Sample(
            int((1 + i % 7) * 300 * MIB + (i % 3) * 50 * MIB),
            (1 + i % 7) * 10**9 if sized else None,
            60.0 + i,
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("name", predictor_names())
def test_predictor_contract(name: str) -> None:
    predictor = make_predictor(name, cap_bytes=CAP)
    raw = predictor.inner  # type: ignore[attr-defined]
    params = raw.get_params()
    assert type(raw)(**params).get_params() == params  # parameters round-trip through __init__
    samples = history()
    assert predictor.fit(samples) is predictor
    first = [predictor.predict(4 * 10**9, 2 * GIB), predictor.predict(None, None), predictor.predict()]
    again = make_predictor(name, cap_bytes=CAP).fit(samples)
    assert [
        again.predict(4 * 10**9, 2 * GIB),
        again.predict(None, None),
        again.predict(),
    ] == first  # deterministic
    for value in first:
        assert MIB <= value <= CAP
    retried = predictor.retry(first[0], 4 * 10**9)
    assert first[0] < retried <= CAP or first[0] == CAP
    assert predictor.retry(CAP) == CAP  # never above the cap
    tiny = make_predictor(name, cap_bytes=CAP).fit([Sample(10, None, 1.0)] * 12)
    assert tiny.predict() >= MIB  # never below the 1 MiB floor
    unsized = make_predictor(name, cap_bytes=CAP).fit(history(sized=False))
    assert MIB <= unsized.predict(None) <= CAP  # input size is optional


def _chain(predictor: base.Predictor) -> list[base.Predictor]:
    """The predictor and every predictor it wraps."""
    chain = [predictor]
    while isinstance(chain[-1], base.Wrapper):
        chain.append(chain[-1].inner)
    return chain


def _state(predictor: base.Predictor) -> bytes:
    """Everything the predictor holds but the prior, which it only reads (and which memoises)."""
    return pickle.dumps(
        [{k: v for k, v in vars(part).items() if k not in ("_prior", "inner")} for part in _chain(predictor)]
    )


def _ready_prior() -> PeakPrior:
    prior = PeakPrior(min_peaks=3)
    for peak_mib in (300, 400, 500):
        prior.add(peak_mib * MIB)
    return prior


@pytest.mark.parametrize("name", predictor_names())
def test_predictor_estimator_rules(name: str) -> None:
    """scikit-learn's estimator checks, for our contract: __init__ stores its parameters and
    nothing else; fit changes no parameter; predict and retry answer the same twice and change no
    state; refitting gives what a fresh predictor fitted on the same history gives."""
    predictor = make_predictor(name, cap_bytes=CAP)
    for part in _chain(predictor):
        assert set(vars(part)) == set(part.get_params()), type(part).__name__
    params = [part.get_params() for part in _chain(predictor)]
    for samples, prior in ((history(), None), ([], _ready_prior()), (history(3), _ready_prior())):
        predictor.fit(samples, prior)
        assert [part.get_params() for part in _chain(predictor)] == params  # fit set no parameter
        state = _state(predictor)
        asked = [(4 * 10**9, 2 * GIB), (None, None), (None, 8 * GIB)]
        answers = [predictor.predict(*args) for args in asked]
        retries = [
            predictor.retry(a, size, request) for a, (size, request) in zip(answers, asked, strict=True)
        ]
        assert [predictor.predict(*args) for args in asked] == answers
        assert [predictor.retry(a, s, r) for a, (s, r) in zip(answers, asked, strict=True)] == retries
        assert _state(predictor) == state  # predict and retry changed nothing
        fresh = make_predictor(name, cap_bytes=CAP).fit(samples, prior)
        assert [fresh.predict(*args) for args in asked] == answers  # refit == fresh fit
        assert [fresh.retry(a, s, r) for a, (s, r) in zip(answers, asked, strict=True)] == retries


def test_anchors_are_the_published_strategies() -> None:
    ours = {"user", "whole-node", "adaptive", "adaptive-pooled", "percentile-margin"}
    assert set(ANCHORS) == set(predictor_names()) - ours


def test_adaptive_scoring_is_incremental_and_exact() -> None:
    samples = history(60)
    incremental = AdaptivePredictor()
    for n in range(1, 61):
        incremental.fit(samples[:n])
    scratch = AdaptivePredictor().fit(samples)
    assert incremental.scores_ == pytest.approx(scratch.scores_)
    assert incremental.predict(3 * 10**9) == scratch.predict(3 * 10**9)


def test_adaptive_from_scratch_scores_only_the_last_ten_half_lives() -> None:
    samples = history(60)
    short = AdaptivePredictor(half_life_tasks=2.0).fit(samples)  # scores the last 20 tasks only
    incremental = AdaptivePredictor(half_life_tasks=2.0)
    for n in range(1, 61):
        incremental.fit(samples[:n])
    # Each older task weighs 0.5**20 of the newest: the scores differ slightly, the choice does not.
    assert short.scores_ == pytest.approx(incremental.scores_, rel=0.01)
    assert not np.array_equal(short.scores_, incremental.scores_)
    assert short.best_ == incremental.best_
    assert short.predict(3 * 10**9) == incremental.predict(3 * 10**9)


def test_adaptive_uses_input_size_when_it_explains_memory() -> None:
    samples = [Sample(int(x * 0.5) + 100 * MIB, x, 100.0) for x in range(GIB, 40 * GIB, GIB)]
    predictor = AdaptivePredictor().fit(samples)
    assert (
        "line on input size" in predictor.rule_
        and "10.1 GiB at their mean input 20 GiB" in predictor.explain()
    )
    small, large = predictor.predict(2 * GIB), predictor.predict(30 * GIB)
    assert small < large and large >= int(30 * GIB * 0.5)


def noisy_family(n: int = 300, seed: int = 3) -> list[Sample]:
    """Peaks around 2 GiB with a long right tail: cheap rules (P50, P90) are killed often."""
    rng = np.random.default_rng(seed)
    return [Sample(int(2 * GIB * v), None, 600.0) for v in rng.lognormal(0.0, 0.25, n)]


def test_the_oom_budget_bounds_the_replayed_kill_rate_of_the_chosen_rule() -> None:
    # Kills that cost a tenth of the runtime make aggressive rules cheapest when nothing bounds them.
    free = AdaptivePredictor(time_to_failure=0.1, max_oom_rate=None).fit(noisy_family())
    bounded = AdaptivePredictor(time_to_failure=0.1, max_oom_rate=0.02).fit(noisy_family())
    assert free.oom_rates()[free.best_] > 0.05  # the cheapest rule, unbounded, kills often
    assert bounded.oom_rates()[bounded.best_] <= 0.02
    assert bounded.scores_[bounded.best_] > free.scores_[free.best_]  # fewer kills cost memory
    assert "budget 2.0%" in bounded.explain()


def test_with_no_rule_within_the_budget_the_cheapest_near_the_fewest_kills_is_used() -> None:
    predictor = AdaptivePredictor(max_oom_rate=0.0).fit(noisy_family())
    rates = predictor.oom_rates()
    assert rates.min() > 0  # every rule was killed at least once: none meets a zero budget
    assert not predictor.within_target_
    assert rates[predictor.best_] <= rates.min() + 1e-12  # within zero of the fewest: the fewest
    assert re.search(r"no rule replayed on .* kept OOM kills within 0\.0%", predictor.explain())


def two_modes(seed: int, n: int) -> np.ndarray:
    """Peaks of a family with two modes: 80 % of its tasks at 0.4-1 GiB, 20 % at 2.8-3 GiB."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < 0.2, rng.uniform(2.8, 3.0, n), rng.uniform(0.4, 1.0, n)) * GIB


def test_a_family_of_two_modes_starts_at_the_top_of_its_lower_one_when_kills_are_allowed() -> None:
    """Between the median and P90 lies the first allocation that pays for such a family (its retry
    goes to the upper mode): with those quantiles among the rules, 400 more tasks cost a quarter less."""
    samples = [Sample(int(peak), None, 600.0) for peak in two_modes(0, 200)]
    future = two_modes(1, 400)

    def memory_time(p: AdaptivePredictor) -> float:  # byte-seconds of every try of ``future``
        total = 0.0
        for peak in future:
            limit = float(p.predict())
            while limit < peak:  # killed: charged its limit for the whole runtime, as the replay is
                total, limit = total + limit * 600.0, float(p.retry(int(limit)))
            total += (limit - peak) * 600.0
        return total

    wide = AdaptivePredictor(max_oom_rate=1.0).fit(samples)
    narrow = AdaptivePredictor(quantiles=(0.95, 0.5, 0.9, 0.99, 1.0), max_oom_rate=1.0).fit(samples)
    assert wide.rule_.startswith(("P70", "P80")) and narrow.rule_.startswith("P50")
    assert 0.9 * GIB < wide.predict() < 1.1 * GIB < 2.8 * GIB <= wide.retry(wide.predict())
    assert memory_time(wide) < 0.8 * memory_time(narrow)
    assert AdaptivePredictor().fit(samples).rule_.startswith("P95")  # the default budget: no kills bought


def test_adaptive_cold_start_keeps_the_request_whatever_other_families_used() -> None:
    """A new family's first tasks all start from one decision: it is the request, not the request
    scaled by what other families used (a batch of kills when that guess is low)."""
    prior = PeakPrior(margin_fraction=0.0, min_peaks=3)
    for peak in (100, 200, 250):
        prior.add(peak * MIB)
    predictor = AdaptivePredictor().fit([], prior)
    assert predictor.predict(None, 8 * GIB) == 8 * GIB
    assert predictor.retry(8 * GIB, None, 8 * GIB) == 16 * GIB  # killed at the request: doubling
    assert AdaptivePredictor().fit([]).predict(None, 8 * GIB) == 8 * GIB  # no prior: the request


def test_adaptive_cold_start_without_a_request_uses_other_families_peaks() -> None:
    """The quantile the OOM target allows (P99 at the default 2 % budget, whose target is half of
    it; P90 at a 20 % budget) + the margin, at most 1 GiB, once the prior holds the 1 / target
    peaks that quantile needs (none before: the pod keeps no limit)."""
    prior = PeakPrior(margin_fraction=0.1, min_peaks=3)
    assert AdaptivePredictor().fit([], prior).predict() == AdaptivePredictor().default_bytes  # none yet
    for peak in range(1, 10):
        prior.add(peak * 50 * MIB)
    waits = AdaptivePredictor(max_oom_rate=0.2).fit([], prior).cold_without_request(None)
    assert waits is not None and waits.allocation_bytes is None  # 9 < 10
    assert "a P90 of other task families' peaks needs 10 of them, the store holds 9" in waits.basis
    prior.add(500 * MIB)
    assert prior.peak_bytes(0.9) == pytest.approx(455 * MIB * 1.1)
    p90 = AdaptivePredictor(max_oom_rate=0.2).fit([], prior)
    assert p90.predict() == int(455 * MIB * 1.1)  # 450 + 0.1 x 50
    assert p90.retry(p90.predict()) == 2 * p90.predict()  # killed: doubling, as without a prior
    p99 = AdaptivePredictor().fit([], prior).cold_without_request(None)
    assert p99 is not None and p99.allocation_bytes is None  # P99: 10 < 100 peaks
    for _ in range(90):
        prior.add(100 * MIB)
    first = AdaptivePredictor().fit([], prior).predict()
    assert first == int(450.5 * MIB * 1.1)  # P99 of 50, 91 x 100, 150..500 MiB: 450 + 0.01 x 50
    assert make_predictor("pc95").fit([], prior).predict() == make_predictor("pc95").default_bytes
    for _ in range(100):
        prior.add(8 * GIB)  # larger workflows in the store: never above the 1 GiB default
    assert AdaptivePredictor().fit([], prior).predict() == AdaptivePredictor().default_bytes


@pytest.mark.parametrize("size", [1, 2, 3, 40, 700])
def test_prefix_quantiles_are_numpys_own(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The adaptive default scores every prefix's quantiles from one sorted matrix: each row must
    be exactly what ``np.quantile`` gives for that prefix (ties and the maximum included), also
    when the matrix is built in blocks."""
    monkeypatch.setattr(base, "_MATRIX_CELLS", 5_000)  # 700 values: blocks of 7 prefixes
    rng = np.random.default_rng(size)
    values = rng.lognormal(20, 1, size)
    values[::7] = values[0]
    quantiles = (0.95, 0.5, 0.9, 0.99, 1.0, 0.0)
    for first in (1, max(1, size - 3)):
        want = np.array([np.quantile(values[:n], quantiles) for n in range(first, size)])
        got = prefix_quantiles(values, quantiles, first)
        assert got.shape == (size - first, len(quantiles))
        assert np.array_equal(got, want.reshape(got.shape))


@pytest.mark.parametrize("size", [1, 2, 3, 10, 501])
def test_linear_quantiles_and_lines_are_numpys(size: int) -> None:
    """The replay's per-task quantiles are numpy's to the bit; its closed-form size lines are
    ``np.polyfit``'s to rounding, and a single input or fewer than three tasks give no line."""
    rng = np.random.default_rng(size)
    values = rng.lognormal(20, 1, size)
    values[::3] = values[0]
    quantiles = np.array([0.95, 0.5, 0.9, 0.99, 1.0, 0.0, 1 / 3])
    assert np.array_equal(linear_quantiles(values, quantiles), np.quantile(values, quantiles))
    assert np.array_equal(linear_quantiles(values, tuple(quantiles)), np.quantile(values, quantiles))
    inputs = rng.lognormal(21, 1, size)
    for model, (_, transform) in enumerate(SIZE_MODELS):
        line = fit_line(model, inputs, values, tuple(quantiles))
        if size < 3:
            assert line is None
            continue
        assert line is not None
        slope, intercept = np.polyfit(transform(inputs), values, 1)
        assert line[1] == pytest.approx(slope, rel=1e-9) and line[2] == pytest.approx(intercept, rel=1e-9)
        assert fit_line(model, np.full(size, 5.0), values, tuple(quantiles)) is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 1)), min_size=1, max_size=30),
    st.one_of(st.none(), st.floats(0, 1)),
    st.integers(0, 40),
)
def test_the_rule_chosen_keeps_the_budget_rules(
    rules: list[tuple[float, float]], budget: float | None, scored: int
) -> None:
    """Whatever the scores and kill rates: the chosen rule keeps within the target (half the
    budget) when any rule does (else within one target of the fewest kills), and no allowed rule is
    cheaper than it unless the default rule was kept (too few tasks, or no rule clearly cheaper)."""
    predictor = AdaptivePredictor(max_oom_rate=budget)
    target = None if budget is None else budget / 2
    scores, rates = np.array([s for s, _ in rules]), np.array([r for _, r in rules])
    best, within = predictor._choose(scores, rates, scored)
    limit = np.inf if target is None else target if within else rates.min() + target
    allowed = rates <= limit
    assert within == (target is None or bool(rates[best] <= target))
    if scored < predictor.min_scored:
        assert best == 0
        return
    assert allowed[best]
    if best != 0 or not allowed[0]:
        assert scores[best] == scores[allowed].min()
    else:  # the default stays unless an allowed rule is below switch_ratio of it
        assert scores[allowed].min() >= predictor.switch_ratio * scores[0]


def test_a_size_lines_prediction_interval_widens_away_from_the_inputs_seen() -> None:
    """OLS's interval: t * s * sqrt(1 + 1/n + (x - mean)^2 / Sxx) above the line, so a task far
    larger than any seen gets more headroom than one in the middle (the Lotaru workflows grow)."""
    from airflow_adaptive.core.sizing.adaptive import PI_QUANTILES, AdaptivePredictor

    rng = np.random.default_rng(0)
    inputs = rng.uniform(1, 20, 40) * GIB
    samples = [Sample(int(2 * x + rng.normal(0, 0.3) * GIB), int(x), 60.0) for x in inputs]
    model = AdaptivePredictor().fit(samples)
    names = model._candidate_names(True)
    first = names.index(f"line on input size + P{PI_QUANTILES[0] * 100:g} prediction interval")
    middle, far = (model._apply(*model.pieces_, x * GIB)[first] for x in (10.5, 60.0))
    assert middle - 2 * 10.5 * GIB > 0  # above the line
    assert far - 2 * 60 * GIB > middle - 2 * 10.5 * GIB  # and wider far from the inputs seen


def test_a_fitted_state_round_trips_through_json_with_non_finite_numbers() -> None:
    """Arrays are stored as plain lists when finite and element by element when not (JSON has no
    NaN); either way a restored predictor holds the same arrays, dtypes and shapes."""
    samples = [Sample(GIB * (1 + n % 5), 10 * (n + 1), 60.0, False) for n in range(40)]
    fitted = AdaptivePredictor().fit(samples)
    learnt = {"extra_": np.array([[1.0, np.nan], [np.inf, -np.inf]]), "counts_": np.arange(3)}
    vars(fitted).update(learnt)  # what a strategy might learn
    document = json.loads(json.dumps(fitted_state(fitted)))
    assert document["learnt"]["extra_"]["nd"][0][1] == {"float": "nan"}
    restored = restore_state(AdaptivePredictor(), document)
    for name, value in vars(fitted).items():
        if name.endswith("_") and isinstance(value, np.ndarray):
            again = getattr(restored, name)
            assert again.dtype == value.dtype and again.shape == value.shape, name
            assert np.array_equal(again, value, equal_nan=True), name
    assert restored.predict(input_size_bytes=200) == fitted.predict(input_size_bytes=200)


def test_the_spread_rule_is_the_largest_peak_plus_p90_minus_p50_at_most_plus_the_first_margin() -> None:
    predictor = AdaptivePredictor()
    q = np.array([[9.9, 9.8, 9.95, 9.99, 10.0, 9.9, 9.92], [2.0, 1.0, 3.0, 3.9, 4.0, 1.5, 2.5]]) * GIB
    # columns as QUANTILES: P95, P50, P90, P99, P100, P70, P80
    tight, wide = predictor._spread_rule(q)
    assert tight == pytest.approx((10.0 + (9.95 - 9.8)) * GIB)  # 10.15 GiB: 1.5 %, not 5 % above the top
    assert wide == pytest.approx(4.0 * 1.15 * GIB)  # 4 + (3 - 1) = 6 GiB capped at P100 + 15 %


def test_a_pile_of_peaks_under_a_ceiling_is_held_just_above_it() -> None:
    """bwa's shape: long tasks whose peaks sit within 1 % of each other. The percentage margins'
    smallest step above the largest peak is 5 %; the family's own spread is a few tenths of one."""
    rng = np.random.default_rng(5)
    peaks = (10 * GIB * (1.0 + 0.01 * rng.random(300))).astype(int)
    predictor = AdaptivePredictor().fit([Sample(int(p), None, 3600.0) for p in peaks])
    top, (p90, p50) = float(peaks.max()), (float(v) for v in np.quantile(peaks, [0.9, 0.5]))
    assert predictor.rule_ == "P100 of peaks + (P90 - P50), at most +15%"
    assert predictor.predict() == int(top + p90 - p50) and predictor.within_target_
    assert predictor.predict() < 1.01 * top  # P50 + 5 % or P100 + 5 % would hold 4-5 % more
