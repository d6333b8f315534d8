"""A family's unfinished attempts: when its finished ones are a biased sample of its tasks.

A family learns from attempts that finished, and the first to finish are its shortest. Where
memory grows with runtime, a model fitted on them sizes the rest too small: a scatter of 87 tasks
sized by its first finisher is OOM-killed 85 times (nf-core chipseq's PHANTOMPEAKQUALTOOLS). The
attempts still running tell: when more of them have already run longer than the family's finished
attempts took on average than there are finished attempts, those attempts are a minority and the
shortest, and the next first try gets at least what a family with no history would get (the
user's request scaled by what other families used, or the no-request cold start).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from dataclasses import dataclass

from .units import format_duration

STALE_AFTER_S = 2 * 86_400.0  # an attempt unrecorded this long is taken as lost (its worker died)


@dataclass(frozen=True)
class Unfinished:
    """The family's unfinished attempts that have run longer than its finished ones took on
    average, and that average."""

    longer_than_mean: int
    mean_runtime_s: float

    def outnumber(self, finished: int) -> bool:
        """Whether they outnumber the finished attempts the model learnt from."""
        return finished > 0 and self.longer_than_mean > finished

    def explain(self, finished: int) -> str:
        done = "the finished one took" if finished == 1 else f"the {finished} finished ones took on average"
        return (
            f"{self.longer_than_mean} unfinished attempts have run longer than {done} "
            f"({format_duration(self.mean_runtime_s)}): at least a new family's start"
        )


class Running:
    """Start times of one family's unfinished tasks, sorted: what the replay and the simulator know
    where the store counts its notes. Counting is two bisections, so a family with thousands of
    tasks in flight costs no scan per decision."""

    def __init__(self) -> None:
        self._starts_s: list[float] = []
        self._started_s: dict[Hashable, float] = {}  # by task

    def __len__(self) -> int:
        return len(self._starts_s)

    def start(self, task: Hashable, at_s: float) -> None:
        self.end(task)
        self._started_s[task] = at_s
        bisect.insort(self._starts_s, at_s)

    def end(self, task: Hashable) -> None:
        started_s = self._started_s.pop(task, None)
        if started_s is not None:
            del self._starts_s[bisect.bisect_left(self._starts_s, started_s)]

    def count_between(self, after_s: float, before_s: float) -> int:
        """Those that started in (``after_s``, ``before_s``), as the store counts its notes."""
        first = bisect.bisect_right(self._starts_s, after_s)
        return max(0, bisect.bisect_left(self._starts_s, before_s) - first)

    def longer_than(self, mean_runtime_s: float, now_s: float) -> Unfinished:
        """Those that have run longer than ``mean_runtime_s`` by ``now_s``, and not lost (as the store
        counts: started after ``now_s - STALE_AFTER_S`` and before ``now_s - mean_runtime_s``)."""
        before = bisect.bisect_left(self._starts_s, now_s - mean_runtime_s)
        lost = bisect.bisect_right(self._starts_s, now_s - STALE_AFTER_S)
        return Unfinished(max(0, before - lost), mean_runtime_s)
