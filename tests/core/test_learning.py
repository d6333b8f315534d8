"""Learning at record time: stored models decide exactly as a refit would; rollups and sketches add up."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from airflow_adaptive.core.decide import Fitted, SizingSettings, decide_with, fit_history, to_samples
from airflow_adaptive.core.fitted_model import (
    FittedModel,
    fit_model,
    needs_refit,
    restore_predictor,
    staleness,
)
from airflow_adaptive.core.model import ExitReason, MemoryRequest, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.rollup import FamilyRollup, contribution
from airflow_adaptive.core.sizing import make_predictor, predictor_names
from airflow_adaptive.core.sketch import LogHistogram
from airflow_adaptive.core.units import GIB, MIB
from airflow_adaptive.store.learning import Learning
from airflow_adaptive.store.process import ProcessHistoryStore

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def generated_history(seed: int, n: int, *, sized: bool) -> list[Observation]:
    """Peaks that follow input size with noise, some sampled peaks and OOM kills."""
    rng = random.Random(seed)
    history = []
    for i in range(n):
        size = rng.randint(1, 20) * 10**9
        peak = int(size * 0.2 + rng.lognormvariate(0, 0.4) * 500 * MIB)
        kind = PeakKind.SAMPLED if rng.random() < 0.1 else PeakKind.MEASURED
        killed = rng.random() < 0.05
        history.append(
            Observation(
                TaskKey("d", "t", f"r{i}", -1, 1),
                "fam",
                Usage(None if killed else peak, 100.0, rng.uniform(10, 600), 10**6, 10**6, kind),
                ExitReason.OOM_KILLED if killed else ExitReason.COMPLETED,
                memory_request_bytes=4 * GIB,
                memory_limit_bytes=peak // 2 if killed else 4 * GIB,
                input_size_bytes=size if sized else None,
                finished_at=T0 + timedelta(minutes=i),
            )
        )
    return history


def stored(history: list[Observation], settings: SizingSettings) -> Fitted:
    """Fit as the store does at record time, through JSON as the database keeps it, and restore."""
    samples = to_samples(history)
    model = fit_model(samples, settings, len(samples), 42)
    document = json.loads(json.dumps(model.__dict__))
    restored = FittedModel(**document)
    return Fitted(
        restore_predictor(restored, settings), restored.window_samples, restored.lower_bound_samples
    )


@pytest.mark.parametrize("name", predictor_names())
@pytest.mark.parametrize("seed", [0, 1])
def test_a_stored_model_decides_exactly_as_a_refit(name: str, seed: int) -> None:
    settings = SizingSettings(strategy=name, cap_bytes=32 * GIB)
    for sized, n in ((True, 60), (False, 25), (True, 3)):
        history = generated_history(seed, n, sized=sized)
        user = MemoryRequest(4 * GIB, 4 * GIB)
        killed = Observation(
            TaskKey("d", "t", "x", -1, 1), "fam", Usage(peak_kind=PeakKind.CENSORED), ExitReason.OOM_KILLED,
            memory_request_bytes=3 * GIB, memory_limit_bytes=3 * GIB,
        )  # fmt: skip
        refitted, restored_fit = fit_history(history, settings), stored(history, settings)
        for size in (None, 5 * 10**9, 19 * 10**9):
            for previous in (None, killed):
                refit = decide_with(refitted, user, settings,
                                    input_size_bytes=size, previous_attempt=previous)  # fmt: skip
                restored = decide_with(restored_fit, user, settings,
                                       input_size_bytes=size, previous_attempt=previous)  # fmt: skip
                assert restored == refit, (name, sized, n, size, previous)
        fresh = make_predictor(name, cap_bytes=settings.cap_bytes).fit(to_samples(history))
        again = restored_fit.predictor
        assert again.retry(GIB, 5 * 10**9) == fresh.retry(GIB, 5 * 10**9)


def test_resuming_from_a_stored_model_equals_fitting_from_scratch() -> None:
    settings = SizingSettings()
    history = generated_history(3, 80, sized=True)
    samples = to_samples(history)
    earlier = fit_model(samples[:60], settings, 60)
    resumed = fit_model(samples, settings, len(samples), previous=earlier)
    scratch = fit_model(samples, settings, len(samples))
    assert resumed.state == scratch.state


def test_refit_cadence_follows_the_settings_growth() -> None:
    for growth in (0.05, 0.0):
        store = ProcessHistoryStore(Learning(SizingSettings(strategy="pc95", refit_growth=growth)))
        fitted, fits = -1, []
        for n, obs in enumerate(generated_history(0, 200, sized=False)):
            usable = len(to_samples([obs]))
            refitted = bool(store.record([replace(obs, key=replace(obs.key, run_id=f"x{n}"))]).refitted)
            state = store.family("fam")
            samples = state.rollup.usable_samples if state else 0
            assert refitted == (usable > 0 and needs_refit(fitted, samples, growth))
            fitted = samples if refitted else fitted
            fits.append(refitted)
        # every usable attempt below 20, then each 5 % of growth; at growth 0, every usable one
        assert sum(fits[:19]) >= 17 and (sum(fits[19:]) < 60 if growth else sum(fits[19:]) > 150)


def test_staleness_says_why() -> None:
    settings = SizingSettings()
    model = fit_model(to_samples(generated_history(0, 30, sized=False)), settings, 30)
    assert staleness(None, settings, 30) == "no stored model"
    assert staleness(model, settings, 30) is None
    assert staleness(model, settings, 31) is None  # within 5 %
    assert "30 of 40" in (staleness(model, settings, 40) or "")
    assert "'adaptive' or other settings" in (staleness(model, SizingSettings(strategy="pc95"), 30) or "")


def test_log_histogram_quantiles_match_numpy_within_a_percent_and_values_can_be_removed() -> None:
    values = np.random.default_rng(0).lognormal(3, 2, 5000)
    histogram = LogHistogram()
    for v in values:
        histogram.add(float(v))
    for q in (0.0, 0.01, 0.33, 0.5, 0.9, 0.99, 1.0):
        assert histogram.quantile(q) == pytest.approx(float(np.quantile(values, q)), rel=0.011)
    for v in values[:4000]:
        histogram.add(float(v), -1)
    assert histogram.total == 1000
    assert histogram.quantile(0.5) == pytest.approx(float(np.quantile(values[4000:], 0.5)), rel=0.011)
    assert LogHistogram(histogram.to_json()) == histogram
    assert LogHistogram().quantile(0.5) is None
    zero = LogHistogram()
    zero.add(0.0)
    zero.add(float("nan"))
    assert zero.quantile(1.0) == 0.0  # not positive, not finite: counted at 0, never an error


def test_a_rollup_is_the_sum_of_its_attempts_and_replacing_one_is_exact() -> None:
    history = generated_history(5, 50, sized=True)
    total = FamilyRollup("fam")
    for obs in history:
        total = total.plus(contribution(obs))
    assert total.attempts == 50 and total.usable_samples == len(to_samples(history))
    assert total.oom_killed == sum(o.oom_killed for o in history)
    changed = history[:]
    changed[7] = generated_history(99, 8, sized=True)[7]
    replaced = total.plus(contribution(history[7]), -1).plus(contribution(changed[7]))
    recomputed = FamilyRollup("fam")
    for obs in changed:
        recomputed = recomputed.plus(contribution(obs))
    for field in ("attempts", "completed", "oom_killed", "usable_samples", "cpu_cores_n", "peak_memory_n"):
        assert getattr(replaced, field) == getattr(recomputed, field)
    assert replaced.peak_memory_sum == pytest.approx(recomputed.peak_memory_sum)
    assert replaced.demand().peak_memory_bytes == pytest.approx(
        float(np.mean([o.usage.peak_memory_bytes for o in changed if o.usage.peak_memory_bytes is not None]))
    )
