"""Growing a running task's memory limit in place before the kernel kills it.

One rule, used by the time-series replay and by the node agent that PATCHes
``pods/resize``: when usage plus the rise to expect within one resize latency
and one sample (the headroom) reaches the limit, ask for usage plus twice the
headroom, as the next ask can land only a window after this one does (at least
``factor`` times the limit, so a slow riser is not resized every sample), never
above the room the node has. A resize takes ``latency_s`` to reach the cgroup;
usage above the limit before then is an OOM kill, as it would be without growth.

The headroom is what a family's tasks have jumped within that window, and the
start what they reached before growth could act: both learnt from the family's
finished tasks' memory profiles. A profile is the time (seconds from the start)
at which a task first reached each fraction in ``PROFILE_FRACTIONS`` of its
peak (every 2 %); read as a step function (the level between two times is the
lower fraction), it overstates every jump by less than one step, which errs
towards growing early.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..exceptions import InvalidSettingError

PROFILE_STEPS = 50  # a step of 2 % of the peak: each learnt share errs by less than that
PROFILE_FRACTIONS = tuple(k / PROFILE_STEPS for k in range(1, PROFILE_STEPS + 1))


@dataclass(frozen=True)
class GrowthRule:
    latency_s: float = 5.0  # from the decision to grow until the new limit is in the cgroup
    sample_s: float = 2.0  # how often usage is read
    default_headroom: float = 0.1  # share of the limit a rescue keeps, when no headroom was learnt
    factor: float = 1.1  # the least growth step
    headrooms: float = 2.0  # an ask must hold until the next can land: two windows' rise

    def __post_init__(self) -> None:
        if not (0 <= self.latency_s < 3600 and 0 < self.sample_s < 3600):
            raise InvalidSettingError(
                "resize latency must be in [0, 3600) s and the sampling interval in (0, 3600) s"
            )
        if not 0.0 < self.default_headroom <= 1.0 or self.factor < 1.0 or self.headrooms < 1.0:
            raise InvalidSettingError("default_headroom must be in (0, 1], factor and headrooms at least 1")

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
    headroom_bytes: float | None = None,
) -> int | None:
    """The limit to ask for now, or None when the current one is safe for the window or the node has
    no room above it. The headroom is the rise to expect within a window, learnt from the family
    (the rise rate is in it). Without one (a rescue) usage must come within the default share of
    the limit, and the step adds the current rise over a window: a task's first ramp, which the
    decision covers, does not grow it."""
    if headroom_bytes is None:
        if usage_bytes + rule.default_headroom * limit_bytes < limit_bytes:
            return None
        rise = rule.default_headroom * limit_bytes + max(rate_bytes_per_s, 0.0) * rule.window_s
    elif usage_bytes + headroom_bytes < limit_bytes:
        return None
    else:
        rise = headroom_bytes
    wanted = min(max(usage_bytes + rule.headrooms * rise, limit_bytes * rule.factor), room_bytes)
    return math.ceil(wanted) if wanted > limit_bytes else None


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


def jump_share(profile_s: Sequence[float], window_s: float) -> float:
    """The largest rise, as a share of the peak, a task may have made within one window after the
    first (which its start covers): from what it surely had before a step to what it may have
    reached one window later."""
    return max(
        (
            _below_at(profile_s, t + window_s) - _reached_before(profile_s, t)
            for t in profile_s
            if t >= window_s
        ),
        default=0.0,
    )


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
    headroom_bytes: float | None = None,
) -> GrowthOutcome:
    """Replay one try over its usage samples (times from its start, ascending; the last is its end).
    The limit starts at ``start_bytes``; with a rule it grows as the agent would grow it, deciding at
    each sample. Usage above the limit in force at a sample is a kill there; between samples usage
    is held at the earlier sample's value."""
    limit, pending, resizes = start_bytes, None, 0  # pending: (when it lands, new limit)
    held = used = 0.0
    for i, (t, u) in enumerate(zip(times_s, usage_bytes, strict=True)):
        if pending is not None and pending[0] <= t:
            limit, pending = pending[1], None
        if u > limit:
            return GrowthOutcome(False, t, held, used, resizes, limit)
        if rule is not None and pending is None:  # the first sample too, at no rate: as the agent
            rate = (u - usage_bytes[i - 1]) / max(t - times_s[i - 1], 1e-9) if i else 0.0
            wanted = grown_limit(u, rate, limit, room_bytes, rule, headroom_bytes)
            if wanted is not None:
                pending, resizes = (t + rule.latency_s, wanted), resizes + 1
        if i + 1 < len(times_s):
            held += _held(limit, pending, t, times_s[i + 1])
            used += u * (times_s[i + 1] - t)
    end = times_s[-1] if len(times_s) else 0.0
    return GrowthOutcome(True, end, held, used, resizes, limit)


def _held(limit: int, pending: tuple[float, int] | None, t0: float, t1: float) -> float:
    """Byte-seconds held from t0 to t1, a pending resize landing on the way."""
    if pending is None or pending[0] >= t1:
        return limit * (t1 - t0)
    landing = max(pending[0], t0)
    return limit * (landing - t0) + pending[1] * (t1 - landing)


def profile_of(times_s: Sequence[float], usage_bytes: Sequence[float]) -> tuple[float, ...]:
    """The first time each fraction of the peak was reached."""
    peak = max(usage_bytes, default=0.0)
    out, j = [], 0
    for fraction in PROFILE_FRACTIONS:
        while j < len(usage_bytes) and usage_bytes[j] < fraction * peak:
            j += 1
        out.append(float(times_s[min(j, len(times_s) - 1)]))
    return tuple(out)


MIN_GROWTH_HISTORY = 3  # profiles a family needs before its start and headroom are learnt


@dataclass(frozen=True)
class GrowthPlan:
    """Where a try starts and how far above its usage it is kept, learnt from its family."""

    start_bytes: int
    headroom_bytes: int


def _at_budget(values: Sequence[float], max_kill_rate: float) -> float:
    """The (1 - budget) quantile, the same budget logic as the static decision's."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil((1.0 - max_kill_rate) * (len(ordered) - 1)))]


def learnt_plan(
    history: Sequence[tuple[Sequence[float], float]],
    decision_bytes: int,
    window_s: float,
    max_kill_rate: float,
) -> GrowthPlan | None:
    """The start and the headroom the family's finished tasks (profile, peak bytes) ask for at the
    kill budget: what each may have reached within the first window, before growth can act, and
    the most it may have risen within one later window.

    Each is the budget quantile of the tasks' shares of their own peaks, times the decision: the
    decision's margin for small samples and input sizes then carries over. Once the family has a
    task beyond the quantile (n x budget >= 1), the quantile in bytes is trusted where it is lower:
    the share of a task's peak overstates a large task's early memory, and a kill is set by bytes.

    None (start at the decision, grow only to rescue) with fewer than ``MIN_GROWTH_HISTORY``
    profiles, or when the start plus one headroom reaches the decision: its tasks rise too early or
    jump too far for growth to hold less than the decision."""
    if len(history) < MIN_GROWTH_HISTORY:
        return None
    early = [(early_share(p, window_s), peak) for p, peak in history]
    jump = [(jump_share(p, window_s), peak) for p, peak in history]
    start = _at_budget([e for e, _ in early], max_kill_rate) * decision_bytes
    headroom = _at_budget([j for j, _ in jump], max_kill_rate) * decision_bytes
    if len(history) * max_kill_rate >= 1.0:
        start = min(start, _at_budget([e * peak for e, peak in early], max_kill_rate))
        headroom = min(headroom, _at_budget([j * peak for j, peak in jump], max_kill_rate))
    if start + headroom >= decision_bytes:
        return None
    return GrowthPlan(max(math.ceil(start), 1), math.ceil(headroom))
