"""Simulated work: task instances with dependencies, measured demand and the user's requests.

A task's ``runtime_s`` is its runtime on the reference node (speed 1). Lotaru
tasks also carry their measured runtime per machine, which replaces the speed
model on nodes mapped to those machines. Workloads are checked to be DAGs
(``graphlib``) with known parents and unique ids.
"""

from __future__ import annotations

import graphlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from airflow_adaptive.core.labels import TASK_FEATURES, FamilyDemand
from airflow_adaptive.core.units import GIB, MIB
from airflow_adaptive.exceptions import SimulationInputError

from .params import SimParams


@dataclass(frozen=True, slots=True)
class SimTask:
    id: str
    family: str
    runtime_s: float  # on the reference node
    peak_memory_bytes: int
    request_memory_bytes: int  # the user's request (and limit)
    request_cores: float
    cpu_cores_used: float  # mean busy cores
    io_bytes: float = 0.0  # read + written
    parents: tuple[str, ...] = ()
    input_size_bytes: int | None = None
    required_capabilities: frozenset[str] = frozenset()
    runtime_by_machine: Mapping[str, float] | None = None  # measured seconds per Lotaru machine
    priority: int = 0  # Airflow priority_weight: higher is scheduled first
    inputs: tuple[tuple[str, int], ...] = ()  # declared inputs on shared storage: (name, bytes)

    def demand(self) -> tuple[float, float, float]:
        """Cores busy, peak memory bytes, I/O bytes per second: what labels are made of."""
        return self.cpu_cores_used, float(self.peak_memory_bytes), self.io_bytes / max(self.runtime_s, 1e-3)


@dataclass(frozen=True)
class Workload:
    name: str
    tasks: tuple[SimTask, ...]
    runs: int = 1
    order: tuple[int, ...] = field(init=False, default=())  # a topological order of task indices

    def __post_init__(self) -> None:
        if not self.tasks:
            raise SimulationInputError(f"workload {self.name!r} has no tasks")
        ids = {t.id: i for i, t in enumerate(self.tasks)}
        if len(ids) != len(self.tasks):
            raise SimulationInputError(f"workload {self.name!r}: task ids must be unique")
        sorter: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
        for i, t in enumerate(self.tasks):
            if t.runtime_s < 0 or not math.isfinite(t.runtime_s) or t.peak_memory_bytes <= 0:
                raise SimulationInputError(f"task {t.id!r}: runtime must be >= 0 and peak memory > 0")
            missing = [p for p in t.parents if p not in ids]
            if missing:
                raise SimulationInputError(f"task {t.id!r}: unknown parents {missing[:3]}")
            sorter.add(i, *(ids[p] for p in t.parents))
        try:
            object.__setattr__(self, "order", tuple(sorter.static_order()))
        except graphlib.CycleError as err:
            raise SimulationInputError(
                f"workload {self.name!r} is not a DAG: cycle {err.args[1][:5]}"
            ) from None


def user_request_bytes(peak_bytes: int, params: SimParams) -> int:
    """The user's memory request: the default, or the next power of two GiB above a larger peak."""
    request = params.user_memory_bytes
    if params.raise_user_request_to_power_of_two and peak_bytes > request:
        request = GIB << max(0, math.ceil(math.log2(peak_bytes / GIB)))
    return request


def concurrent_runs(workload: Workload, runs: int) -> Workload:
    """``runs`` copies of the workload started together (multi-workflow); families are shared."""
    if runs < 1:
        raise SimulationInputError("runs must be at least 1")
    if runs == 1:
        return workload
    tasks = [
        replace(t, id=f"r{r}/{t.id}", parents=tuple(f"r{r}/{p}" for p in t.parents))
        for r in range(runs)
        for t in workload.tasks
    ]
    return Workload(f"{workload.name} x{runs}", tuple(tasks), runs)


class FamilyStats:
    """Running sums of each family's demand and runtime: what the history store would report."""

    def __init__(self, tasks: Sequence[SimTask] = ()) -> None:
        self._sums: dict[str, list[float]] = {}  # cores, memory, io, runtime, count
        for t in tasks:
            self.add(t, t.runtime_s)

    def add(self, task: SimTask, runtime_s: float) -> bool:
        """Record one finished task; True when it is the family's first."""
        s = self._sums.setdefault(task.family, [0.0, 0.0, 0.0, 0.0, 0.0])
        for k, v in enumerate((*task.demand(), runtime_s, 1.0)):
            s[k] += v
        return s[4] == 1

    def demands(self) -> dict[str, FamilyDemand]:
        return {f: FamilyDemand(f, s[0] / s[4], s[1] / s[4], s[2] / s[4]) for f, s in self._sums.items()}

    def mean_cores_used(self, family: str) -> float | None:
        s = self._sums.get(family)
        return s[0] / s[4] if s else None

    def mean_runtime_s(self, family: str) -> float | None:
        s = self._sums.get(family)
        return s[3] / s[4] if s else None


def family_demands(tasks: Sequence[SimTask]) -> dict[str, FamilyDemand]:
    """Mean demand per family over ``tasks``."""
    return FamilyStats(tasks).demands()


def dominant_features(demands: Mapping[str, FamilyDemand]) -> dict[str, str]:
    """Each family's dominant feature: where its demand ranks highest among all families (ties: cpu, memory, io)."""
    families = sorted(demands)
    if not families:
        return {}
    ranks = {}
    for feature in TASK_FEATURES:
        values = np.array([demands[f].value(feature) or 0.0 for f in families])
        # Percentile rank in [0, 1]: the share of families with a smaller value.
        ranks[feature] = np.searchsorted(np.sort(values), values, side="left") / max(len(families) - 1, 1)
    out = {}
    for i, f in enumerate(families):
        out[f] = max(TASK_FEATURES, key=lambda feat: (ranks[feat][i], -TASK_FEATURES.index(feat)))
    return out


def floor_peak(value: float | None) -> int:
    """Traces sometimes lack a peak; a task still holds some memory (1 MiB)."""
    return max(int(value or 0), MIB)
