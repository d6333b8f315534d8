"""Memory as a linear function of input size (Witt et al.), and Witt's low-wastage regression."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize
from statsmodels.regression.quantile_regression import QuantReg
from statsmodels.tools.sm_exceptions import IterationLimitWarning

from ...exceptions import InvalidSettingError
from ..units import format_bytes
from .base import (
    Predictor,
    Sample,
    peaks,
    register_predictor,
    retry_waste,
    runtimes,
)

OFFSETS = ("mean+-", "mean-", "max-")
NM = {"maxiter": 80, "xatol": 1e-3, "fatol": 1e-4}  # a wastage within 0.01 % of used is converged


def _inputs(samples: Sequence[Sample]) -> np.ndarray | None:
    """Input sizes, or None when any is unknown or they do not vary (no slope to learn)."""
    sizes = [s.input_size_bytes for s in samples]
    if any(v is None for v in sizes):
        return None
    x = np.array(sizes, dtype=float)
    return x if np.ptp(x) > 0 else None


class LinearRegressionPredictor(Predictor):
    """OLS of peak on input size plus an offset from the residuals; intercept-only without sizes.

    Offsets, Witt et al. 2019 (``seeds/witt-feedback-memory-lff.txt``, section IV.B), over the n
    training points and the m under-predictions (f(x) < y):

    - ``mean+-``, equation (1): sqrt(sum (f(x) - y)^2 / (n - 1)) over all points;
    - ``mean-``, equation (2): sqrt(sum (f(x) - y)^2 / (m - 1)) over the under-predictions: their
      distance from the line, not their spread around their own mean (with m = 1, that one
      distance; with m = 0, no offset);
    - ``max-``, equation (3): max (y - f(x)), the largest under-prediction.
    """

    name = "linear-regression"
    min_samples = 2

    def __init__(self, offset: str = "mean-") -> None:
        self.offset = offset

    def _fit(self, samples: Sequence[Sample]) -> None:
        if self.offset not in OFFSETS:
            raise InvalidSettingError(f"offset must be one of {OFFSETS}, not {self.offset!r}")
        y = peaks(samples)
        x = _inputs(samples)
        if x is None:
            self.slope_, self.intercept_, self.mean_input_ = 0.0, float(y.mean()), 0.0
        else:
            self.slope_, self.intercept_ = (float(v) for v in np.polyfit(x, y, 1))
            self.mean_input_ = float(x.mean())
        residuals = y - (self.intercept_ + self.slope_ * (x if x is not None else 0.0))  # y - f(x)
        under = residuals[residuals > 0]
        if self.offset == "mean+-":
            self.offset_bytes_ = _root_mean_square(residuals, ddof=1)
        elif self.offset == "mean-":
            self.offset_bytes_ = _root_mean_square(under, ddof=1 if under.size > 1 else 0)
        else:
            self.offset_bytes_ = max(float(residuals.max()), 0.0)

    def _predict(self, input_size_bytes: int | None) -> float:
        # Without a size, the typical (mean) input is the best guess.
        x = self.mean_input_ if input_size_bytes is None else float(input_size_bytes)
        return max(self.intercept_ + self.slope_ * x, 0.0) + self.offset_bytes_

    def explain(self) -> str:
        return (
            f"{format_bytes(self.intercept_)} + {self.slope_:.3g} x input, "
            f"+ {self.offset} offset {format_bytes(self.offset_bytes_)} ({self.n_samples_} samples)"
        )


def _root_mean_square(errors: np.ndarray, ddof: int) -> float:
    """sqrt(sum e^2 / (k - ddof)) over k errors; 0 without any."""
    return float(np.sqrt((errors**2).sum() / (errors.size - ddof))) if errors.size > ddof else 0.0


class LowWastagePredictor(Predictor):
    """Witt et al. 2019: the line a + b x minimising total wasted memory x time under doubling retries.

    Starts from quantile-regression fits (statsmodels QuantReg at several quantiles) and refines
    the best with Nelder-Mead on the wastage.
    """

    name = "low-wastage"
    min_samples = 3

    def __init__(self, time_to_failure: float = 1.0, quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)) -> None:
        self.time_to_failure = time_to_failure
        self.quantiles = quantiles

    def _fit(self, samples: Sequence[Sample]) -> None:
        y, t = peaks(samples), runtimes(samples)
        x = _inputs(samples)
        scale = float(y.max())
        yn = y / scale

        used = float((y * t).sum())

        def waste(params: np.ndarray, xs: np.ndarray) -> float:
            """Wastage relative to what was used, so tolerances mean the same on every trace."""
            return (
                float(retry_waste((params[0] + params[1] * xs) * scale, y, t, self.time_to_failure).sum())
                / used
            )

        if x is None:
            candidates = [np.array([q, 0.0]) for q in np.quantile(yn, self.quantiles)]
            xs = np.zeros_like(y)
        else:
            xs = x / float(x.max())
            design = np.column_stack([np.ones_like(xs), xs])
            with warnings.catch_warnings():  # a starting point need not be converged
                warnings.simplefilter("ignore", IterationLimitWarning)
                candidates = [
                    np.asarray(QuantReg(yn, design).fit(q=q, max_iter=50).params, dtype=float)
                    for q in self.quantiles
                ]
        start = min(candidates, key=lambda p: waste(p, xs))
        if x is None:
            result = minimize(
                lambda p: waste(np.array([p[0], 0.0]), xs), start[:1], method="Nelder-Mead", options=NM
            )
            best = np.array([result.x[0], 0.0])
        else:
            best = minimize(lambda p: waste(p, xs), start, method="Nelder-Mead", options=NM).x
        self.intercept_ = float(best[0] * scale)
        self.slope_ = float(best[1] * scale / float(x.max())) if x is not None else 0.0

    def _predict(self, input_size_bytes: int | None) -> float:
        x = float(input_size_bytes) if input_size_bytes is not None else 0.0
        return max(self.intercept_ + self.slope_ * x, 1.0)

    def explain(self) -> str:
        return f"low-wastage line {format_bytes(self.intercept_)} + {self.slope_:.3g} x input"


@register_predictor("lr-mean+-", anchor=True)
def lr_mean_pm() -> Predictor:
    return LinearRegressionPredictor("mean+-")


@register_predictor("lr-mean-", anchor=True)
def lr_mean_minus() -> Predictor:
    return LinearRegressionPredictor("mean-")


@register_predictor("lr-max-", anchor=True)
def lr_max_minus() -> Predictor:
    return LinearRegressionPredictor("max-")


register_predictor("low-wastage", anchor=True)(LowWastagePredictor)
