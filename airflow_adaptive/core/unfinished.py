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


def longer_than(elapsed_s: list[float], mean_runtime_s: float) -> Unfinished:
    """From the running times of the family's unfinished attempts."""
    return Unfinished(sum(1 for e in elapsed_s if mean_runtime_s < e <= STALE_AFTER_S), mean_runtime_s)
