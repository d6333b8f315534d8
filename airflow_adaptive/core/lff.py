"""Least-finished-first (Witt et al., ALGORITHMS.md §5): run first what the predictors know least.

Among ready tasks, the one whose task family has the fewest successful attempts goes first, so
every family's predictor gets its first observations early; the second key is failed attempts,
``persevere`` (more failures first: a failing family needs a success to learn from) or
``postpone`` (fewer failures first). The same ordering drives Airflow's priority weight (exact
counts, at task-instance creation) and, coarser, a Kubernetes PriorityClass (three tiers by the
family's place among all families, at pod creation).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..exceptions import InvalidSettingError
from .normalise import INT32
from .sketch import LogHistogram
from .units import counted

FAILURE_MODES = ("persevere", "postpone")
# PriorityClasses, most urgent first: (name, value). Values stay far below the 1e9 reserved for
# system classes and close to the default 0 so other workloads are not pushed back much.
PRIORITY_CLASSES = (("adaptive-lff-high", 1000), ("adaptive-lff-medium", 500), ("adaptive-lff-low", 100))
# The weight packs (successes, failures) into one integer for Airflow's ``-priority_weight`` order:
# successes beyond MAX_SUCCESSES tie, as do failures beyond MAX_FAILURES.
MAX_SUCCESSES = 9_999
MAX_FAILURES = 99
LFF_SPAN = (MAX_SUCCESSES + 1) * (MAX_FAILURES + 1)  # every LFF weight is below this


@dataclass(frozen=True)
class FamilyProgress:
    """How far a task family's predictor has come: its successful and its failed attempts."""

    successes: int
    failures: int

    @classmethod
    def of(cls, attempts: int, completed: int) -> FamilyProgress:
        """From a family's counts: every attempt that did not complete failed."""
        return cls(completed, attempts - completed)


def check_failure_mode(mode: str) -> str:
    if mode not in FAILURE_MODES:
        raise InvalidSettingError(f"failure handling must be one of {', '.join(FAILURE_MODES)}, not {mode!r}")
    return mode


def lff_key(progress: FamilyProgress, mode: str = "persevere") -> tuple[int, int]:
    """Sort key, smallest first: fewest successes, then most (persevere) or fewest failures."""
    return progress.successes, -progress.failures if mode == "persevere" else progress.failures


def lff_weight(progress: FamilyProgress, mode: str = "persevere", static_weight: int = 0) -> int:
    """Airflow priority weight (higher runs first): the task's own weight plus the LFF rank.

    The rank is below ``LFF_SPAN`` (10^6), so a user weight above it still dominates; the sum is
    clamped to int32, the column's type.
    """
    successes = min(max(progress.successes, 0), MAX_SUCCESSES)
    failures = min(max(progress.failures, 0), MAX_FAILURES)
    second = failures if mode == "persevere" else MAX_FAILURES - failures
    rank = (MAX_SUCCESSES - successes) * (MAX_FAILURES + 1) + second
    return max(-INT32, min(INT32, static_weight + rank))


@dataclass(frozen=True)
class PriorityChoice:
    """The LFF priority of one family, and why."""

    weight: int
    class_name: str
    class_value: int
    progress: FamilyProgress
    families: int  # families with history
    median_successes: int | None  # estimated from a log histogram: whole, as the counts are
    share_ahead: float  # of those families, the share that has finished fewer attempts

    def explain(self) -> str:
        own = f"{counted(self.progress.successes, 'successful attempt')} ({self.progress.failures} failed)"
        if not self.families:
            where = ", no family has history yet"
        else:
            median = "?" if self.median_successes is None else str(self.median_successes)
            families = counted(self.families, "family's", "families'")
            where = f" of {families} median {median}, {self.share_ahead:.0%} have fewer"
        return f"{own}{where}: priority weight {self.weight}, priority class {self.class_name}"


def class_tier(share_ahead: float) -> int:
    """Index into PRIORITY_CLASSES: thirds of the families, the least finished first."""
    return min(len(PRIORITY_CLASSES) - 1, max(0, int(share_ahead * len(PRIORITY_CLASSES))))


def choose_priority(
    progress: FamilyProgress, successes: LogHistogram, mode: str = "persevere", static_weight: int = 0
) -> PriorityChoice:
    """The weight from the exact counts; the class from the share of families that are behind it:
    the least-finished third gets the highest class, the most-finished third the lowest."""
    ahead = successes.share_below(progress.successes)
    name, value = PRIORITY_CLASSES[class_tier(ahead)]
    median = successes.quantile(0.5)
    return PriorityChoice(
        lff_weight(progress, mode, static_weight),
        name,
        value,
        progress,
        successes.total,
        None if median is None else round(median),
        ahead,
    )
