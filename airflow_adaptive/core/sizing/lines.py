"""Lines of peak memory on a task's input size (or its log): what ``adaptive``'s size candidates
fit, and how a fitted line is read at a new input."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from scipy.stats import t as student_t

from .base import linear_quantiles


def _identity(x: np.ndarray) -> np.ndarray:
    return x


Transform = Callable[[np.ndarray], np.ndarray]
SIZE_MODELS: tuple[tuple[str, Transform], ...] = (("input size", _identity), ("log input size", np.log1p))
# SIZE_MODELS index, slope, intercept, residual quantiles, and the prediction interval's terms:
# residual standard error, n, mean transformed input, its sum of squares, t quantiles (PI_QUANTILES)
Line = tuple[int, float, float, np.ndarray, np.ndarray]
PI_QUANTILES = (0.9, 0.95, 0.99)  # one-sided prediction intervals of a size line: candidates


@lru_cache(maxsize=8192)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile; cached, as a replay asks it for the same few degrees of freedom again
    and again (scipy's ``ppf`` costs ~60 µs a call)."""
    return float(student_t.ppf(p, df))


def fit_line(model: int, x: np.ndarray, peaks: np.ndarray, quantiles: Sequence[float]) -> Line | None:
    """The least-squares line of ``peaks`` on size model ``model`` of inputs ``x`` (closed form),
    with its residuals' ``quantiles`` and prediction-interval terms; None with fewer than 3 tasks or
    a single input (no line to fit yet)."""
    tx = SIZE_MODELS[model][1](x)
    n = peaks.size
    if n < 3 or np.ptp(tx) == 0:
        return None
    mean, mean_peak = float(tx.sum()) / n, float(peaks.sum()) / n
    centred = tx - mean
    sxx = float(centred @ centred)
    slope = float(centred @ (peaks - mean_peak)) / sxx
    intercept = mean_peak - slope * mean
    residuals = peaks - (intercept + slope * tx)
    spread = math.sqrt(float(residuals @ residuals) / (n - 2))
    t_terms = [t_quantile(p, n - 2) for p in PI_QUANTILES]
    terms = np.array([spread, n, mean, sxx, *t_terms])
    return (model, slope, intercept, linear_quantiles(residuals, np.asarray(quantiles)), terms)


def line_at(line: Line, x_next: float) -> tuple[float, float]:
    """A size line's value at input ``x_next``, and its leverage ``1/n + (x - mean)² / Sxx``."""
    model, slope, intercept, _, terms = line
    tx = float(SIZE_MODELS[model][1](np.array([x_next]))[0])
    n, mean, sxx = terms[1:4]
    return intercept + slope * tx, 1.0 / n + (tx - mean) ** 2 / sxx


def line_bound(at_bytes: float, spread_bytes: float, n: float, leverage: float, budget: float) -> float:
    """A fitted line's one-sided prediction interval at ``1 - budget`` (OLS, ``n - 2`` degrees of
    freedom): ``at + t * s * sqrt(1 + leverage)``."""
    t = t_quantile(1.0 - budget, max(n - 2, 1))
    return float(at_bytes + t * spread_bytes * math.sqrt(1.0 + leverage))


RISE_LEVEL = 0.01  # one-sided: a line's slope above 0 at this level says its peaks grow with input


def rises_with_input(line: Line) -> bool:
    """Whether a fitted line's slope is above 0 by a one-sided t test at ``RISE_LEVEL``."""
    _, slope, _, _, terms = line
    spread, n, _, sxx = terms[:4]
    return slope > 0 and slope * math.sqrt(sxx) > t_quantile(1.0 - RISE_LEVEL, max(n - 2, 1)) * spread
