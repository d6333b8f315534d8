"""Sizey (Bader et al., IEEE CLUSTER 2024): per task family, four regressors of peak memory on the
task's input size, combined by their resource-allocation quality (RAQ).

The models are a linear regression, an MLP, a random forest and k nearest neighbours, inputs and
peaks min-max scaled, each tuned by a grid search with cross-validation. For the task at hand,
model m's accuracy acc_m = -mean(min(|y - y_hat| / y, 1)) (its cross-validated score) and its
efficiency eff_m = -y_hat_m / max_j y_hat_j give RAQ_m = alpha * eff_m + (1 - alpha) * acc_m. The
allocation is the softmax blend (w_m proportional to exp(RAQ_m)): (sum w_m y_hat_m) *
(1 + sum w_m o_m), or with ``softmax=False`` the argmax model's y_hat_m * (1 + o_m). Each model's
offset o_m comes from its own online relative errors (y - y_hat) / y, made before each task was
learnt: the std of its absolute errors with outliers trimmed, the median of its under-predictions,
the median of all its absolute errors or the std of its under-predictions; ``dynamic`` (the
paper's default) takes, each time, the one that would have wasted least on the family's history
when a killed try is retried by doubling. After an OOM kill: the largest peak seen, unless that
is no larger than the killed limit (or within 5 % of it), or the input is larger than that peak's
input while peaks rank with inputs (Kendall tau > 0.25): then twice the killed limit.

Where this differs from the paper's public code, and why (docs/sizing.md):
- the offset is chosen before the task's own peak is known (the code adds it to the history
  first), and each family keeps its own error lists (the code shares them across task types);
- the grid is re-searched when a family's history has doubled since the last search, and the
  tuned models are refitted on every new task (a search per task costs seconds per decision);
- each model keeps its newest 100 online errors (from scratch, those of the newest 100 tasks);
- without input sizes (or all equal) every model can only learn the mean peak, so Sizey is the
  mean peak plus its dynamic offset, computed without fitting four identical models.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...exceptions import InvalidSettingError
from ..units import format_bytes
from .base import Predictor, Sample, Tags, peaks, register_predictor

MODELS = ("linear", "mlp", "forest", "knn")
GRIDS: dict[str, list[dict[str, Any]]] = {
    "linear": [{}],
    "mlp": [{"hidden_layer_sizes": (h, h), "alpha": a} for h in (5, 7, 9) for a in (1e-4, 1e-3)],
    "forest": [{"n_estimators": n, "max_depth": d} for n in (10, 25, 50) for d in (3, 5, 7)],
    "knn": [{"n_neighbors": k} for k in range(2, 10)],
}
OFFSETS = ("std", "median-under", "median-all", "std-under")
DEFAULT_OFFSET = 0.05  # the paper's offset before a model has errors
CV_FOLDS = 5
KENDALL_TAU = 0.25  # peaks rank with inputs above this: a larger input may need more than any seen
ERRORS_KEPT = 100  # online errors per model: the newest (from scratch, the newest computed)
MODEL_CACHE_SIZE = 64  # fitted model sets kept in this process (a restored state refits on a miss)


# -- the paper's formulas, pure --------------------------------------------------------------------
def relative_errors(peak: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(y - y_hat) / y: positive when the model predicted too little."""
    return (peak - predicted) / peak


def accuracy(peak: np.ndarray, predicted: np.ndarray) -> float:
    """-mean(min(|y - y_hat| / y, 1)): 0 is perfect, -1 as bad as it counts."""
    return -float(np.mean(np.minimum(np.abs(relative_errors(peak, predicted)), 1.0)))


def offset(kind: str, errors: np.ndarray, default: float = DEFAULT_OFFSET) -> float:
    """A model's offset (a fraction of its prediction) from its relative errors."""
    under = errors[errors > 0]
    if kind == "std":
        if errors.size < 2:
            return default
        absolute = np.abs(errors)
        low, high = np.percentile(absolute, [10, 90])
        spread = 1.5 * (high - low)
        kept = absolute[(absolute >= low - spread) & (absolute <= high + spread)]
        return float(np.std(kept))
    if kind == "median-all":
        positive = np.abs(errors)[np.abs(errors) > 0]
        return float(np.median(positive)) if positive.size else default
    if kind == "median-under":
        return float(np.median(under)) if under.size else default
    if kind == "std-under":
        return float(np.std(under)) if under.size else default
    raise ValueError(f"unknown Sizey offset {kind!r}; expected one of {', '.join(OFFSETS)} or dynamic")


def doubling_waste(allocation: np.ndarray, peak: np.ndarray) -> float:
    """Memory wasted over tasks sized ``allocation`` and retried by doubling until they fit: the
    killed tries' allocations plus the final try's excess (bytes, not weighted by time, as the
    paper chooses offsets)."""
    tries = np.ceil(np.log2(np.maximum(peak / allocation, 1.0)))  # doublings before a try fits
    final = allocation * 2.0**tries
    return float(np.sum(final - peak + allocation * (2.0**tries - 1.0)))


def dynamic_offset(errors: np.ndarray, fitted: np.ndarray, peak: np.ndarray) -> float:
    """Of the four offsets, the one whose allocations (the model's fit on the history, raised by
    it) would have wasted least on the history's peaks."""
    fitted = np.where(fitted > 0, fitted, fitted[fitted > 0].min() if (fitted > 0).any() else 1.0)
    costs = {kind: doubling_waste(fitted * (1.0 + offset(kind, errors)), peak) for kind in OFFSETS}
    return offset(min(costs, key=lambda kind: costs[kind]), errors)


def raq(predicted: np.ndarray, accuracies: np.ndarray, alpha: float) -> np.ndarray:
    """RAQ_m = alpha * efficiency + (1 - alpha) * accuracy, efficiency = -y_hat_m / max y_hat."""
    efficiency = -predicted / predicted.max()
    return alpha * efficiency + (1.0 - alpha) * accuracies


def softmax_weights(scores: np.ndarray) -> np.ndarray:
    """w_m proportional to exp(RAQ_m), summing to 1."""
    weights = np.exp(scores - scores.max())
    return weights / weights.sum()


def combine(predicted: np.ndarray, offsets: np.ndarray, scores: np.ndarray, softmax: bool) -> float:
    """The allocation: the softmax blend of predictions and offsets, or the best model's."""
    if not softmax:
        best = int(np.argmax(scores))
        return float(predicted[best] * (1.0 + offsets[best]))
    weights = softmax_weights(scores)
    return float((weights @ predicted) * (1.0 + weights @ offsets))


def sizey_retry(
    failed: float, input_size: float | None, peak_max: float, input_at_max: float | None, tau: float
) -> float:
    """After a kill at ``failed``: the largest peak seen, or twice ``failed`` when that peak is no
    help (not above ``failed`` by 5 %) or this input is larger than its input and peaks rank with
    inputs."""
    if peak_max <= failed * 1.05:
        return 2.0 * failed
    larger = input_size is not None and input_at_max is not None and input_size > input_at_max
    return 2.0 * failed if tau > KENDALL_TAU and larger else peak_max


# -- the four models ---------------------------------------------------------------------------------
def _estimator(model: str, params: dict[str, Any]) -> Any:
    """One model, scaled as the paper scales: min-max on the input and on the peak."""
    # imported here: forests and networks are only loaded where Sizey runs
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import LinearRegression
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    inner: Any
    if model == "linear":
        inner = LinearRegression()
    elif model == "mlp":
        inner = MLPRegressor(solver="lbfgs", max_iter=2000, random_state=0, **params)
    elif model == "forest":
        inner = RandomForestRegressor(max_features=1, random_state=0, **params)
    else:
        inner = KNeighborsRegressor(**params)
    return TransformedTargetRegressor(make_pipeline(MinMaxScaler(), inner), transformer=MinMaxScaler())


def _grid(model: str, n: int) -> list[dict[str, Any]]:
    """The model's grid for ``n`` samples in a cross-validation fold (k neighbours: at most n)."""
    train = n - math.ceil(n / min(CV_FOLDS, n))
    grid = GRIDS[model]
    return [p for p in grid if p.get("n_neighbors", 0) <= train] or [{"n_neighbors": max(train, 1)}]


def tune(x: np.ndarray, y: np.ndarray) -> tuple[tuple[tuple[tuple[str, Any], ...], ...], np.ndarray]:
    """Each model's best parameters by a grid search with cross-validation (the first of equals),
    and its mean score there: the accuracy above, on the held-out folds."""
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import KFold, cross_val_score

    scorer = make_scorer(accuracy)
    folds = KFold(min(CV_FOLDS, y.size))
    chosen, scores = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an MLP that stops at max_iter still predicts
        for model in MODELS:
            grid = _grid(model, y.size)
            found = (
                _forest_scores(x, y, folds, grid)
                if model == "forest"
                else [
                    float(
                        np.mean(
                            cross_val_score(_estimator(model, p), x[:, None], y, cv=folds, scoring=scorer)
                        )
                    )
                    for p in grid
                ]
            )
            best = int(np.argmax(found))
            chosen.append(tuple(sorted(grid[best].items())))
            scores.append(found[best])
    return tuple(chosen), np.asarray(scores)


def _forest_scores(x: np.ndarray, y: np.ndarray, folds: Any, grid: list[dict[str, Any]]) -> list[float]:
    """The forest grid's cross-validated accuracies, one forest per depth and fold: a forest of k
    trees is the first k trees of a larger one with the same seed, so its prediction is theirs."""
    largest = max(p["n_estimators"] for p in grid)
    errors: dict[tuple[int, int], list[float]] = {}
    for depth in sorted({p["max_depth"] for p in grid}):
        for train, test in folds.split(x):
            model = _estimator("forest", {"n_estimators": largest, "max_depth": depth})
            model.fit(x[train, None], y[train])
            pipeline, scale_y = model.regressor_, model.transformer_
            scaled = pipeline[:-1].transform(x[test, None])
            trees = np.array([tree.predict(scaled) for tree in pipeline[-1].estimators_])
            for size in sorted({p["n_estimators"] for p in grid}):
                predicted = scale_y.inverse_transform(trees[:size].mean(axis=0)[:, None])[:, 0]
                errors.setdefault((size, depth), []).append(accuracy(y[test], predicted))
    return [float(np.mean(errors[(p["n_estimators"], p["max_depth"])])) for p in grid]


_FITTED: OrderedDict[tuple[bytes, bytes, Any], list[Any]] = OrderedDict()
_FITTED_LOCK = threading.Lock()


def fitted_models(x: np.ndarray, y: np.ndarray, params: tuple[Any, ...]) -> list[Any]:
    """The four models fitted on (x, y) with ``params``; the last ``MODEL_CACHE_SIZE`` sets are kept,
    so a decision restored from the store does not refit what this process fitted."""
    key = (x.tobytes(), y.tobytes(), params)
    with _FITTED_LOCK:  # decisions may run in threads (the UI's, the store's fits)
        if key in _FITTED:
            _FITTED.move_to_end(key)
            return _FITTED[key]
    models = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model, chosen in zip(MODELS, params, strict=True):
            settings = dict(chosen)
            if "n_neighbors" in settings:  # tuned on more tasks than an earlier prefix refitted here
                settings["n_neighbors"] = min(settings["n_neighbors"], y.size)
            models.append(_estimator(model, settings).fit(x[:, None], y))
    with _FITTED_LOCK:
        _FITTED[key] = models
        if len(_FITTED) > MODEL_CACHE_SIZE:
            _FITTED.popitem(last=False)
    return models


def predictions(x: np.ndarray, y: np.ndarray, params: tuple[Any, ...], at: np.ndarray) -> np.ndarray:
    """Each model's prediction (rows) at the inputs ``at`` (columns); with one input size, the mean."""
    if np.ptp(x) == 0:
        return np.full((len(MODELS), at.size), y.mean())
    return np.vstack([m.predict(at[:, None]) for m in fitted_models(x, y, params)])


# -- the strategy ----------------------------------------------------------------------------------
class SizeyPredictor(Predictor):
    """Sizey as published, an anchor: see the module's docstring."""

    name = "sizey"
    min_samples = 4  # a 4-fold cross-validation at least (the paper trains on 30 % of >= 34 tasks)

    x_: np.ndarray
    y_: np.ndarray
    params_: tuple[Any, ...]
    accuracy_: np.ndarray
    errors_: np.ndarray  # each model's online relative errors (rows), for the last samples (columns)
    offsets_: np.ndarray  # each model's offset, a fraction of its prediction
    tuned_at_: int  # tasks learnt when the grid was last searched
    seen_: int  # tasks learnt in all (a moving window keeps the newest only)
    tau_: float

    def tags(self) -> Tags:
        return Tags(slow=True)

    def __init__(self, alpha: float = 0.0, softmax: bool = True, offset: str = "dynamic") -> None:
        self.alpha = alpha
        self.softmax = softmax
        self.offset = offset

    def _fit(self, samples: Sequence[Sample]) -> None:
        self._check()
        finished = [s for s in samples if not s.lower_bound and s.peak_memory_bytes > 0]  # peaks it learns
        kept = finished or [s for s in samples if s.peak_memory_bytes > 0] or [Sample(1)]
        y = peaks(kept)
        sizes = [s.input_size_bytes for s in kept]
        # one unknown size: no feature at all (as the regressions do), not a cluster of tasks at 0 bytes
        x = np.zeros(y.size) if any(v is None for v in sizes) else np.asarray(sizes, dtype=float)
        errors, new = self._known_errors(x, y)
        self.seen_ = (getattr(self, "seen_", 0) if new < y.size else 0) + new  # tasks learnt, window or not
        if (
            not hasattr(self, "params_")
            or self.seen_ >= 2 * self.tuned_at_
            or np.ptp(x) > 0 >= np.ptp(self.x_)
        ):
            self.params_, self.accuracy_ = tune(x, y) if np.ptp(x) > 0 else ((), np.zeros(len(MODELS)))
            self.tuned_at_ = self.seen_
        for i in range(max(y.size - new, y.size - ERRORS_KEPT), y.size):  # as seen before learning it
            if i >= self.min_samples:
                predicted = predictions(x[:i], y[:i], self.params_, x[i : i + 1])[:, 0]
                errors = np.hstack([errors, relative_errors(y[i], predicted)[:, None]])
        self.x_, self.y_, self.errors_ = x, y, errors[:, -ERRORS_KEPT:]
        self.offsets_ = self._offsets()  # they depend on the history only: once per fit, not per decision
        tau = _kendall_tau(x, y)
        self.tau_ = tau if math.isfinite(tau) else 0.0

    def _offsets(self) -> np.ndarray:
        """Each model's offset from its online errors (``dynamic``: the cheapest on the history)."""
        if self.offset != "dynamic":
            return np.array([offset(self.offset, e) for e in self.errors_])
        fitted = predictions(self.x_, self.y_, self.params_, self.x_)
        return np.array([dynamic_offset(e, f, self.y_) for e, f in zip(self.errors_, fitted, strict=True)])

    def _check(self) -> None:
        if self.offset != "dynamic" and self.offset not in OFFSETS:
            raise InvalidSettingError(
                f"sizey: offset must be dynamic or one of {', '.join(OFFSETS)}, not {self.offset!r}"
            )
        if not 0.0 <= self.alpha <= 1.0:
            raise InvalidSettingError(f"sizey: alpha must be between 0 and 1, not {self.alpha!r}")

    def _known_errors(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, int]:
        """The online errors already known for (x, y), and how many of its newest tasks are new. A
        window that moved on dropped its oldest tasks; anything else starts over."""
        empty = np.zeros((len(MODELS), 0))
        if not hasattr(self, "y_"):
            return empty, y.size
        old_x, old_y, old_errors = self.x_, self.y_, self.errors_
        for dropped in range(old_y.size + 1):
            kept = old_y.size - dropped
            if (
                kept <= y.size
                and np.array_equal(old_y[dropped:], y[:kept])
                and np.array_equal(old_x[dropped:], x[:kept])
            ):
                keep = min(old_errors.shape[1], kept)
                return old_errors[:, old_errors.shape[1] - keep :], y.size - kept
        return empty, y.size

    def allocation(self, input_size_bytes: float) -> tuple[float, np.ndarray, np.ndarray]:
        """The allocation for an input size, each model's prediction and each model's weight."""
        predicted = predictions(self.x_, self.y_, self.params_, np.array([input_size_bytes]))[:, 0]
        scores = raq(np.maximum(predicted, 1.0), self.accuracy_, self.alpha)
        value = combine(predicted, self.offsets_, scores, self.softmax)
        if value <= 0:  # every model below zero: the smallest peak seen, with the default offset
            value = float(self.y_.min()) * (1.0 + DEFAULT_OFFSET)
        return value, predicted, softmax_weights(scores)

    def _predict(self, input_size_bytes: int | None) -> float:
        x_next = float(input_size_bytes) if input_size_bytes is not None else float(self.x_.mean())
        return self.allocation(x_next)[0]

    def _retry(self, failed_bytes: int, input_size_bytes: int | None) -> float:
        at_max = float(self.x_[int(np.argmax(self.y_))])
        size = None if input_size_bytes is None else float(input_size_bytes)
        return sizey_retry(float(failed_bytes), size, float(self.y_.max()), at_max, self.tau_)

    def explain(self) -> str:
        value, predicted, weights = self.allocation(float(self.x_.mean()))
        parts = ", ".join(
            f"{m} {format_bytes(p)} ({w:.0%})" for m, p, w in zip(MODELS, predicted, weights, strict=True)
        )
        how = "softmax blend" if self.softmax else "best model"
        return f"sizey ({how} of {parts}, offset {self.offset}) = {format_bytes(value)}"


def _kendall_tau(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import kendalltau

    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(kendalltau(x, y).statistic)


register_predictor("sizey", anchor=True)(SizeyPredictor)
