"""What a family's finished tasks say about growing the next one: where it starts and how far above
its usage it is kept, by how far it has come.

A task's memory profile is the time (seconds from its start) at which it first reached each
fraction in ``PROFILE_FRACTIONS`` of its peak (every 2 %); read as a step function (the level
between two times is the lower fraction), it overstates every rise by less than one step, which
errs towards growing early.

The start covers what a task may reach within the first window (one resize latency and one
sample), before any growth can land. The headroom is the rise to expect within a later window, and
it depends on where the task is: a task that climbs slowly and then jumps (a JVM filling its heap,
a sort merging its runs) jumps from a level, not from anywhere. So the headroom is learnt per level
(``LEVELS`` steps of the decision), where a try's level is the most it has used so far, as a
profile's is: at each, the largest rise within a window from that level among the tasks whose
largest rise anywhere is within the budget quantile. A second table reads only the windows that
start where a task was flat (risen at most a step over the window before): a task that has stopped
climbing rises less than one passing the same level on its way up.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

PROFILE_STEPS = 50  # a step of 2 % of the peak: each learnt share errs by less than that
PROFILE_FRACTIONS = tuple(k / PROFILE_STEPS for k in range(1, PROFILE_STEPS + 1))
LEVELS = 50  # the headroom is learnt at each 2 % of the decision
MIN_GROWTH_HISTORY = 3  # profiles a family needs before its start and headroom are learnt
FALL_PERCENT = 50  # a try has fallen once it uses less than this share of the most it has used
FALL_GRACE_S = 2.0  # a fall first seen this close to the end is the task freeing its memory as it exits
LATENCY_BOUND_S = 3600.0  # resize latencies and windows from here on are a mistake (an hour, not seconds)


def fallen(usage_bytes: float, level_bytes: float) -> bool:
    """Whether usage is below FALL_PERCENT of the level (in integers, as the wrapper's shell tests it)."""
    return usage_bytes * 100 < level_bytes * FALL_PERCENT


def rebound_of(times_s: Sequence[float], usage_bytes: Sequence[float]) -> float | None:
    """After the task first fell (``fallen``), the largest rise above the least it had used since;
    None if it never fell, or only within ``FALL_GRACE_S`` of its end (its last sample), where
    the fall is its exit and no fallen try is lowered. A task that falls (a sort that has merged,
    an aligner that has loaded its index and freed a buffer) may rise again: this is how far, so
    a fallen try can be kept that much above where it fell to (``core/growth.py: fallen_limit``)."""
    most, trough, fell_s, rise = 0.0, None, 0.0, 0.0
    for t, u in zip(times_s, usage_bytes, strict=True):
        if trough is not None:
            trough = min(trough, u)
            rise = max(rise, u - trough)
        elif fallen(u, most):
            trough, fell_s = u, t
        most = max(most, u)
    if trough is None or fell_s > times_s[-1] - FALL_GRACE_S:
        return None
    return rise


def profile_of(times_s: Sequence[float], usage_bytes: Sequence[float]) -> tuple[float, ...]:
    """The first time each fraction of the peak was reached."""
    peak = max(usage_bytes, default=0.0)
    out, j = [], 0
    for fraction in PROFILE_FRACTIONS:
        while j < len(usage_bytes) and usage_bytes[j] < fraction * peak:
            j += 1
        out.append(float(times_s[min(j, len(times_s) - 1)]))
    return tuple(out)


def _reached_before(profile_s: Sequence[float], t_s: float) -> float:
    """The share of the peak surely reached strictly before ``t_s``."""
    return max((f for f, t in zip(PROFILE_FRACTIONS, profile_s, strict=True) if t < t_s), default=0.0)


def _below_at(profile_s: Sequence[float], t_s: float) -> float:
    """The share of the peak usage may have reached by ``t_s``: just under the first fraction it
    reached later (the whole peak once every fraction was reached)."""
    return min((f for f, t in zip(PROFILE_FRACTIONS, profile_s, strict=True) if t > t_s), default=1.0)


def early_share(profile_s: Sequence[float], window_s: float) -> float:
    """The share of its peak a task may have reached within the first window, before growth acts."""
    return _below_at(profile_s, window_s)


def _rises(profile_s: Sequence[float], window_s: float, flat: bool = False) -> list[tuple[float, float]]:
    """Each later window's (share surely held before it, largest share reached within it): windows
    after the first (which the start covers) that start just after a step, where the rise from
    that level is largest. ``flat``: only those that start where the task had risen at most one
    step over the window before, what a try the rule sees as flat (``TryLevel.flat``: risen at most
    a step of its level, so at most one of its peak's, which crosses at most one step edge of a
    profile) may rise within a window."""
    out = []
    for t in (t for t in profile_s if t >= window_s):
        base = _reached_before(profile_s, t)
        if not flat or base - _reached_before(profile_s, t - window_s) <= 1.0 / PROFILE_STEPS + 1e-9:
            out.append((base, _below_at(profile_s, t + window_s) - base))
    return out


@functools.lru_cache(maxsize=1 << 16)
def rise_table(profile_s: tuple[float, ...], window_s: float, flat: bool = False) -> np.ndarray:
    """Per share j / PROFILE_STEPS of the peak (j = 0 .. PROFILE_STEPS), the largest rise within a
    later window from the highest level the task held at or below j (a task seen between two
    levels it held is on its way up from the lower one); below any level it held after its first
    window, and (one more column) above its peak, its largest rise: a task seen that low then is
    slower than this one was, one above it larger, and either may be anywhere on its way.
    ``flat``: of the windows that start where it was flat (``_rises``); with none, all NaN:
    such a task says nothing of a flat try. Nor does it above its peak (more than a step above:
    ``_steps_at``), where its column is NaN: a try that has stopped rising at a level this task
    never reached is no task of its kind on its way, and its largest rise from flat was a pause
    on its climb to a lower peak (read as a larger task's, it kept flat tries at the levels most
    tasks end at a headroom for the pauses of the smaller ones)."""
    table = np.full(PROFILE_STEPS + 1, np.nan)
    for base, rise in _rises(profile_s, window_s, flat):
        j = round(base * PROFILE_STEPS)
        table[j] = rise if np.isnan(table[j]) else max(table[j], rise)
    if flat and np.isnan(table).all():
        return np.full(PROFILE_STEPS + 2, np.nan)
    table = table[np.maximum.accumulate(np.where(~np.isnan(table), np.arange(table.size), 0))]
    largest = float(np.nanmax(table, initial=0.0))
    table = np.append(np.nan_to_num(table, nan=largest), np.nan if flat else largest)
    table.setflags(write=False)  # cached: shared by every caller
    return table


@dataclass(frozen=True)
class GrowthPlan:
    """Where a try starts, and the headroom kept above its usage by its level (the most it has used
    so far): ``rises_bytes[k]`` from above k and up to k + 1 steps of ``decision_bytes /
    len(rises_bytes)`` (the family's static decision; none in a ``rescue_plan``); ``window_s`` is
    the first window (see :meth:`headroom_at`)."""

    start_bytes: int
    rises_bytes: tuple[int, ...]
    decision_bytes: int
    window_s: float = 0.0
    rebound_bytes: int | None = None  # what a fallen try may rise again (None: not learnt)
    flat_rises_bytes: tuple[int, ...] = ()  # a flat try's by level (none: any try's); at least its creep
    young: bool = False  # a young family's (``young_plan``): grown above the decision only as a rescue
    rescue_above_bytes: int = 0  # a ``held_plan``'s: at its decision, a try up to this much is held there
    floor_bytes: int = 0  # the least a lowered limit keeps: ``min_memory``, as any decision

    @property
    def rescue_only(self) -> bool:
        """A plan without a headroom (``rescue_plan``): the try starts at the decision and is grown
        only as a rescue, and only once its usage passes ``rescue_above_bytes``."""
        return not self.rises_bytes

    @property
    def to_decision_only(self) -> bool:
        """Whether its try is grown by its headroom up to the decision only, and there only as a rescue
        (a young plan's, a held plan's)."""
        return self.young or self.rescue_above_bytes > 0

    @property
    def headroom_bytes(self) -> int:
        """The largest headroom, at any level."""
        return max(self.rises_bytes, default=0)

    def headroom_at(self, level_bytes: float, elapsed_s: float = math.inf, flat: bool = False) -> int:
        """The headroom for a try ``elapsed_s`` from its start that has used at most ``level_bytes``
        (``flat``: and risen at most a step of that over the last window). Within its first window it
        may be anywhere up to its start by the time an ask lands (the start covers that window only
        at the kill budget): the largest headroom up to there."""
        if self.rescue_only:
            return 0
        if elapsed_s < self.window_s:
            return max(self.rises_bytes[: self._level(max(level_bytes, self.start_bytes))])
        level = self._level(level_bytes) - 1
        if not flat:
            return self.rises_bytes[level]
        # a flat try may still creep a step of its level within the window (what flat allows), even
        # where no task rose (a headroom of nothing would lower it onto its usage)
        creep = math.ceil(level_bytes / PROFILE_STEPS)
        flat_rise = self.flat_rises_bytes[level] if self.flat_rises_bytes else self.rises_bytes[level]
        return max(min(flat_rise, self.rises_bytes[level]), creep)

    def _level(self, level_bytes: float) -> int:
        """The level's number, 1 .. len(rises_bytes)."""
        step = self.decision_bytes / len(self.rises_bytes)
        return min(max(math.ceil(level_bytes / step), 1), len(self.rises_bytes))


def flat_plan(start_bytes: int, headroom_bytes: int, decision_bytes: int) -> GrowthPlan:
    """One headroom at every level and time."""
    return GrowthPlan(start_bytes, (headroom_bytes,), decision_bytes)


def _at_budget(values: Sequence[float], max_kill_rate: float) -> float:
    """The (1 - budget) quantile, the same budget logic as the static decision's."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil((1.0 - max_kill_rate) * (len(ordered) - 1)))]


def _margin(peaks: Sequence[float], decision_bytes: int, max_kill_rate: float) -> float:  # peaks: not empty
    """How far the decision stands above the history's peaks at the budget quantile: the margin it
    keeps for what a small or drifting history has not shown yet (its small-sample bound), which a
    plan in bytes must keep too, or a start at the history's own quantile kills at the whole budget
    before any later rise is counted."""
    return max(1.0, decision_bytes / max(_at_budget(peaks, max_kill_rate), 1.0))


def _covered_max(rises: np.ndarray, largest: np.ndarray, max_kill_rate: float) -> np.ndarray:
    """Per level, the largest rise of the tasks whose largest rise anywhere is within the budget
    quantile: every one of those is covered at every level (a per-level quantile would let a task
    beyond the budget at any one level through, and a try passes many). A task whose largest is
    NaN says nothing and is left out; NaN where no task says anything."""
    known = ~np.isnan(largest)
    if not known.any():
        return np.full(rises.shape[1], np.nan)
    covered = known & (largest <= _at_budget(largest[known].tolist(), max_kill_rate))
    return np.fmax.reduce(rises[covered], axis=0)  # NaN (a task that says nothing) only where all are


def _steps_at(levels_bytes: np.ndarray, peaks: np.ndarray, flat: bool = False) -> np.ndarray:
    """Per task (row) and level (column), the column of its rise table a try at that level reads:
    its step (level / peak), or past its peak the extra column. ``flat`` (for a flat try): only
    more than a step past it; within a step above the peak a flat try is read as the task at its
    end, stopped there (a profile knows a level to within a step, and the peak is the largest of
    samples, which a task's true peak may pass between two), where one still rising may be a
    larger task on its way."""
    at = np.floor(levels_bytes[None, :] / peaks[:, None] * PROFILE_STEPS + 1e-9)
    above = levels_bytes[None, :] > peaks[:, None] * (1 + flat / PROFILE_STEPS)
    return np.where(above, PROFILE_STEPS + 1, np.minimum(at, PROFILE_STEPS)).astype(int)


def span_max(tables: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per row, the largest entry of ``tables`` from column ``edges[:, k]`` to ``edges[:, k + 1]``,
    both included (NaN, which says nothing, left out; NaN where all are): a level spans every step
    of a task from its lower edge to its upper, and a try anywhere in it may be at the step with the
    largest rise. ``edges`` must not fall along a row. One ``fmax.reduceat`` over the rows laid end
    to end: each span ends before the next one starts, so the upper edge is read apart, and a
    closing start per row ends its last span (a padding entry keeps the last row's closing start in
    range)."""
    rows, width = tables.shape
    starts = np.hstack([edges[:, :-1], edges[:, -1:] + 1]) + width * np.arange(rows)[:, None]
    flat = np.append(tables.ravel(), -np.inf)
    below_upper = np.fmax.reduceat(flat, starts.ravel()).reshape(rows, -1)[:, :-1]
    return np.fmax(below_upper, np.take_along_axis(tables, edges[:, 1:], axis=1))


def _level_rises(
    history: Sequence[tuple[Sequence[float], float]],
    decision_bytes: int,
    window_s: float,
    max_kill_rate: float,
    margin: float,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The headroom at each of ``LEVELS`` levels up to the decision, in bytes: for any try, and for a
    flat one (``rise_table(flat=True)``; at most the first). Where a task stands at a level is its
    own (level / its peak); its rise counts as a share of its peak times the decision, or in bytes
    times the decision's ``margin`` where lower (a large task's share overstates a small one's
    rise). The tasks covered are, per table, those whose largest rise in it is within the budget:
    for a flat try, all but the flat tasks that rose most, not all but those that climbed
    steepest. Where none of them was ever flat, a flat try is kept the headroom for any try."""
    tables = np.array([rise_table(tuple(p), window_s) for p, _ in history])
    flat_tables = np.array([rise_table(tuple(p), window_s, flat=True) for p, _ in history])
    peaks = np.array([max(peak, 1.0) for _, peak in history])
    levels = decision_bytes * np.arange(LEVELS + 1) / LEVELS
    out = []
    for table, flat in ((tables, False), (flat_tables, True)):
        shares = span_max(table, _steps_at(levels, peaks, flat))
        largest = np.fmax.reduce(table, axis=1)  # NaN: a task never flat, for a flat try
        rises = _covered_max(shares, largest, max_kill_rate) * decision_bytes
        in_bytes = _covered_max(shares * peaks[:, None], largest * peaks, max_kill_rate)
        out.append([r if np.isnan(r) else math.ceil(r) for r in np.fmin(rises, in_bytes * margin)])
    return tuple(out[0]), tuple(
        any_try if np.isnan(f) else min(f, any_try) for f, any_try in zip(out[1], out[0], strict=True)
    )


def learnt_plan(
    history: Sequence[tuple[Sequence[float], float]],
    decision_bytes: int,
    window_s: float,
    max_kill_rate: float,
    floor_bytes: int = 1,
    rebounds: Sequence[float | None] = (),
    least_headroom_bytes: int = 0,
) -> GrowthPlan | None:
    """The start and the headroom by level that the family's finished tasks (profile, peak bytes)
    ask for at the kill budget; the start, and any limit it is lowered to, at least ``floor_bytes``
    (``min_memory``, as any decision).

    The start is the budget quantile of what each reached within the first window: as a share of
    its peak times the decision, or in bytes times the decision's margin where lower (a share of the
    peak overstates a large task's early memory, and a kill is set by bytes). Both carry the
    decision's margin above the history's peaks.

    With fewer than ``MIN_GROWTH_HISTORY`` profiles, a ``young_plan`` from that start (from the
    decision where start plus its headroom reaches it). None (start at the decision, grow only to
    rescue) without a profile; a ``held_plan`` when the start plus the headroom there reaches the
    decision: its tasks rise too early or jump too far to start below the decision.
    A task that used nothing says nothing of a shape, and would put a plan in bytes at nothing: it
    is left out.

    ``rebounds`` (bytes, per task of ``history``; None where it never fell or was not recorded)
    give the plan's rebound (``_rebound``); ``least_headroom_bytes`` is a young plan's least headroom
    (the rescue's)."""
    fell = [(r, peak) for r, (_, peak) in zip(rebounds, history, strict=False) if r is not None and peak > 0]
    history = [(p, peak) for p, peak in history if peak > 0]
    if not history or decision_bytes <= 0:
        return None
    margin = _margin([peak for _, peak in history], decision_bytes, max_kill_rate)
    rises, flat_rises = _level_rises(history, decision_bytes, window_s, max_kill_rate, margin)
    reached = [(early_share(p, window_s), peak) for p, peak in history]
    early = min(
        _at_budget([e for e, _ in reached], max_kill_rate) * decision_bytes,
        _at_budget([e * peak for e, peak in reached], max_kill_rate) * margin,
    )
    start = max(math.ceil(early), floor_bytes, 1)
    if len(history) < MIN_GROWTH_HISTORY:
        whole_bytes = max(*rises, least_headroom_bytes)
        rises_bytes = _young_rises(history, window_s, decision_bytes, least_headroom_bytes, whole_bytes)
        return replace(young_plan(start, rises_bytes, decision_bytes, window_s), floor_bytes=floor_bytes)
    rebound = _rebound(fell, decision_bytes, max_kill_rate, margin)
    plan = GrowthPlan(start, rises, decision_bytes, window_s, rebound, flat_rises, floor_bytes=floor_bytes)
    if start + plan.headroom_at(start, 0.0) < decision_bytes:
        return plan
    held = math.ceil(_at_budget([peak for _, peak in history], max_kill_rate))
    return held_plan(plan, held) if held < decision_bytes else None


def held_plan(plan: GrowthPlan, held_bytes: int) -> GrowthPlan:
    """The plan of a family whose tasks rise too early or jump too far to start below the decision:
    the try starts at the decision, and there it is rescued only once its usage passes
    ``held_bytes`` (below the decision), its tasks' peaks at the kill budget, which the decision
    was set to hold. A rescue from the rule's share of the limit alone would grow most of such a
    family's tries: a tight decision holds their peaks within that share, and the rate of a step
    function's last step over a resize window asks for several times the peak. (A decision at or
    below those peaks does not hold them: such a family has no plan, and the share alone rescues.)
    Once the try has stopped rising, past its first window, it is lowered as any try with a plan is,
    and grown from there by the plan's headroom: such tasks ramp fast and then sit (sarek's GATK
    ApplyBQSR, at 0.1-2.4 GB within 20 s under a decision of 2.1-3.0 GB, then for minutes)."""
    return replace(plan, start_bytes=plan.decision_bytes, rescue_above_bytes=held_bytes)


def rescue_plan(decision_bytes: int, held_bytes: int) -> GrowthPlan:
    """A ``held_plan`` without headrooms, as the agent reads one written before held plans carried
    them: the try is rescued only above ``held_bytes``, and never lowered."""
    return GrowthPlan(decision_bytes, (), decision_bytes, rescue_above_bytes=held_bytes)


def young_plan(
    start_bytes: int, rises_bytes: tuple[int, ...], decision_bytes: int, window_s: float
) -> GrowthPlan:
    """The plan of a family with one or two profiles: too few to say where its tasks rise (one task
    jumps from a level another only passes), so its headroom by level is ``_young_rises``, never
    less than a rescue's (a task that never rose after its first window says nothing of the next
    one's rise). It starts where a mature plan would (``start_bytes``) when that plus the headroom
    there fits under the decision, else at the decision; it grows by the headroom to the decision
    only, and above it as a rescue does (``young``), so it never holds more than no plan; a try that
    has stopped rising is lowered to that much above its level."""
    plan = GrowthPlan(start_bytes, rises_bytes, decision_bytes, window_s, young=True)
    fits = start_bytes + plan.headroom_at(start_bytes, 0.0) < decision_bytes
    return plan if fits else replace(plan, start_bytes=decision_bytes)


def _young_rises(
    history: Sequence[tuple[Sequence[float], float]],
    window_s: float,
    decision_bytes: int,
    least_bytes: int,
    whole_bytes: int,
) -> tuple[int, ...]:
    """A young family's headroom by level: its tasks' largest rise within a later window as a ratio
    of the level it rose from (at least a step of their peak), times each level's upper edge,
    between ``least_bytes`` and ``whole_bytes`` (its largest rise anywhere, with the decision's
    margin). A task rises in proportion to what it holds, so a low try keeps a small headroom: one
    headroom at every level kept tasks of sarek's TIDDIT_SV half their request above their usage.
    A profile's 2 % steps bound the ratio from below (a step from k steps is 1 / k): it errs towards
    more. Without a later window, ``whole_bytes`` at every level."""
    step = 1.0 / PROFILE_STEPS  # a rise from under a step (a task that idled, then loaded) is from one
    ratios = [r / max(base, step) for p, _ in history for base, r in _rises(p, window_s)]
    if not ratios:
        return (whole_bytes,)
    edges_bytes = decision_bytes * np.arange(1, LEVELS + 1) / LEVELS
    return tuple(int(v) for v in np.clip(np.ceil(max(ratios) * edges_bytes), least_bytes, whole_bytes))


def _rebound(
    fell: Sequence[tuple[float, float]], decision_bytes: int, max_kill_rate: float, margin: float
) -> int | None:
    """The rise to expect of a fallen try, from the family's tasks that fell (rebound, peak bytes):
    the budget quantile of their rebounds, as shares of their peaks times the decision or in bytes
    times the decision's margin, whichever is lower (as the start). None with fewer than
    ``MIN_GROWTH_HISTORY`` such tasks: a fallen try is then kept where its level puts it."""
    if len(fell) < MIN_GROWTH_HISTORY:
        return None
    shares = _at_budget([r / peak for r, peak in fell], max_kill_rate) * decision_bytes
    return math.ceil(min(shares, _at_budget([r for r, _ in fell], max_kill_rate) * margin))
