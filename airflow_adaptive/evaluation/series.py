"""Replay over memory time series: static strategies, KS+, and growth in place (``grow``).

A try fits when its limit in force stays above usage at every sample; it holds its limit until it
ends or until the first sample above it, the kill. Waste is what was held and not used (the
integral of limit minus usage) for a finished try, everything held for a killed one.

- A static strategy is the live decision (``replay``), its limit constant over the try.
- ``grow`` is the default decision, started smaller and grown by ``core/growth.py``'s rule (the one
  the node agent runs) after the resize latency, never above the node (the cap), and lowered again
  once a try stops rising. From the family's finished tasks' memory profiles (fifty numbers each,
  as the store keeps them) it learns two shares of the decision at the (1 - OOM budget) quantile,
  the same budget logic the static decision uses: the start (what they may reach before a resize
  can land) and the headroom (what they may rise within one resize latency and sample). With fewer
  than three such tasks, a young plan (``core/growth_plan.py: young_plan``) grown to the decision only
  (none: for a retry, grown by the rule's default only to rescue).
- KS+ predicts k segments per try from the family's finished series (``core/sizing/ksplus.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from airflow_adaptive.core.growth import GrowthRule, run_with_growth
from airflow_adaptive.core.growth_plan import GrowthPlan, learnt_plan, profile_of, rebound_of
from airflow_adaptive.evaluation.replay import (
    ReplayConfig,
    StrategyResult,
    TryModel,
    TryOutcome,
    failed_whole_node_byte_s,
    replay,
    replay_cap_bytes,
)
from airflow_adaptive.traces.runs import TaskRun
from airflow_adaptive.traces.series import SeriesRun

if TYPE_CHECKING:
    from airflow_adaptive.core.sizing.ksplus import Segments

GROW = "grow"
KSPLUS = "ks+"


def _used_byte_s(times: np.ndarray, usage: np.ndarray) -> float:
    return float(np.sum(usage[:-1] * np.diff(times)))


def static_outcome(s: SeriesRun, limit: int) -> TryOutcome:
    """A constant limit over the series."""
    over = np.flatnonzero(s.usage_bytes > limit)
    if over.size == 0:
        end = float(s.times_s[-1])
        return TryOutcome(True, end, limit * end, _used_byte_s(s.times_s, s.usage_bytes), limit)
    killed_s = float(s.times_s[over[0]])
    return TryOutcome(False, killed_s, limit * killed_s, 0.0, limit)


@dataclass
class _GrowState:
    """Per family, its finished tasks' memory profiles, peaks and rebounds, with when they finished."""

    rule: GrowthRule
    max_oom_rate: float
    completed: bool
    floor_bytes: int  # min_memory: no plan starts below it
    history: dict[str, list[tuple[float, tuple[float, ...], float, float | None]]] = field(
        default_factory=dict
    )

    def plan(self, run: TaskRun, decision_bytes: int) -> GrowthPlan | None:
        """The start, headroom and rebound, from what had finished when ``run`` started."""
        known = [
            h for h in self.history.get(run.family, []) if not self.completed or h[0] <= (run.start_s or 0.0)
        ]
        return learnt_plan(
            [(profile, peak) for _, profile, peak, _ in known], decision_bytes, self.rule.window_s,
            self.max_oom_rate, self.floor_bytes, [rebound for *_, rebound in known],
            self.rule.rescue_bytes(decision_bytes),
        )  # fmt: skip

    def finished(self, s: SeriesRun, seconds: float) -> None:
        usage = s.usage_bytes.tolist()
        entry = (  # the series' peak, as the trace reader took it
            (s.run.start_s or 0.0) + seconds, profile_of(s.times_s.tolist(), usage),
            float(s.run.peak_bytes), rebound_of(s.times_s.tolist(), usage),
        )  # fmt: skip
        self.history.setdefault(s.run.family, []).append(entry)


def grow_model(series: Sequence[SeriesRun], cap: int, rule: GrowthRule, config: ReplayConfig) -> TryModel:
    """Tries that start where the family's plan says and grow by its headroom (a retry, or a family
    without a plan: the decision, grown by the rule's default only to be rescued)."""
    completed = config.history == "completed"
    state = _GrowState(rule, config.max_oom_rate, completed, config.floor_bytes)

    def outcome(index: int, run: TaskRun, number: int, limit: int) -> TryOutcome:
        s = series[index]
        plan = state.plan(run, limit) if number == 1 else None
        start = limit if plan is None else plan.start_bytes
        out = run_with_growth(s.times_s.tolist(), s.usage_bytes.tolist(), start, cap, rule, plan)
        if out.succeeded:
            state.finished(s, out.seconds)
        return TryOutcome(
            out.succeeded, out.seconds, out.held_byte_s, out.used_byte_s, out.final_limit_bytes, out.resizes
        )

    return outcome


def sampling_interval_s(series: Sequence[SeriesRun]) -> float:
    """How often the replay's agent sees usage: no more often than the series were sampled (the
    0.99 quantile of the gaps, so that the learnt windows hold between nearly every two samples)."""
    gaps = [np.diff(s.times_s) for s in series if len(s.times_s) > 1]
    return float(np.quantile(np.concatenate(gaps), 0.99)) if gaps else 0.0


def grow_tries(
    series: Sequence[SeriesRun], config: ReplayConfig, rule: GrowthRule
) -> tuple[list[TaskRun], TryModel]:
    """The runs ``grow`` replays and how each try ends under ``rule``, its agent seeing usage no more
    often than the series were sampled."""
    runs = [s.run for s in series]
    rule = replace(rule, sample_s=max(rule.sample_s, sampling_interval_s(series)))
    return runs, grow_model(series, replay_cap_bytes(config, runs), rule, config)


def replay_series(
    series: Sequence[SeriesRun], strategy: str, config: ReplayConfig, rule: GrowthRule | None = None
) -> StrategyResult:
    """One strategy over the series: ``grow`` (with ``rule``), ``ks+``, or a registered strategy."""
    if strategy == GROW:
        runs, model = grow_tries(series, config, rule or GrowthRule())
        return replay(runs, "adaptive", config, model=model)
    runs = [s.run for s in series]
    if strategy == KSPLUS:
        return replay_ksplus(series, config, replay_cap_bytes(config, runs))

    def outcome(index: int, run: TaskRun, number: int, limit: int) -> TryOutcome:
        return static_outcome(series[index], limit)

    return replay(runs, strategy, config, model=outcome)


def replay_ksplus(series: Sequence[SeriesRun], config: ReplayConfig, cap: int) -> StrategyResult:
    """KS+ per family from its finished series (refitted as the history grows by ``refit_growth``);
    a family without a finished task keeps the user's request (the cap without one)."""
    from airflow_adaptive.core.sizing.ksplus import fit_ksplus

    result = StrategyResult(KSPLUS)
    finished: dict[str, list[tuple[float, SeriesRun]]] = {}
    models: dict[str, tuple[int, Any]] = {}
    completed = config.history == "completed"
    for s in sorted(series, key=lambda x: x.run.start_s or 0.0):
        run = s.run
        known = [
            x for finish, x in finished.get(run.family, []) if not completed or finish <= (run.start_s or 0.0)
        ]
        fitted_on, model = models.get(run.family, (0, None))
        if known and (model is None or len(known) > fitted_on * (1 + config.refit_growth)):
            train = [
                (float(x.run.input_size_bytes or 0), x.times_s.tolist(), x.usage_bytes.tolist())
                for x in known
            ]
            model = fit_ksplus(train)
            models[run.family] = (len(known), model)
        segments = None if model is None else model.predict(float(run.input_size_bytes or 0))
        held, fitted = _ksplus_tries(s, segments, cap, config, result)
        _close(result, s, fitted, held, cap, config.time_to_failure)
        if fitted:
            finished.setdefault(run.family, []).append(((run.start_s or 0.0) + run.wall_seconds, s))
    return result


def _bounded(segments: Segments, floor: int, cap: int) -> Segments:
    """The segments' sizes within [``floor``, ``cap``], as the replay bounds every strategy."""
    return type(segments)(segments.ends_s, tuple(min(max(p, floor), cap) for p in segments.peaks_bytes))


def _ksplus_tries(
    s: SeriesRun, segments: Segments | None, cap: int, config: ReplayConfig, result: StrategyResult
) -> tuple[float, bool]:
    """Tries until one fits, KS+ retrying each kill; the byte-seconds held and whether it fitted."""
    from airflow_adaptive.core.sizing.ksplus import Segments, retry_segments

    held, floor = 0.0, min(config.floor_bytes, cap)
    request = min(max(s.run.user_request_bytes or cap, floor), cap)
    for _ in range(config.max_attempts):
        limits = (
            np.full(len(s.times_s), request, dtype=float)
            if segments is None
            else np.array([_bounded(segments, floor, cap).limit_at(t) for t in s.times_s], dtype=float)
        )
        over = np.flatnonzero(s.usage_bytes > limits)
        end = len(s.times_s) - 1 if over.size == 0 else int(over[0])
        held += float(np.sum(limits[:end] * np.diff(s.times_s[: end + 1])))
        if over.size == 0:
            return held, True
        result.retries += 1
        if limits[end] >= cap:
            return held, False
        killed_s = float(s.times_s[end])
        segments = (
            retry_segments(segments, killed_s)
            if segments is not None
            else Segments((math.inf,), (min(2 * request, cap),))
        )
        request = min(2 * request, cap)
    return held, False


def _close(result: StrategyResult, s: SeriesRun, fitted: bool, held: float, cap: int, ttf: float) -> None:
    """Count a finished instance as ``replay`` does, its use and the whole node's waste over time."""
    result.instances += 1
    result.failed += not fitted
    if not fitted:
        result.waste_byte_s += held
        result.whole_node_waste_byte_s += failed_whole_node_byte_s(s.run, cap, ttf)
        return
    used = _used_byte_s(s.times_s, s.usage_bytes)
    result.waste_byte_s += held - used
    result.used_byte_s += used
    result.whole_node_waste_byte_s += cap * float(s.times_s[-1]) - used
    result.efficiency_sum += used / held if held else 0.0
