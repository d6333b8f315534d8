"""Our default: per family, the candidate rule that has wasted least on that family's own tasks.

Candidates are simple rules — a quantile of the peaks seen so far times a
margin, and (when input sizes are known and vary) an OLS line on input size
plus a quantile of its residuals. Each is scored prequentially, as Sizey does:
every past task is charged what the rule, fitted on the tasks before it, would
have cost — ``(a - r) t`` when the allocation ``a`` covered the peak ``r``,
else the killed attempt ``a t ttf`` plus the retry. Scores decay with age, so a
family that drifts switches rule. The retry uses what the kill taught: the task
needed more than ``a``, so it goes to the largest peak seen plus a margin when
that is above ``a``, else it doubles.

Scoring is incremental: refitting on the same history plus new tasks only
scores the new tasks, with the same result as scoring from scratch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from airflow_adaptive.core.sizing.base import (
    Predictor,
    RequestRatioPrior,
    Sample,
    peaks,
    register_predictor,
    runtimes,
)
from airflow_adaptive.core.units import format_bytes


def replayed_cost(alloc: np.ndarray, peak: float, runtime: float, ceiling: float, ttf: float) -> np.ndarray:
    """Memory x time each allocation would have cost one task, retries included."""
    retry = np.where(alloc < ceiling, ceiling, 2.0 * alloc)
    retry_cost = np.where(retry >= peak, retry - peak, retry * ttf + 2.0 * retry - peak)
    return np.where(alloc >= peak, alloc - peak, alloc * ttf + retry_cost) * runtime


class AdaptivePredictor(Predictor):
    name = "adaptive"
    min_samples = 2
    scores_: np.ndarray
    failures_: np.ndarray
    weight_: float
    inputs_: np.ndarray | None

    def __init__(
        self,
        quantiles: tuple[float, ...] = (0.5, 0.75, 0.9, 0.95, 0.99, 1.0),
        margins: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.4),
        retry_margin: float = 0.1,
        half_life_tasks: float = 50.0,
        time_to_failure: float = 1.0,
        max_failure_rate: float = 0.03,
    ) -> None:
        self.quantiles = quantiles
        self.margins = margins
        self.retry_margin = retry_margin
        self.half_life_tasks = half_life_tasks
        self.time_to_failure = time_to_failure
        self.max_failure_rate = max_failure_rate

    def set_prior(self, prior: RequestRatioPrior) -> None:
        self.prior = prior

    def predict(self, input_size_bytes: int | None = None, user_request_bytes: int | None = None) -> int:
        """Cold, with a request and a ready prior: the request scaled by what other families used."""
        prior = getattr(self, "prior", None)
        ratio = prior.ratio if prior is not None else None
        if not self.warm and user_request_bytes and ratio is not None:
            self.cold_request_bytes_ = user_request_bytes
            return max(1, int(user_request_bytes * ratio))
        return super().predict(input_size_bytes, user_request_bytes)

    def retry(self, failed_bytes: int, input_size_bytes: int | None = None) -> int:
        request = getattr(self, "cold_request_bytes_", None)
        if not self.warm and request and failed_bytes < request:
            return int(request)  # the scaled start was too small: the user's own request next
        return super().retry(failed_bytes, input_size_bytes)

    # -- candidates ------------------------------------------------------------------------------
    def _allocations(self, r: np.ndarray, x: np.ndarray | None, x_next: float | None) -> np.ndarray:
        """Every candidate's allocation for the next task, fitted on peaks ``r`` (and inputs ``x``)."""
        q = np.quantile(r, self.quantiles)
        allocations = [np.outer(q, 1.0 + np.asarray(self.margins)).ravel()]
        if x is not None and x_next is not None:
            allocations.append(self._size_allocations(r, x, x_next))
        return np.concatenate(allocations)

    def _size_allocations(self, r: np.ndarray, x: np.ndarray, x_next: float) -> np.ndarray:
        if r.size < 3 or np.ptp(x) == 0:
            return np.full(len(self.quantiles), np.inf)  # not fittable yet: never the cheapest
        slope, intercept = np.polyfit(x, r, 1)
        offsets = np.quantile(r - (intercept + slope * x), self.quantiles)
        return np.maximum(intercept + slope * x_next + offsets, 1.0)

    def _candidate_names(self, sized: bool) -> list[str]:
        names = [f"P{q * 100:g} of peaks +{m:.0%}" for q in self.quantiles for m in self.margins]
        if sized:
            names += [f"line on input size + P{q * 100:g} of residuals" for q in self.quantiles]
        return names

    # -- fitting ---------------------------------------------------------------------------------
    def _fit(self, samples: Sequence[Sample]) -> None:
        r, t = peaks(samples), runtimes(samples)
        raw_x = [s.input_size_bytes for s in samples]
        x = None if any(v is None for v in raw_x) else np.asarray(raw_x, dtype=float)
        sized = x is not None
        n_candidates = len(self.quantiles) * len(self.margins) + (len(self.quantiles) if sized else 0)
        decay = 0.5 ** (1.0 / self.half_life_tasks)
        cached = getattr(self, "scored_peaks_", None)
        if (
            cached is not None
            and self.scores_.size == n_candidates
            and cached.size <= r.size
            and np.array_equal(cached, r[: cached.size])
        ):
            start, scores, failures, weight = (
                cached.size,
                self.scores_.copy(),
                self.failures_.copy(),
                self.weight_,
            )
        else:
            start, scores, failures, weight = 1, np.zeros(n_candidates), np.zeros(n_candidates), 0.0
        for i in range(max(start, 1), r.size):
            prev = r[:i]
            alloc = self._allocations(prev, None if x is None else x[:i], None if x is None else float(x[i]))
            ceiling = float(prev.max()) * (1.0 + self.retry_margin)
            cost = replayed_cost(alloc, float(r[i]), float(t[i]), ceiling, self.time_to_failure)
            scores = scores * decay + np.where(np.isfinite(cost), cost, np.inf)
            failures = failures * decay + (alloc < r[i])
            weight = weight * decay + 1.0
        self.scored_peaks_, self.scores_, self.failures_, self.weight_ = r.copy(), scores, failures, weight
        # The cheapest rule among those that rarely get tasks killed (else the one killed least).
        allowed = failures <= self.max_failure_rate * weight if weight else np.ones_like(scores, dtype=bool)
        if not allowed.any():
            allowed = failures == failures.min()
        self.best_ = int(np.argmin(np.where(allowed, scores, np.inf)))
        self.rule_ = self._candidate_names(sized)[self.best_]
        self.peaks_, self.inputs_ = r, x
        self.ceiling_ = float(r.max()) * (1.0 + self.retry_margin)

    def _predict(self, input_size_bytes: int | None) -> float:
        x_next = None
        if self.inputs_ is not None:
            x_next = float(input_size_bytes) if input_size_bytes is not None else float(self.inputs_.mean())
        return float(self._allocations(self.peaks_, self.inputs_, x_next)[self.best_])

    def _retry(self, failed_bytes: int, input_size_bytes: int | None) -> float:
        return self.ceiling_ if failed_bytes < self.ceiling_ else 2.0 * failed_bytes

    def explain(self) -> str:
        return (
            f"{self.rule_} (the cheapest of {self.scores_.size} rules replayed on {self.n_samples_} peaks) "
            f"= {format_bytes(self._predict(None))}; retry at {format_bytes(self.ceiling_)}"
        )


register_predictor("adaptive")(AdaptivePredictor)
