"""Our default: P95 of the family's peaks + 15 %, replaced by another rule only when that rule has
clearly wasted less on the family's own tasks.

Candidates: a quantile of the peaks seen so far times a margin; the largest peak plus the peaks' upper
spread; and, when input sizes are known and vary, a line on input size (or its log) plus a quantile of
its residuals or a one-sided OLS prediction interval. Each is scored prequentially, as Sizey does: every
past task is charged what the rule, fitted on the tasks before it, would have cost under doubling retries
(``(a - r) t`` when it covered the peak, plus ``a t ttf`` per kill), decayed with age. The first rule
stays unless another scores below ``switch_ratio`` of it after ``min_scored`` tasks (no chasing noise).

An OOM-kill budget (``max_oom_rate``, a ceiling on the share of a run's tasks killed) bounds the choice:
the rules aim at ``target_fraction`` of it, as a rate over a few hundred tasks scatters around its aim.
Only rules whose decayed kill rate stays within that target may be chosen; when none does, the cheapest
within one target of the fewest kills, and the explanation says so. Until a family has ``1 / target``
peaks, its allocation is at least their prediction bound (``small_samples.py``), at most the user's
request, at the level calibrated on the store's families (``bound_calibration.py``). A family with no
history (nor a similar one to borrow from, ``similar.py``) starts at the user's request, which the tasks
that start before one finishes share; without a request, at other families' peaks at ``1 - target`` once
the store holds the ``1 / target`` peaks that needs, with no limit before.

Past the largest input a family has finished, a line's value is capped (a guess there), and a quantile
of peaks is raised to the family's line when its peaks grow with input (``lines.rises_with_input``).
Scoring is incremental: a refit on the same history plus new tasks scores only the new tasks; from
scratch, only the last ten half-lives of tasks (older ones would weigh under 0.1 %).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from ..defaults import MAX_OOM_RATE
from .adaptive_explain import adaptive_details, beyond_note, explain_adaptive, extrapolation_note
from .base import (
    ColdStart,
    Predictor,
    Sample,
    Tags,
    linear_quantiles,
    peaks,
    prefix_quantiles,
    register_predictor,
    retry_kills,
    retry_waste,
    runtimes,
)
from .bound_calibration import bound_scores
from .cold_start import guess_from_prior
from .lines import PI_QUANTILES, SIZE_MODELS, Line, fit_line, line_at, line_bound, rises_with_input
from .retry import double, vpa_bump
from .small_samples import BoundBasis, SpreadPrior, fits_prior, next_peak_bound, own_spread

TARGET_FRACTION = 0.5  # of the budget: what rules aim at (benchmarks/sizing.py chooses it out of sample)
MIN_PEAKS_ABOVE = 3  # peaks above a killed limit before the retry is chosen among candidates
# Of the peaks: P95 first (the rule that stays unless another is clearly cheaper); P70 and P80 are where
# a family of two modes starts, at the top of its lower mode (Tovar's first allocation finds it).
QUANTILES = (0.95, 0.5, 0.9, 0.99, 1.0, 0.7, 0.8)
RETRY_QUANTILES = (0.5, 0.9, 1.0)  # of the peaks above a killed limit: retry candidates


class AdaptivePredictor(Predictor):
    name = "adaptive"
    min_samples = 1
    learns_prior_spread = False  # the small-sample bound's prior spread: fixed, or learnt across families

    def tags(self) -> Tags:
        return Tags(borrows_when_cold=True, guards_unfinished=True)

    scores_: np.ndarray
    bound_: float  # the small-sample prediction bound, bytes (0: enough peaks)
    kills_: np.ndarray
    weight_: float
    inputs_: np.ndarray | None
    finished_span_: tuple[float, float] | None  # largest input and peak of complete samples
    finished_: np.ndarray  # which peaks are not lower bounds (a killed or sampled try's)

    def __init__(
        self,
        quantiles: tuple[float, ...] = QUANTILES,
        margins: tuple[float, ...] = (0.15, 0.0, 0.05, 0.3),
        half_life_tasks: float = 50.0,
        time_to_failure: float = 1.0,
        switch_ratio: float = 0.8,
        min_scored: int = 10,
        max_oom_rate: float | None = MAX_OOM_RATE,
        target_fraction: float = TARGET_FRACTION,
        prior_log_spread: float = 0.3,
        prior_weight: float = 1.0,
    ) -> None:
        self.quantiles = quantiles
        self.margins = margins
        self.half_life_tasks = half_life_tasks
        self.time_to_failure = time_to_failure
        self.switch_ratio = switch_ratio
        self.min_scored = min_scored
        self.max_oom_rate = max_oom_rate
        self.target_fraction = target_fraction  # of the budget, what the rules and the bound aim at
        self.prior_log_spread = prior_log_spread  # standard deviation of log peaks, before any are seen
        self.prior_weight = prior_weight  # in degrees of freedom: one task's worth of evidence

    @property
    def target(self) -> float | None:
        """The OOM kills per task the rules and the small-sample bound aim at (None: no budget)."""
        return None if self.max_oom_rate is None else self.max_oom_rate * self.target_fraction

    # -- cold start ------------------------------------------------------------------------------
    def predict(self, input_size_bytes: int | None = None, user_request_bytes: int | None = None) -> int:
        """Warm: the chosen rule, at least the small-sample bound. Cold: the user's request, or
        without one, with a ready prior, a high quantile of what other families' tasks used, at
        most ``default_bytes`` (then doubling)."""
        if self.warm:
            return self.predict_noted(input_size_bytes, user_request_bytes)[0]
        cold = self.cold_without_request(user_request_bytes)
        if cold is not None and cold.allocation_bytes is not None:
            return max(1, int(cold.allocation_bytes))
        return super().predict(input_size_bytes, user_request_bytes)

    def cold_without_request(self, user_request_bytes: int | None) -> ColdStart | None:
        """For a cold family that asks for no memory: other families' peaks at the OOM target's
        quantile (``cold_start.py``); None when warm, with a request or before the first fit."""
        prior = getattr(self, "_prior", None)  # None before the first fit
        if self.warm or user_request_bytes or prior is None:
            return None
        target = MAX_OOM_RATE * self.target_fraction if self.target is None else self.target
        return guess_from_prior(prior, target, self.default_bytes)

    # -- small samples ---------------------------------------------------------------------------
    def _bound_cap(self, user_request_bytes: int | None) -> float | None:
        """What the bound may not exceed: the request, or what other families' tasks used at the
        target's quantile (None: only the strategy's cap)."""
        if user_request_bytes:
            return float(user_request_bytes)
        prior = getattr(self, "_prior", None)
        return prior.peak_bytes(1.0 - (self.target or 0.0)) if prior is not None else None

    def _line_bound(self, input_size_bytes: int | None) -> float | None:
        """When the chosen rule is a line on input size, its bound for this input (None: not one)."""
        lines = self.pieces_[1]
        if not self._line_chosen or lines is None or input_size_bytes is None:
            return None
        line = lines[(self.best_ - self._quantile_rules) // (len(self.quantiles) + len(PI_QUANTILES))]
        if line is None:
            return None
        at, leverage = line_at(line, float(input_size_bytes))
        spread, n = line[4][:2]
        return line_bound(at, spread, n, leverage, self.target or 0.0)

    def _learnt_spread(self) -> SpreadPrior | None:
        """The prior spread learnt across families, when this strategy learns one, the store knows
        it and the family's own spread is plausible under it (else the fixed one applies)."""
        prior, bound = getattr(self, "_prior", None), getattr(self, "bound_", 0.0)  # no bound before a fit
        if not (self.learns_prior_spread and prior is not None and bound) or math.isinf(bound):
            return None
        learnt = prior.spread()
        return learnt if learnt is not None and fits_prior(self.peaks_, learnt, self.target or 0.0) else None

    def _bound(self, basis: BoundBasis | None = None) -> float:
        """The bound on the family's next peak: with a learnt spread's log-normal one, or the fixed one's."""
        learnt, level, _ = basis or self.bound_basis()
        if learnt is None and level == self.target:
            return self.bound_
        spread = learnt or SpreadPrior(self.prior_log_spread, self.prior_weight)
        return next_peak_bound(self.peaks_, self.target, *spread, level, self.finished_)

    def bound_basis(self) -> BoundBasis:
        """The learnt spread the bound pools with (None: the fixed one); the level it lets through:
        the target, calibrated where the store knows how, on the bounds of steady families for one
        steadier than the prior (a learnt spread's: the target); and its own log peaks' spread when
        far steadier than that prior (else None). Computed once per use: each is a test of the peaks."""
        learnt, prior, target = self._learnt_spread(), getattr(self, "_prior", None), self.target
        pooled = (learnt.log_spread, learnt.weight) if learnt else (self.prior_log_spread, self.prior_weight)
        own = own_spread(getattr(self, "peaks_", np.zeros(0)), *pooled, target or 0.0)
        if prior is None or target is None:
            return BoundBasis(learnt, target, own)
        if own is not None:
            return BoundBasis(learnt, prior.steady_level(target), own)
        return BoundBasis(learnt, target if learnt is not None else prior.bound_level(target), own)

    def _small_sample_floor(self, input_size_bytes: int | None, user_request_bytes: int | None) -> float:
        """The least a warm family with too few peaks gets (0: enough peaks)."""
        if not self.bound_:
            return 0.0
        line = self._line_bound(input_size_bytes) if math.isfinite(self.bound_) else None
        bound = self._bound() if line is None else line
        cap = self._bound_cap(user_request_bytes)
        return min(bound, cap if cap is not None else float(2**62))

    def draws_on_prior(self, user_request_bytes: int | None) -> bool:
        """While the bound applies: its level (and spread, when learnt) is the store's, and without a
        request it is capped by what other families' tasks used."""
        return self.warm and self.bound_ > 0.0

    def retry(
        self, failed_bytes: int, input_size_bytes: int | None = None, user_request_bytes: int | None = None
    ) -> int:
        if not self.warm and user_request_bytes and failed_bytes < user_request_bytes:
            # a cold start below the request (a similar family's model): the request, not doublings
            return int(user_request_bytes)
        return super().retry(failed_bytes, input_size_bytes, user_request_bytes)

    # -- candidates ------------------------------------------------------------------------------
    def _pieces(self, r: np.ndarray, x: np.ndarray | None) -> tuple[np.ndarray, list[Line | None] | None]:
        """What every candidate learns from peaks ``r`` (and inputs ``x``): quantiles and size lines."""
        q = linear_quantiles(r, np.asarray(self.quantiles))
        if x is None:
            return q, None
        return q, [fit_line(model, x, r, self.quantiles) for model in range(len(SIZE_MODELS))]

    def _apply(self, q: np.ndarray, lines: list[Line | None] | None, x_next: float | None) -> np.ndarray:
        """Every candidate's allocation for a task of input ``x_next``."""
        allocations = [np.outer(q, 1.0 + np.asarray(self.margins)).ravel(), self._spread_rule(q[None, :])]
        if lines is not None and x_next is not None:
            for line in lines:
                if line is None:
                    allocations += [q, np.full(len(PI_QUANTILES), q.max())]
                    continue
                at, leverage = line_at(line, x_next)  # far from the inputs seen: a wider interval
                offsets, terms = line[3], line[4]
                allocations.append(np.maximum(at + offsets, 1.0))
                allocations.append(np.maximum(at + terms[4:] * terms[0] * np.sqrt(1.0 + leverage), 1.0))
        return np.concatenate(allocations)

    def _candidate_names(self, sized: bool) -> list[str]:
        names = [f"P{q * 100:g} of peaks +{m:.0%}" for q in self.quantiles for m in self.margins]
        names.append(f"P100 of peaks + (P90 - P50), at most +{self.margins[0]:.0%}")
        if sized:
            for model, _ in SIZE_MODELS:
                names += [f"line on {model} + P{q * 100:g} of residuals" for q in self.quantiles]
                names += [f"line on {model} + P{q * 100:g} prediction interval" for q in PI_QUANTILES]
        return names

    # -- fitting ---------------------------------------------------------------------------------
    def _fit(self, samples: Sequence[Sample]) -> None:
        r, t = peaks(samples), runtimes(samples)
        raw_x = [s.input_size_bytes for s in samples]
        x = None if any(v is None for v in raw_x) else np.asarray(raw_x, dtype=float)
        names = self._candidate_names(x is not None)
        decay = self._decay
        cached: np.ndarray = getattr(self, "scored_peaks_", np.zeros(0))  # empty: never fitted
        fits = cached.size > 0 and self.scores_.size == len(names) and cached.size <= r.size
        resumed = fits and np.array_equal(cached, r[: cached.size])  # the same history, and new tasks
        if resumed:
            start, scores, kills, weight = cached.size, self.scores_.copy(), self.kills_.copy(), self.weight_
        else:
            # From scratch, tasks older than ten half-lives (weight < 0.1 %) are not scored: a long
            # history then costs a bounded number of refits instead of one per task.
            start = max(1, r.size - int(10 * self.half_life_tasks))
            scores, kills, weight = np.zeros(len(names)), np.zeros(len(names)), 0.0
        for alloc, peak, runtime in self._prequential(r, t, x, max(start, 1)):
            ages = decay ** np.arange(peak.size - 1, -1, -1)  # the newest task of the block weighs 1
            aged = decay**peak.size
            scores = scores * aged + ages @ retry_waste(alloc, peak, runtime, self.time_to_failure)
            kills = kills * aged + ages @ retry_kills(alloc, peak)
            weight = weight * aged + float(ages.sum())
        self.scored_peaks_, self.scores_, self.kills_, self.weight_ = r.copy(), scores, kills, weight
        self.pieces_ = self._pieces(r, x)
        self.best_, self.within_target_ = self._choose(scores, self.oom_rates(), r.size - 1)
        # the bound over all peaks (a chosen size line is bounded by its own interval instead); its
        # gap is the finished peaks', not a killed or sampled try's lower bound
        self.finished_ = np.array([not s.lower_bound for s in samples], dtype=bool)
        prior = self.prior_log_spread, self.prior_weight
        self.bound_ = next_peak_bound(r, self.target, *prior, None, self.finished_)
        known = getattr(self, "bound_scores_", None), getattr(self, "bound_steady_", None)  # same first peaks
        self.bound_scores_, self.bound_steady_ = bound_scores(
            r, samples, self.target, prior, known if resumed else None
        )
        self.rule_ = names[self.best_]
        self.peaks_, self.inputs_, self.runtimes_ = r, x, t
        # What finished (not a sampled or killed lower bound): where a size line stops being a guess.
        done = [(s.input_size_bytes, s.peak_memory_bytes) for s in samples if not s.lower_bound]
        sized = [(float(x), float(p)) for x, p in done if x is not None]
        self.finished_span_ = (max(x for x, _ in sized), max(p for _, p in sized)) if sized else None

    def oom_rates(self) -> np.ndarray:
        """Each rule's OOM kills per task over the decayed replay (0 before any task is scored)."""
        return self.kills_ / self.weight_ if self.weight_ else np.zeros_like(self.kills_)

    def _choose(self, scores: np.ndarray, rates: np.ndarray, scored: int) -> tuple[int, bool]:
        """The rule to use, and whether its kill rate keeps within the OOM target. When no rule
        does, the rules within one target of the fewest kills compete (a difference in kill rates
        smaller than that is noise on a family's few hundred tasks)."""
        budget = self.target
        if budget is None:
            allowed = np.ones(scores.size, bool)
        elif (rates <= budget).any():
            allowed = rates <= budget
        else:
            allowed = rates <= rates.min() + budget
        best = int(np.argmin(np.where(allowed, scores, np.inf)))
        if scored < self.min_scored or (allowed[0] and scores[best] > self.switch_ratio * scores[0]):
            best = 0  # too few tasks to tell rules apart, or none clearly cheaper than the default
        return best, budget is None or bool(rates[best] <= budget)

    def _prequential(
        self, r: np.ndarray, t: np.ndarray, x: np.ndarray | None, first: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Blocks of tasks from ``first`` on: each candidate's allocation fitted on the tasks before
        (row per task), with their peaks and runtimes (columns); without inputs, one sorted block."""
        if x is None:
            q = prefix_quantiles(r, self.quantiles, first)
            factors = 1.0 + np.asarray(self.margins)
            alloc = (q[:, :, None] * factors[None, None, :]).reshape(len(q), q.shape[1] * factors.size)
            alloc = np.concatenate([alloc, self._spread_rule(q)[:, None]], axis=1)
            yield alloc, r[first:, None], t[first:, None]
            return
        for i in range(first, r.size):
            task = slice(i, i + 1)
            yield self._apply(*self._pieces(r[:i], x[:i]), float(x[i]))[None, :], r[task, None], t[task, None]

    def _predict(self, input_size_bytes: int | None) -> float:
        x_next = None
        if self.inputs_ is not None:
            x_next = float(input_size_bytes) if input_size_bytes is not None else float(self.inputs_.mean())
        return float(self._apply(*self.pieces_, x_next)[self.best_])

    def _retry(self, failed_bytes: int, input_size_bytes: int | None) -> float:
        """After a kill at ``failed_bytes``, the cheapest of doubling, the VPA bump, the largest peak +
        the first margin and quantiles of the peaks above the limit, charged on those peaks as a first
        try is (a bimodal family goes to its upper mode); doubling below ``MIN_PEAKS_ABOVE`` peaks."""
        above = np.flatnonzero(self.peaks_ > failed_bytes)
        if above.size < MIN_PEAKS_ABOVE:
            return float(double(failed_bytes))
        peaks, runtimes = self.peaks_[above], self.runtimes_[above]
        ages = self._decay ** (self.peaks_.size - 1 - above)
        largest = float(self.peaks_.max()) * (1.0 + self.margins[0])
        bumps = [float(double(failed_bytes)), float(vpa_bump(failed_bytes)), largest]
        candidates = np.array([*bumps, *np.quantile(peaks, RETRY_QUANTILES)])
        costs = retry_waste(candidates[:, None], peaks, runtimes, self.time_to_failure) @ ages
        return float(candidates[int(np.argmin(costs))])

    @property
    def _quantile_rules(self) -> int:
        """How many candidates are quantiles of the peaks (they come first; size lines follow)."""
        return len(self.quantiles) * len(self.margins) + 1  # and the spread rule

    def _spread_rule(self, q: np.ndarray) -> np.ndarray:
        """Per row of quantiles: the largest peak + the upper spread (P90 - P50), at most + the first
        margin. Holds a pile under a ceiling (bwa's, within 1 %) just above it: 5 % is many spreads."""
        at = {level: column for column, level in enumerate(self.quantiles)}  # other quantiles: the largest
        top, mid, p90 = (q[:, at[v]] if v in at else q.max(axis=1) for v in (1.0, 0.5, 0.9))
        return np.minimum(top + p90 - mid, top * (1.0 + self.margins[0]))

    @property
    def _line_chosen(self) -> bool:
        """Whether the chosen rule is a line on input size (bounded by its own interval)."""
        return self.best_ >= self._quantile_rules

    @property
    def _decay(self) -> float:
        """A task's weight relative to the next newer one in every decayed score."""
        return float(0.5 ** (1.0 / self.half_life_tasks))

    def details(self) -> dict[str, float | int | str | None]:
        return adaptive_details(self)

    def explain(self) -> str:
        return explain_adaptive(self)

    # -- inputs beyond those seen ------------------------------------------------------------
    def _extrapolation_cap(
        self, input_size_bytes: int | None, user_request_bytes: int | None
    ) -> tuple[float, float] | None:
        """Beyond the largest input the family has finished, a line's value is a guess (memory that
        grew with input on small ones often levels off): at most the larger of the request and the
        largest peak + the first margin; with that largest input. None: not beyond, or unknown."""
        span = getattr(self, "finished_span_", None)  # None too in a model stored before it existed
        if not self.warm or span is None or (input_size_bytes or 0) <= span[0]:
            return None
        return max(float(user_request_bytes or 0), span[1] * (1.0 + self.margins[0])), span[0]

    def _rising_line_at(self, size_bytes: int) -> float:
        """The family's line on input size at this input when its peaks grow with input (0: not)."""
        line = None if self.pieces_[1] is None else self.pieces_[1][0]
        return line_at(line, float(size_bytes))[0] if line is not None and rises_with_input(line) else 0.0

    def predict_noted(
        self, input_size_bytes: int | None = None, user_request_bytes: int | None = None
    ) -> tuple[int, str]:
        """Warm: the chosen rule, at least the small-sample bound; past the inputs seen, see above."""
        if not self.warm:
            return self.predict(input_size_bytes, user_request_bytes), ""
        floor = self._small_sample_floor(input_size_bytes, user_request_bytes)
        allocation = max(self._predict(input_size_bytes), floor)
        capped = self._extrapolation_cap(input_size_bytes, user_request_bytes)
        if capped is None:
            return int(allocation), ""
        (cap, largest), size = capped, input_size_bytes or 0
        if not self._line_chosen:  # a quantile ignores input: a rising line's value, within the cap
            line = self._rising_line_at(size)
            raised = min(line, cap) > allocation
            note = beyond_note(size, largest, line, cap, cap == user_request_bytes) if raised else ""
            return max(int(allocation), int(min(line, cap))), note
        if allocation <= cap:
            return int(allocation), ""
        return int(cap), extrapolation_note(size, largest, allocation, cap, cap == user_request_bytes)


register_predictor("adaptive", takes=("max_oom_rate",))(AdaptivePredictor)
