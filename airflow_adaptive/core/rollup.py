"""Per-family totals kept as attempts are recorded, and the store-wide distributions built on them.

A rollup is a sum of per-attempt contributions, so re-recording an attempt is
``rollup - contribution(old) + contribution(new)``: exact, whatever the order
in which writers arrive. Means (the family's demand for Tarema labels) are
sums over counts; the distributions of every family's mean demand and of all
completed peaks are :class:`LogHistogram` values updated by the same deltas, so
labels and cold starts read one row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, NamedTuple

from .labels import TASK_FEATURES, FamilyDemand
from .model import ExitReason, Observation, PeakKind
from .sizing.small_samples import SpreadMoments
from .sketch import LogHistogram

if TYPE_CHECKING:
    from .fitted_model import FittedModel


@dataclass(frozen=True)
class FamilyRollup:
    """Totals over every recorded attempt of one task family (pruning attempts keeps them)."""

    task_family: str
    attempts: int = 0
    completed: int = 0
    oom_killed: int = 0
    usable_samples: int = 0  # attempts a predictor learns from (see core.decide.to_samples)
    lower_bound_samples: int = 0  # of those: sampled peaks and OOM kills
    cpu_cores_sum: float = 0.0  # mean cores busy of completed attempts: sum / n
    cpu_cores_n: int = 0
    peak_memory_sum: float = 0.0
    peak_memory_n: int = 0
    io_rate_sum: float = 0.0  # bytes read + written per second
    io_rate_n: int = 0
    wall_seconds_sum: float = 0.0
    wall_seconds_n: int = 0
    requested_byte_seconds: float = 0.0  # request x wall of completed attempts with request and peak known
    used_byte_seconds: float = 0.0  # peak x wall of the same attempts
    user_requested_byte_seconds: float = 0.0  # the user's request (else the pod's) x wall, same attempts
    killed_byte_seconds: float = 0.0  # limit x wall of OOM-killed attempts: memory lost to kills
    peaks: LogHistogram = field(default_factory=LogHistogram)  # completed attempts' peaks
    last_finished_at: datetime | None = None
    image: str | None = None  # of the newest attempt that named one (warm starts)
    program: str | None = None

    @property
    def mean_wall_seconds(self) -> float | None:
        """Mean runtime of the completed attempts whose runtime is known."""
        return self.wall_seconds_sum / self.wall_seconds_n if self.wall_seconds_n else None

    def demand(self) -> FamilyDemand:
        def mean(total: float, n: int) -> float | None:
            return total / n if n else None

        return FamilyDemand(
            self.task_family,
            mean(self.cpu_cores_sum, self.cpu_cores_n),
            mean(self.peak_memory_sum, self.peak_memory_n),
            mean(self.io_rate_sum, self.io_rate_n),
        )

    def plus(self, other: FamilyRollup, sign: int = 1) -> FamilyRollup:
        """This rollup with ``other``'s contributions added (``sign=-1``: removed)."""
        changes: dict[str, object] = {}
        for f in fields(self):
            if f.name in _NOT_SUMMED:
                continue
            changes[f.name] = getattr(self, f.name) + sign * getattr(other, f.name)
        if sign > 0 and (other.image or other.program):  # what the newest attempts run
            changes["image"], changes["program"] = other.image, other.program
        changes["peaks"] = self.peaks.combined(other.peaks, sign)
        latest = [t for t in (self.last_finished_at, other.last_finished_at) if t is not None]
        changes["last_finished_at"] = max(latest) if latest else None
        return replace(self, **changes)  # type: ignore[arg-type]


def is_usable_sample(obs: Observation) -> bool:
    """Whether an attempt teaches a predictor anything (``core.decide.to_samples`` keeps exactly these):
    an OOM kill with a known limit, or another attempt's positive peak."""
    if obs.oom_killed:
        return bool(obs.memory_limit_bytes)
    return bool(obs.usage.peak_memory_bytes and obs.usage.peak_memory_bytes > 0)


class MemoryTime(NamedTuple):
    """Memory x time of one attempt, byte-seconds (0 where unknown). A tuple: two are built per
    recorded attempt, and a frozen dataclass costs three times as much to build."""

    requested: float = 0.0
    used: float = 0.0
    user_requested: float = 0.0
    killed: float = 0.0


_NOTHING_SPENT = MemoryTime()


def memory_time(obs: Observation) -> MemoryTime:
    """Requested, used and user-requested memory x time of a completed attempt whose request, peak
    and runtime are known (the user's request defaults to the pod's: no saving is claimed where it
    is unknown); limit x time of an OOM-killed one."""
    wall, peak, request = obs.usage.wall_seconds, obs.usage.peak_memory_bytes, obs.memory_request_bytes
    if obs.oom_killed:
        limit = obs.memory_limit_bytes or request
        return MemoryTime(killed=float(limit * wall)) if limit and wall else _NOTHING_SPENT
    if obs.exit_reason is not ExitReason.COMPLETED or not (wall and peak and request):
        return _NOTHING_SPENT
    user = obs.asked_bytes or request
    return MemoryTime(float(request * wall), float(peak * wall), float(user * wall))


def contribution(obs: Observation) -> FamilyRollup:
    """What one attempt adds to its family's rollup."""
    return contributions(obs.task_family, [obs])


def contributions(task_family: str, observations: Iterable[Observation]) -> FamilyRollup:
    """What the attempts (all of ``task_family``) add to its rollup together: the sum of each one's
    contribution, added up column by column (a batch of a million attempts makes one rollup)."""
    peaks = LogHistogram()
    terms = []
    latest: datetime | None = None
    tool: Observation | None = None  # the last attempt that named its image or program
    for obs in observations:
        term, peak = _terms(obs)
        terms.append(term)
        if peak:
            peaks.add(float(peak))
        if obs.finished_at is not None and (latest is None or obs.finished_at > latest):
            latest = obs.finished_at
        if obs.image or obs.program:
            tool = obs
    sums = [sum(column) for column in zip(*terms, strict=True)] if terms else [0] * len(_TERMS)
    return FamilyRollup(
        task_family, **dict(zip(_TERMS, sums, strict=True)), peaks=peaks, last_finished_at=latest,
        image=tool.image if tool else None, program=tool.program if tool else None,
    )  # fmt: skip


_NOT_SUMMED = ("task_family", "peaks", "last_finished_at", "image", "program")
_TERMS = tuple(f.name for f in fields(FamilyRollup) if f.name not in _NOT_SUMMED)


def completed_peak(obs: Observation) -> int | None:
    """The peak of a completed attempt (None for any other), as the family's peak histogram counts it."""
    return obs.usage.peak_memory_bytes if obs.exit_reason is ExitReason.COMPLETED else None


def _terms(obs: Observation) -> tuple[tuple[float, ...], int | None]:
    """One attempt's terms of the rollup's sums (in ``_TERMS`` order) and its peak (completed only)."""
    usage = obs.usage
    done = obs.exit_reason is ExitReason.COMPLETED
    wall = usage.wall_seconds if usage.wall_seconds else None  # 0 s: no rate can be computed
    usable = is_usable_sample(obs)
    cpu = usage.cpu_core_seconds / wall if done and wall and usage.cpu_core_seconds is not None else None
    peak = completed_peak(obs)
    io = ((usage.read_bytes or 0) + (usage.write_bytes or 0)) / wall if done and wall else None
    spent = memory_time(obs)
    term = (
        1,  # attempts
        int(done),
        int(obs.oom_killed),
        int(usable),
        int(usable and (obs.oom_killed or usage.peak_kind is PeakKind.SAMPLED)),
        cpu or 0.0,
        int(cpu is not None),
        float(peak or 0),
        int(peak is not None),
        io or 0.0,
        int(io is not None),
        float(usage.wall_seconds or 0.0) if done else 0.0,
        int(done and usage.wall_seconds is not None),
        spent.requested,
        spent.used,
        spent.user_requested,
        spent.killed,
    )
    return term, peak


@dataclass(frozen=True)
class DayTotals:
    """One family's attempts of one DAG on one day (UTC)."""

    attempts: int = 0
    completed: int = 0
    oom_killed: int = 0
    retries: int = 0  # attempts after the first try
    requested_byte_seconds: float = 0.0
    used_byte_seconds: float = 0.0
    user_requested_byte_seconds: float = 0.0
    killed_byte_seconds: float = 0.0

    def plus(self, other: DayTotals, sign: int = 1) -> DayTotals:
        return DayTotals(*(getattr(self, f.name) + sign * getattr(other, f.name) for f in fields(self)))


DayKey = tuple[str, str, date]  # task family, DAG id, day
DayTerms = tuple[int, int, int, int, float, float, float, float]  # DayTotals' fields, in order


def day_terms(obs: Observation, now: datetime | None = None) -> tuple[DayKey, DayTerms]:
    """The attempt's day (UTC; ``now`` when it has no finish time) and its terms of
    :class:`DayTotals`, in field order."""
    spent = memory_time(obs)
    when = obs.finished_at or now or datetime.now(timezone.utc)
    day = (when if when.tzinfo is timezone.utc else when.astimezone(timezone.utc)).date()
    terms = (
        1,
        int(obs.exit_reason is ExitReason.COMPLETED),
        int(obs.oom_killed),
        int(obs.key.try_number > 1),
        spent.requested,
        spent.used,
        spent.user_requested,
        spent.killed,
    )
    return (obs.task_family, obs.key.dag_id, day), terms


@dataclass
class Distributions:
    """Store-wide: every family's mean demand per task feature and every family's successful
    attempts (least-finished-first ranks a family among the others), the peaks of all
    completed attempts (a cold family that asks for no memory starts from them), and the moments
    of every family's spread of log peaks (a small family's bound learns its prior spread from
    them; None in a store written before they were kept, until it is rebuilt), and the scores of
    every family's first peaks against its small-sample bound, from the families' models (the
    bound's level is calibrated on them, ``sizing/bound_calibration.py``; those of families steadier
    than the prior apart; a model fitted before they were kept has none, so an older store starts
    with none and counts them as its models refit)."""

    demand: dict[str, LogHistogram] = field(
        default_factory=lambda: {feature: LogHistogram() for feature in TASK_FEATURES}
    )
    successes: LogHistogram = field(default_factory=LogHistogram)
    peaks: LogHistogram = field(default_factory=LogHistogram)
    spread: SpreadMoments | None = field(default_factory=SpreadMoments)
    scores: LogHistogram = field(default_factory=LogHistogram)
    steady_scores: LogHistogram = field(default_factory=LogHistogram)  # of the bounds of steady families

    def move_family(self, before: FamilyRollup | None, after: FamilyRollup) -> None:
        """A family's means and counts changed from ``before`` to ``after``: move it between buckets."""
        if before is not None and before.attempts:
            self.successes.add(before.completed, -1)
        if after.attempts:
            self.successes.add(after.completed, +1)
        for feature in TASK_FEATURES:
            old = before.demand().value(feature) if before is not None else None  # None: no mean yet
            new = after.demand().value(feature)
            if old is not None:
                self.demand[feature].add(old, -1)
            if new is not None:
                self.demand[feature].add(new, +1)
        if self.spread is not None:
            for rollup, sign in ((before, -1), (after, +1)):
                if rollup is not None:
                    self.spread.add(*rollup.peaks.log_variance(), sign)

    def move_scores(self, before: FittedModel | None, after: FittedModel | None) -> None:
        """A family's model was refitted: the bound scores of ``before`` give way to those of ``after``."""
        for model, sign in ((before, -1), (after, +1)):
            for scores, histogram in (
                ((model.bound_scores or ()) if model else (), self.scores),  # (null in a hand-edited row)
                ((model.steady_scores or ()) if model else (), self.steady_scores),
            ):
                for score in scores:
                    histogram.add(score, sign)

    def add_peaks(self, other: Distributions, sign: int = 1) -> None:
        """Add (``sign=-1``: remove) the peaks ``other`` counted."""
        self.peaks = self.peaks.combined(other.peaks, sign)

    def replace_attempt(self, old: Observation | None, new: Observation | None) -> None:
        for obs, sign in ((old, -1), (new, +1)):
            if obs is None:
                continue
            peak = completed_peak(obs)
            if peak:
                self.peaks.add(peak, sign)

    def to_json(self) -> dict[str, object]:
        return {
            "demand": {k: v.to_json() for k, v in self.demand.items()},
            "successes": self.successes.to_json(),
            "peaks": self.peaks.to_json(),
            **({"spread": self.spread.to_json()} if self.spread is not None else {}),
            "scores": self.scores.to_json(),
            "steady_scores": self.steady_scores.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, object] | None) -> Distributions:
        data = data if isinstance(data, dict) else {}
        demand = data.get("demand")
        demand = demand if isinstance(demand, dict) else {}
        successes, peaks, scores = data.get("successes"), data.get("peaks"), data.get("scores")
        steady = data.get("steady_scores")
        # an empty store starts counting spreads; one written without them knows none until rebuilt
        spread = SpreadMoments.from_json(data["spread"]) if "spread" in data else None
        return cls(
            {feature: LogHistogram(demand.get(feature)) for feature in TASK_FEATURES},
            LogHistogram(successes if isinstance(successes, dict) else None),
            LogHistogram(peaks if isinstance(peaks, dict) else None),
            spread if data else SpreadMoments(),
            LogHistogram(scores if isinstance(scores, dict) else None),
            LogHistogram(steady if isinstance(steady, dict) else None),
        )
