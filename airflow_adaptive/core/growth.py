"""Growing a running task's memory limit in place before the kernel kills it.

One rule, used by the time-series replay and by the node agent that PATCHes
``pods/resize``: when usage (with a family's plan, the most the try has used so
far) plus the rise to expect within one resize latency and one sample (the
headroom) reaches the limit, ask for usage plus twice the headroom, as the next
ask can land only a window after this one does (at least ``factor`` times the
limit, so a slow riser is not resized every sample), never above the room the
node has. A resize takes ``latency_s`` to reach the cgroup;
usage above the limit before then is an OOM kill, as it would be without growth.

The limit (the start, or a grown one) is lowered once the try is flat, its
level risen at most a step (2 %) of itself over a whole window (a plateau, a
creep, or a fall): to its level plus ``kept_headrooms`` headrooms, which keeps it
above the point where the next rise asks for growth in time (one headroom) with
a quarter to spare, so a plateau's wobble does not ask at once. A flat try's
headroom is what the family's tasks rose by within a window from where they
were flat, less than from where they climbed, and never less than the 2 % of its level
flat allows it to creep. A climbing try is not lowered: it
would be grown again within the window. A try that has fallen (below half the most it has used) for a whole
window is lowered further, to the least it has used since plus ``kept_headrooms`` times the
family's rebound (what its tasks that fell rose again), and while it stays fallen it is only
rescued from where it stands. Kubernetes applies a decrease from 1.34 on
(best-effort: the kubelet skips it while memory.current, page cache included, is
above the new limit); the agent turns lowering off where it is refused, takes
back one that was skipped, and growth overrides a decrease on its way.

The headroom, by that level, and the start come from the family's finished
tasks' memory profiles (``core/growth_plan.py``). Without a plan growth only
rescues: it waits for usage within the default share of the limit, and never
lowers.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..exceptions import InvalidSettingError
from .growth_plan import LATENCY_BOUND_S, PROFILE_STEPS, GrowthPlan, fallen


@dataclass(frozen=True)
class GrowthRule:
    latency_s: float = 5.0  # from the decision to grow until the new limit is in the cgroup
    sample_s: float = 2.0  # how often usage is read
    default_headroom: float = 0.1  # share of the limit a rescue keeps, when no headroom was learnt
    factor: float = 1.1  # the least growth step
    headrooms: float = 2.0  # an ask must hold until the next can land: two windows' rise
    kept_headrooms: float = 1.25  # what a try that stopped rising keeps (0: never lower)

    def __post_init__(self) -> None:
        if not (0 <= self.latency_s < LATENCY_BOUND_S and 0 < self.sample_s < LATENCY_BOUND_S):
            raise InvalidSettingError(
                f"resize latency must be in [0, {LATENCY_BOUND_S:g}) s and the sampling interval in "
                f"(0, {LATENCY_BOUND_S:g}) s"
            )
        if not 0.0 < self.default_headroom <= 1.0 or self.factor < 1.0 or self.headrooms < 1.0:
            raise InvalidSettingError("default_headroom must be in (0, 1], factor and headrooms at least 1")
        if self.kept_headrooms and not 1.0 < self.kept_headrooms <= self.headrooms:
            raise InvalidSettingError("kept_headrooms must be 0 (never lower) or in (1, headrooms]")

    def rescue_bytes(self, limit_bytes: int) -> int:
        """The headroom a rescue keeps under ``limit_bytes``."""
        return math.ceil(self.default_headroom * limit_bytes)

    @property
    def window_s(self) -> float:
        """How far ahead a decision to grow must look: until its resize lands and is next checked."""
        return self.latency_s + self.sample_s


def grown_limit(
    usage_bytes: float,
    rate_bytes_per_s: float,
    limit_bytes: int,
    room_bytes: int,
    rule: GrowthRule,
    plan: GrowthPlan | None = None,
    elapsed_s: float = math.inf,
    flat: bool = False,
) -> int | None:
    """The limit to ask for now, or None when the current one is safe for the window or the node has
    no room above it. With the family's plan, the headroom is its at this usage and time since the
    start (the rise rate is in it), a flat try's where ``flat``; a young family's plan
    (``GrowthPlan.young``) grows a try below the decision (its start, or lowered) by its headroom
    up to the decision only, and one at or above it as a rescue does, so it never holds more than
    no plan would: without a plan, usage must come within the default share
    of the limit, and the step adds the current rise over a window: a task's first ramp, which the
    decision covers, does not grow it. A ``held_plan``'s try at its decision rescues so, and only
    above what the decision was set to hold; once lowered, it grows by the plan's headroom up to the
    decision, as a young one does."""
    at_decision = plan is not None and limit_bytes >= plan.decision_bytes
    if plan is None or plan.rescue_only or (at_decision and plan.to_decision_only):
        holds = plan is not None and (at_decision or plan.rescue_only) and not plan.young
        held_bytes = plan.rescue_above_bytes if plan is not None and holds else 0  # the decision holds these
        if usage_bytes <= held_bytes or usage_bytes + rule.default_headroom * limit_bytes < limit_bytes:
            return None
        rise = rule.default_headroom * limit_bytes + max(rate_bytes_per_s, 0.0) * rule.window_s
    else:
        rise = plan.headroom_at(usage_bytes, elapsed_s, flat)
        if usage_bytes + rise < limit_bytes:
            return None
        if plan.to_decision_only:  # never above the decision: there, it grows as a rescue
            room_bytes = min(room_bytes, plan.decision_bytes)
    wanted = min(max(usage_bytes + rule.headrooms * rise, limit_bytes * rule.factor), room_bytes)
    return math.ceil(wanted) if wanted > limit_bytes else None


def lowered_limit(
    level_bytes: float,
    limit_bytes: int,
    rule: GrowthRule,
    plan: GrowthPlan | None,
    elapsed_s: float,
    flat: bool,
) -> int | None:
    """The lower limit to ask for now, or None: with the family's plan, past its first window, for
    a ``flat`` try (``TryLevel.flat``), its level plus ``kept_headrooms`` flat headrooms there,
    when the limit is more than one growth step above that."""
    if plan is None or plan.rescue_only or not rule.kept_headrooms or elapsed_s < plan.window_s or not flat:
        return None
    kept = max(
        level_bytes + rule.kept_headrooms * plan.headroom_at(level_bytes, elapsed_s, flat), plan.floor_bytes
    )
    return math.ceil(kept) if kept * rule.factor < limit_bytes else None


@dataclass
class TryLevel:
    """What the rule knows of a running try, sample by sample (the replay's and the agent's):
    its level (with a plan, the most used so far; else the latest usage) over the last window,
    since when it has stayed fallen below the level and the least it used since, and whether it
    was lowered for that fall."""

    with_plan: bool
    window_s: float = 0.0  # how far back ``flat`` looks: the rule's window
    level_bytes: float = 0.0
    fell_s: float | None = None
    trough_bytes: float = 0.0
    lowered_fallen: bool = False
    creeps: bool = False  # grown while flat; cleared once it is still (level unchanged a window) or climbs
    grown_s: float | None = None  # when growth was last asked
    recent: deque[tuple[float, float]] = field(default_factory=deque)  # (time, level) since a window ago

    def observe(self, now_s: float, usage_bytes: float) -> None:
        self.level_bytes = max(self.level_bytes, usage_bytes) if self.with_plan else usage_bytes
        self.recent.append((now_s, self.level_bytes))
        while len(self.recent) > 1 and self.recent[1][0] <= now_s - self.window_s:
            self.recent.popleft()  # the oldest kept is the latest at least a window old
        self.creeps = self.creeps and self.flat and self._risen_bytes() != 0.0
        if not fallen(usage_bytes, self.level_bytes):
            self.fell_s, self.lowered_fallen = None, False
        elif self.fell_s is None:
            self.fell_s, self.trough_bytes = now_s, usage_bytes
        else:
            self.trough_bytes = min(self.trough_bytes, usage_bytes)

    @property
    def flat(self) -> bool:
        """Whether the level has risen at most a step (1 / ``PROFILE_STEPS``) of itself over the last
        window: at most a step of the try's own peak, as ``rise_table(flat=True)`` reads a profile
        (a creep within a step does not end a plateau)."""
        risen = self._risen_bytes()
        return risen is not None and risen * PROFILE_STEPS <= self.level_bytes

    def _risen_bytes(self) -> float | None:
        """How far the level rose over the last window; None before a whole window was seen."""
        if len(self.recent) < 2 or self.recent[0][0] > self.recent[-1][0] - self.window_s:
            return None
        return self.level_bytes - self.recent[0][1]

    @classmethod
    def for_plan(cls, rule: GrowthRule | None, plan: GrowthPlan | None) -> TryLevel:
        """A try's state under ``plan``: flat over the rule's window, at least the one the plan's flat
        headroom was learnt over (a rescue plan's try: as without a plan, its latest usage)."""
        with_plan = plan is not None and not plan.rescue_only
        return cls(with_plan, max(rule.window_s if rule else 0.0, plan.window_s if plan else 0.0))

    def grown(
        self, usage_bytes: float, rate_bytes_per_s: float, limit_bytes: int, room_bytes: int,
        rule: GrowthRule, plan: GrowthPlan | None, elapsed_s: float,
    ) -> int | None:  # fmt: skip
        """``grown_limit`` at the level; for a try lowered for its fall, a rescue from its usage."""
        if self.lowered_fallen:
            return grown_limit(usage_bytes, rate_bytes_per_s, limit_bytes, room_bytes, rule, None, elapsed_s)
        return grown_limit(
            self.level_bytes, rate_bytes_per_s, limit_bytes, room_bytes, rule, plan, elapsed_s, self.flat
        )

    def grew(self) -> None:
        """The caller asked the growth ``grown`` wanted: a flat try that needs growth creeps, and is
        not lowered again until it is still or climbs (lowered, it would need growth again a quarter
        headroom later, a resize each way)."""
        self.creeps = self.creeps or self.flat
        self.grown_s = self.recent[-1][0] if self.recent else None

    def lowered(
        self, now_s: float, usage_bytes: float, limit_bytes: int, rule: GrowthRule,
        plan: GrowthPlan | None, elapsed_s: float,
    ) -> tuple[int | None, bool]:  # fmt: skip
        """The lower limit to ask for now, or None, and whether it is for a fall: ``fallen_limit``,
        else ``lowered_limit``. The caller marks the try ``lowered_fallen`` once it asks."""
        wanted = fallen_limit(self, now_s, usage_bytes, limit_bytes, rule, plan, elapsed_s)
        if wanted is not None:
            return wanted, True
        # not within a window of a growth: a creep near the 2 % that flips in and out of flat
        # would be grown at a sample that is not, and lowered at the next that is
        settled = self.grown_s is None or now_s - self.grown_s >= self.window_s
        flat = self.flat and settled and not self.creeps
        return lowered_limit(self.level_bytes, limit_bytes, rule, plan, elapsed_s, flat), False


def fallen_limit(
    state: TryLevel, now_s: float, usage_bytes: float, limit_bytes: int, rule: GrowthRule,
    plan: GrowthPlan | None, elapsed_s: float,
) -> int | None:  # fmt: skip
    """For a try fallen for a whole window, past its first, with a plan that learnt a rebound: the
    least it used since plus ``kept_headrooms`` rebounds, when the limit is more than one growth
    step above that and usage far enough below it that the rescue (``TryLevel.grown``) would not ask
    at once (a try already rising past its family's rebound is not lowered)."""
    if plan is None or plan.rebound_bytes is None or not rule.kept_headrooms or state.fell_s is None:
        return None
    if elapsed_s < plan.window_s or now_s - state.fell_s < rule.window_s:
        return None
    kept = max(state.trough_bytes + rule.kept_headrooms * plan.rebound_bytes, plan.floor_bytes)
    rescued_from = (1.0 - rule.default_headroom) * kept
    return math.ceil(kept) if usage_bytes < rescued_from and kept * rule.factor < limit_bytes else None


@dataclass(frozen=True)
class GrowthOutcome:
    """One try under growth: did it finish, for how long, what it held (byte-seconds) and used."""

    succeeded: bool
    seconds: float  # the runtime, or the time of the kill
    held_byte_s: float
    used_byte_s: float
    resizes: int
    final_limit_bytes: int


def run_with_growth(
    times_s: Sequence[float],
    usage_bytes: Sequence[float],
    start_bytes: int,
    room_bytes: int,
    rule: GrowthRule | None,
    plan: GrowthPlan | None = None,
) -> GrowthOutcome:
    """Replay one try over its usage samples (times from its start, ascending; the last is its end).
    The limit starts at ``start_bytes``; with a rule it grows (and, with a plan, is lowered) as the
    agent would change it (by the family's ``plan``, or only to rescue without one), deciding at
    each sample. Usage above the limit in force at a sample is a kill there; between samples usage
    is held at the earlier sample's value. A decrease landing at or below usage is skipped, and the
    try is not lowered again (as the kubelet and the agent do)."""
    limit, pending, resizes = start_bytes, None, 0  # pending: (when it lands, new limit)
    held = used = 0.0
    state = TryLevel.for_plan(rule, plan)
    lowering = True  # until a decrease does not land
    for i, (t, u) in enumerate(zip(times_s, usage_bytes, strict=True)):
        if pending is not None and pending[0] <= t:
            pending, lowering = _landed(pending, limit, u, lowering)
            limit, pending = (limit if pending is None else pending[1]), None
        if u > limit:
            return GrowthOutcome(False, t, held, used, resizes, limit)
        state.observe(t, u)
        # the first sample too, at no rate, as the agent; growth overrides a pending decrease
        if rule is not None and (pending is None or pending[1] < limit):
            rate = (u - usage_bytes[i - 1]) / max(t - times_s[i - 1], 1e-9) if i else 0.0
            wanted = state.grown(u, rate, limit, room_bytes, rule, plan, t)
            if wanted is not None:
                state.grew()
            elif lowering and pending is None:
                wanted, for_fall = state.lowered(t, u, limit, rule, plan, t)
                state.lowered_fallen |= wanted is not None and for_fall
            if wanted is not None:
                pending, resizes = (t + rule.latency_s, wanted), resizes + 1
        if i + 1 < len(times_s):
            if pending is not None and pending[0] < times_s[i + 1]:
                pending, lowering = _landed(pending, limit, u, lowering)
            held += _held(limit, pending, t, times_s[i + 1])
            used += u * (times_s[i + 1] - t)
    end = times_s[-1] if len(times_s) else 0.0
    return GrowthOutcome(True, end, held, used, resizes, limit)


def _landed(
    pending: tuple[float, int], limit: int, usage_bytes: float, lowering: bool
) -> tuple[tuple[float, int] | None, bool]:
    """A resize as it lands: the kubelet skips a decrease to usage or below it (the agent takes it
    back and lowers that try no more)."""
    if pending[1] < limit and usage_bytes >= pending[1]:
        return None, False
    return pending, lowering


def _held(limit: int, pending: tuple[float, int] | None, t0: float, t1: float) -> float:
    """Byte-seconds held from t0 to t1, a pending resize landing on the way."""
    if pending is None or pending[0] >= t1:
        return limit * (t1 - t0)
    landing = max(pending[0], t0)
    return limit * (landing - t0) + pending[1] * (t1 - landing)
