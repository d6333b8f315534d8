"""Our default: P95 of the family's peaks + 15 %, replaced by another rule only when that rule has
clearly wasted less on the family's own tasks.

Candidate rules are a quantile of the peaks seen so far times a margin and,
when input sizes are known and vary, a line on input size (or on its log)
plus a quantile of its residuals. Each is scored prequentially, as Sizey
does: every past task is charged what the rule, fitted on the tasks before
it, would have cost under doubling retries — ``(a - r) t`` when the allocation
covered the peak, plus ``a t ttf`` for every killed attempt. Scores decay with
age. The first rule (P95 + 15 %, the measured best single rule) stays unless
another scores below ``switch_ratio`` of it after ``min_scored`` tasks; this
keeps small families from chasing noise. A family with no history starts
from the user's request scaled by what other families used of theirs
(:class:`RequestRatioPrior`), and falls back to the full request if killed.

Scoring is incremental: refitting on the same history plus new tasks only
scores the new tasks. From scratch, only the last ten half-lives of tasks
are scored (older ones would weigh under 0.1 %).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ..units import format_bytes
from .base import (
    Predictor,
    RequestRatioPrior,
    Sample,
    peaks,
    prefix_quantiles,
    register_predictor,
    retry_waste,
    runtimes,
)


def _identity(x: np.ndarray) -> np.ndarray:
    return x


Transform = Callable[[np.ndarray], np.ndarray]
SIZE_MODELS: tuple[tuple[str, Transform], ...] = (("input size", _identity), ("log input size", np.log1p))
_Line = tuple[int, float, float, np.ndarray]  # SIZE_MODELS index, slope, intercept, offsets


class AdaptivePredictor(Predictor):
    name = "adaptive"
    min_samples = 1
    scores_: np.ndarray
    inputs_: np.ndarray | None

    def __init__(
        self,
        quantiles: tuple[float, ...] = (0.95, 0.5, 0.9, 0.99, 1.0),
        margins: tuple[float, ...] = (0.15, 0.0, 0.05, 0.3),
        half_life_tasks: float = 50.0,
        time_to_failure: float = 1.0,
        switch_ratio: float = 0.8,
        min_scored: int = 10,
    ) -> None:
        self.quantiles = quantiles
        self.margins = margins
        self.half_life_tasks = half_life_tasks
        self.time_to_failure = time_to_failure
        self.switch_ratio = switch_ratio
        self.min_scored = min_scored

    # -- cold start ------------------------------------------------------------------------------
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
    def _pieces(self, r: np.ndarray, x: np.ndarray | None) -> tuple[np.ndarray, list[_Line | None] | None]:
        """What every candidate learns from peaks ``r`` (and inputs ``x``): quantiles and size lines."""
        q = np.quantile(r, self.quantiles)
        if x is None:
            return q, None
        lines: list[_Line | None] = []
        for model, (_, transform) in enumerate(SIZE_MODELS):
            tx = transform(x)
            if r.size < 3 or np.ptp(tx) == 0:
                lines.append(None)  # no line to fit yet: the plain quantiles stand in
                continue
            slope, intercept = np.polyfit(tx, r, 1)
            lines.append((model, slope, intercept, np.quantile(r - (intercept + slope * tx), self.quantiles)))
        return q, lines

    def _apply(self, q: np.ndarray, lines: list[_Line | None] | None, x_next: float | None) -> np.ndarray:
        """Every candidate's allocation for a task of input ``x_next``."""
        allocations = [np.outer(q, 1.0 + np.asarray(self.margins)).ravel()]
        if lines is not None and x_next is not None:
            for line in lines:
                if line is None:
                    allocations.append(q)
                    continue
                model, slope, intercept, offsets = line
                at = intercept + slope * SIZE_MODELS[model][1](np.array([x_next]))[0]
                allocations.append(np.maximum(at + offsets, 1.0))
        return np.concatenate(allocations)

    def _candidate_names(self, sized: bool) -> list[str]:
        names = [f"P{q * 100:g} of peaks +{m:.0%}" for q in self.quantiles for m in self.margins]
        if sized:
            for model, _ in SIZE_MODELS:
                names += [f"line on {model} + P{q * 100:g} of residuals" for q in self.quantiles]
        return names

    # -- fitting ---------------------------------------------------------------------------------
    def _fit(self, samples: Sequence[Sample]) -> None:
        r, t = peaks(samples), runtimes(samples)
        raw_x = [s.input_size_bytes for s in samples]
        x = None if any(v is None for v in raw_x) else np.asarray(raw_x, dtype=float)
        names = self._candidate_names(x is not None)
        decay = 0.5 ** (1.0 / self.half_life_tasks)
        cached = getattr(self, "scored_peaks_", None)
        if (
            cached is not None
            and self.scores_.size == len(names)
            and cached.size <= r.size
            and np.array_equal(cached, r[: cached.size])
        ):
            start, scores = cached.size, self.scores_.copy()
        else:
            # From scratch, tasks older than ten half-lives (weight < 0.1 %) are not scored: a long
            # history then costs a bounded number of refits instead of one per task.
            start, scores = max(1, r.size - int(10 * self.half_life_tasks)), np.zeros(len(names))
        for waste in self._prequential_waste(r, t, x, max(start, 1)):
            scores = scores * decay + waste
        self.scored_peaks_, self.scores_ = r.copy(), scores
        self.pieces_ = self._pieces(r, x)
        best = int(np.argmin(scores))
        if best and (r.size - 1 < self.min_scored or scores[best] > self.switch_ratio * scores[0]):
            best = 0
        self.best_, self.rule_ = best, names[best]
        self.peaks_, self.inputs_ = r, x

    def _prequential_waste(
        self, r: np.ndarray, t: np.ndarray, x: np.ndarray | None, first: int
    ) -> Iterator[np.ndarray]:
        """Each candidate's waste on task ``i`` when fitted on the tasks before it, for ``i`` from
        ``first`` on. Without inputs, every prefix's quantiles come from one sorted matrix."""
        if x is None:
            q = prefix_quantiles(r, self.quantiles, first)
            alloc = (q[:, :, None] * (1.0 + np.asarray(self.margins))[None, None, :]).reshape(
                len(q), len(self.quantiles) * len(self.margins)
            )
            yield from retry_waste(alloc, r[first:, None], t[first:, None], self.time_to_failure)
            return
        for i in range(first, r.size):
            alloc = self._apply(*self._pieces(r[:i], x[:i]), float(x[i]))
            yield retry_waste(alloc, float(r[i]), float(t[i]), self.time_to_failure)

    def _predict(self, input_size_bytes: int | None) -> float:
        x_next = None
        if self.inputs_ is not None:
            x_next = float(input_size_bytes) if input_size_bytes is not None else float(self.inputs_.mean())
        return float(self._apply(*self.pieces_, x_next)[self.best_])

    def explain(self) -> str:
        chosen = "the default rule" if self.best_ == 0 else f"cheapest of {self.scores_.size} rules replayed"
        return f"{self.rule_} ({chosen}, {self.n_samples_} peaks) = {format_bytes(self._predict(None))}"


register_predictor("adaptive")(AdaptivePredictor)
