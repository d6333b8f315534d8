"""Value types shared by every layer."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime


class ExitReason(str, enum.Enum):
    """Why a container stopped, as Kubernetes reports it (plus what we infer)."""

    COMPLETED = "Completed"
    OOM_KILLED = "OOMKilled"
    ERROR = "Error"
    EVICTED = "Evicted"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    UNSCHEDULABLE = "Unschedulable"  # still Pending when the try ended: no node fit
    UNKNOWN = "Unknown"

    @classmethod
    def parse(cls, value: str | None) -> ExitReason:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class PeakKind(str, enum.Enum):
    """How trustworthy an observed memory peak is."""

    MEASURED = "measured"  # cgroup memory.peak / max_usage written by the wrapper
    SAMPLED = "sampled"  # max of metrics-API samples: a lower bound
    CENSORED = "censored"  # OOM-killed: the true peak was at least the limit
    NONE = "none"  # nothing known


@dataclass(frozen=True)
class TaskKey:
    """Identity of one task attempt, as Airflow names it."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1
    try_number: int = 1

    @property
    def default_family(self) -> str:
        return family_of_task(self.dag_id, self.task_id)


# Trace imports record their attempts under this DAG id, which no Airflow DAG of a deployment is
# expected to carry: it tells imported history from live history.
IMPORTED_DAG_ID = "trace"


def family_of_task(dag_id: str, task_id: str) -> str:
    """A task's family when it names none: its history is its own."""
    return f"{dag_id}.{task_id}"


@dataclass(frozen=True)
class Usage:
    """What a finished container reported about itself (all optional)."""

    peak_memory_bytes: int | None = None
    cpu_core_seconds: float | None = None
    wall_seconds: float | None = None
    read_bytes: int | None = None
    write_bytes: int | None = None
    peak_kind: PeakKind = PeakKind.NONE


@dataclass(frozen=True)
class Observation:
    """One recorded task attempt: what it asked for, what it used, how it ended."""

    key: TaskKey
    task_family: str
    usage: Usage
    exit_reason: ExitReason
    exit_code: int | None = None
    memory_request_bytes: int | None = None
    memory_limit_bytes: int | None = None
    input_size_bytes: int | None = None
    node_name: str | None = None
    finished_at: datetime | None = None
    strategy: str | None = None
    explanation: str | None = None
    user_request_bytes: int | None = None  # what the DAG asked for, before any decision
    image: str | None = None  # the container image, as the pod named it (warm starts compare them)
    program: str | None = None  # what the container's command starts (core/sizing/similar.py)
    # seconds from the start to each 2 % of the peak (core/growth.py), when it was sampled
    memory_profile_s: tuple[float, ...] | None = None
    # after it first fell below half the most it had used, how far it rose again (None: never fell)
    memory_rebound_bytes: int | None = None

    @property
    def oom_killed(self) -> bool:
        return self.exit_reason is ExitReason.OOM_KILLED

    @property
    def imported(self) -> bool:
        """Read from a trace file (``history import``), not run by this Airflow: its host names are
        another cluster's."""
        return self.key.dag_id == IMPORTED_DAG_ID

    @property
    def asked_bytes(self) -> int | None:
        """The user's memory request, else (not recorded) the pod's: what a task asked for before
        any decision, as the savings and the what-if replay count it."""
        return self.user_request_bytes or self.memory_request_bytes


@dataclass(frozen=True)
class MemoryRequest:
    """The memory a user (or a previous decision) asked for, in bytes."""

    request_bytes: int | None = None
    limit_bytes: int | None = None

    @classmethod
    def asked(cls, request_bytes: int | None, limit_bytes: int | None) -> MemoryRequest:
        """As the API server reads a container's memory: a limit alone is its request too."""
        return cls(limit_bytes if request_bytes is None else request_bytes, limit_bytes)


@dataclass(frozen=True)
class Decision:
    """What to give a pod and why. `adaptive` is False when the user's values are kept."""

    memory_request_bytes: int | None
    memory_limit_bytes: int | None
    strategy: str
    explanation: str
    observations: int = 0
    adaptive: bool = True
    details: dict[str, float | int | str | None] = field(default_factory=dict)
    preferred_groups: tuple[int, ...] = ()  # node groups, best first (preferred node affinity)
    required_capabilities: frozenset[str] = frozenset()  # every one must be offered (required affinity)
    placement: str = ""  # why these groups, in words
    priority_class: str | None = None  # Kubernetes PriorityClass to set (least-finished-first)
    priority: str = ""  # the least-finished-first rank and why, in words
    cpu_request_millicores: int | None = None  # with size_cpu: the CPU request (None: the user's)
    busy_cores: float | None = None  # the family's recorded mean cores busy, for live load (None: unknown)

    def summary(self, max_chars: int = 240) -> str:
        """The explanation, shortened for a pod annotation."""
        text = self.explanation
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
