"""Learning when an attempt is recorded, so that a decision only applies what was learnt.

The store calls :func:`fit_model` after recording a family's attempts, when
:func:`needs_refit` says the family's history grew enough since the last fit
(the same rule the replay measures with, so the numbers in the README are what
a deployment does). A decision restores the model with :func:`restore_predictor`;
it refits only when the model is missing, stale, or was fitted by another
strategy or settings (:func:`staleness`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .cpu import CpuHistory
from .decide import SizingSettings, fresh_predictor
from .runtimes import StoredRun
from .sizing import Predictor, Sample
from .sizing.state import STATE_FORMAT, fitted_state, restore_state

REFIT_ALWAYS_BELOW = (
    20  # samples: small families refit after every attempt (then SizingSettings.refit_growth)
)


def needs_refit(fitted_samples: int, samples_now: int, growth: float) -> bool:
    """Whether a model fitted on ``fitted_samples`` should be refitted now (-1: never fitted)."""
    if samples_now == fitted_samples:
        return False
    return (
        fitted_samples < 0
        or samples_now < REFIT_ALWAYS_BELOW
        or growth == 0
        or samples_now >= fitted_samples * (1.0 + growth)
        or samples_now < fitted_samples  # history was rebuilt smaller
    )


def model_version(settings: SizingSettings) -> str:
    """What a stored model depends on besides the history: strategy, bounds, OOM budget, encoding."""
    params = "".join(f";{name}={value!r}" for name, value in sorted(settings.params.items()))
    return (
        f"{settings.strategy};floor={settings.floor_bytes};cap={settings.cap_bytes};"
        f"oom={settings.max_oom_rate:g};cpu={settings.cpu_quantile:g};format={STATE_FORMAT}{params}"
    )


@dataclass(frozen=True)
class FittedModel:
    """A family's predictor as fitted on its history window, with what it was fitted on."""

    strategy: str
    version: str
    state: dict[str, Any]
    window_samples: int  # samples in the window it was fitted on
    lower_bound_samples: int  # of those, sampled or OOM-killed
    family_samples: int  # the family's usable samples of all time then (for staleness)
    fitted_through_id: int | None = None  # the newest attempt id it saw (store-assigned)
    cpu_cores: float | None = None  # the configured quantile of the window's cores busy (core/cpu.py)
    cpu_attempts: int = 0  # completed attempts with CPU known, in the window
    runs: Sequence[StoredRun] = ()  # the window's newest completed runs: node, seconds, input bytes
    bound_scores: Sequence[float] = ()  # its first peaks' scores against the small-sample bound
    steady_scores: Sequence[float] = ()  # those scored against its own spread's (steadier than the prior)


def fit_model(
    samples: Sequence[Sample],
    settings: SizingSettings,
    family_samples: int,
    fitted_through_id: int | None = None,
    previous: FittedModel | None = None,
    cpu: CpuHistory | None = None,
    runs: Sequence[StoredRun] = (),
) -> FittedModel:
    """Fit the configured strategy on a family's window of samples.

    ``previous`` (same version) lets incremental predictors resume: the adaptive
    strategy then scores only the tasks that are new since it was fitted.
    """
    predictor = fresh_predictor(settings)
    if previous is not None and previous.version == model_version(settings):
        restore_state(predictor, previous.state)
    predictor.fit(samples)
    return FittedModel(
        settings.strategy,
        model_version(settings),
        fitted_state(predictor),
        len(samples),
        sum(s.lower_bound for s in samples),
        family_samples,
        fitted_through_id,
        cpu.cores if cpu else None,
        cpu.attempts if cpu else 0,
        tuple(runs),
        tuple(float(score) for score in predictor.bound_scores()),
        tuple(float(score) for score in predictor.steady_scores()),
    )


def staleness(model: FittedModel | None, settings: SizingSettings, family_samples: int) -> str | None:
    """Why a stored model cannot be used as it is (None: it can)."""
    if model is None:
        return "no stored model"
    if model.version != model_version(settings):
        return f"stored model was fitted by {model.version.split(';')[0]!r} or other settings"
    if needs_refit(model.family_samples, family_samples, settings.refit_growth):
        return f"stored model saw {model.family_samples} of {family_samples} samples"
    return None


def restore_predictor(model: FittedModel, settings: SizingSettings) -> Predictor:
    """The fitted predictor a stored model describes, without refitting."""
    return restore_state(fresh_predictor(settings), model.state)
