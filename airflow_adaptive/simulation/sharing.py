"""A node's cores shared as its pods come and go (processor sharing, as Linux's CFS shares them).

Every running attempt on a node runs slower by (1 + ``interference_per_task`` x the co-running
attempts with its dominant feature) x (cores busy there / the node's cores, when above 1). The
factor is re-read whenever an attempt starts or ends on the node, so an attempt that started
beside a burst of short CPU-hungry pods speeds up when they end, rather than keeping the burst's
slowdown for hours. Start-up and reading take their own time, unslowed, before the work.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from airflow_adaptive.core.placement import shared_cpu_slowdown

from .params import SimParams


@dataclass
class Progress:
    """How far one running attempt has come, and how fast it goes now."""

    started_s: float
    setup_s: float  # start-up and reading: wall time, not slowed by sharing
    work_s: float  # the attempt's work, in seconds alone on the node (cut at TTF when OOM-killed)
    oom: bool
    setup_left_s: float = 0.0
    work_left_s: float = 0.0
    slowdown: float = 1.0
    since_s: float = 0.0
    version: int = 0  # bumped at every reschedule: an end event of an older version is void

    def __post_init__(self) -> None:
        self.setup_left_s, self.work_left_s, self.since_s = self.setup_s, self.work_s, self.started_s

    def advance(self, now_s: float) -> None:
        """Account for the time since the last change: set-up first, then work at the current speed."""
        elapsed_s = now_s - self.since_s
        setup_s = min(self.setup_left_s, elapsed_s)
        self.setup_left_s -= setup_s
        self.work_left_s = max(0.0, self.work_left_s - (elapsed_s - setup_s) / self.slowdown)
        self.since_s = now_s

    def left_s(self) -> float:
        """Wall time to the end at the current speed."""
        return self.setup_left_s + self.work_left_s * self.slowdown

    def ran_s(self, now_s: float) -> float:
        """Wall time of the work itself, set-up excluded: what the pod's runtime records."""
        return max(0.0, now_s - self.started_s - self.setup_s) if self.work_s else 0.0


def slowdowns(running: Mapping[int, tuple[str, float]], cores: float, params: SimParams) -> dict[int, float]:
    """Per running attempt (attempt -> (dominant feature, cores used)): how much slower it runs now."""
    busy_cores = sum(used for _, used in running.values())
    shared = shared_cpu_slowdown(busy_cores, cores) if params.cpu_sharing else 1.0
    alike: dict[str, int] = {}
    for dominant, _ in running.values():
        alike[dominant] = alike.get(dominant, 0) + 1
    return {
        aid: (1.0 + params.interference_per_task * (alike[dominant] - 1)) * shared
        for aid, (dominant, _) in running.items()
    }


class Sharing:
    """Every running attempt's progress; each change of a node's attempts re-reads their speeds."""

    def __init__(self, params: SimParams) -> None:
        self.params = params
        self.progress: dict[int, Progress] = {}

    def start(self, aid: int, now_s: float, setup_s: float, work_s: float, oom: bool) -> None:
        """An attempt starts: set-up, then its work at the speed the next reshare gives it."""
        self.progress[aid] = Progress(now_s, setup_s, work_s, oom)

    def reshare(
        self, running: Mapping[int, tuple[str, float]], cores: float, now_s: float
    ) -> Iterator[tuple[int, float, int]]:
        """(attempt, wall time to its end, version) for each attempt whose speed changed."""
        for aid, slowdown in slowdowns(running, cores, self.params).items():
            progress = self.progress[aid]
            if progress.version and slowdown == progress.slowdown:
                continue  # its end event stands
            progress.advance(now_s)
            progress.slowdown = slowdown
            progress.version += 1
            yield aid, progress.left_s(), progress.version

    def ending(self, aid: int, version: int) -> Progress | None:
        """The attempt's progress when this end event is its latest, else None (rescheduled since)."""
        progress = self.progress.get(aid)
        if progress is None or version != progress.version:
            return None
        return self.progress.pop(aid)
