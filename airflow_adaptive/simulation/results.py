"""What one simulated run produced: its timeline and totals, including Witt et al.'s memory
allocation quality (MAQ = used / (used + wasted) memory-time; 1 is no waste)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """One attempt on the timeline (for Gantt charts)."""

    node: str
    task: str
    start_s: float
    end_s: float
    family: str
    oom_killed: bool


@dataclass
class RunResult:
    placement: str
    sizing: str
    queue: str = "fifo"
    makespan_s: float = 0.0
    mean_wait_s: float = 0.0
    oom_kills: int = 0
    waste_gb_h: float = 0.0  # memory-time allocated beyond the peak, and all of an OOM-killed attempt's
    used_gb_h: float = 0.0  # peak x runtime of successful attempts
    utilisation_by_group: dict[int, float] = field(default_factory=dict)  # reserved cores x time
    busy_by_group: dict[int, float] = field(default_factory=dict)  # cores doing task work x time
    tasks_by_group: dict[int, int] = field(default_factory=dict)
    succeeded: int = 0
    failed: int = 0  # killed at the cap or out of attempts
    never_ran: int = 0  # waiting on a failed parent, or no node could ever hold it
    attempts: int = 0
    shared_storage_read_bytes: int = 0  # declared inputs read from shared storage (staging copies too)
    timeline: list[Span] = field(default_factory=list)

    @property
    def maq(self) -> float:
        """Memory allocation quality (Witt et al., eq. 4): U / (U + W)."""
        total = self.used_gb_h + self.waste_gb_h
        return self.used_gb_h / total if total > 0 else 1.0

    def summary(self) -> dict[str, object]:
        return {
            "makespan_s": round(self.makespan_s, 3),
            "maq": round(self.maq, 4),
            "mean_wait_s": round(self.mean_wait_s, 3),
            "oom_kills": self.oom_kills,
            "waste_gb_h": round(self.waste_gb_h, 4),
            "utilisation_by_group": {
                str(g): round(u, 4) for g, u in sorted(self.utilisation_by_group.items())
            },
            "busy_by_group": {str(g): round(u, 4) for g, u in sorted(self.busy_by_group.items())},
            "tasks_by_group": {str(g): n for g, n in sorted(self.tasks_by_group.items())},
            "succeeded": self.succeeded,
            "failed": self.failed,
            "never_ran": self.never_ran,
            "attempts": self.attempts,
            "shared_storage_read_bytes": self.shared_storage_read_bytes,
        }
