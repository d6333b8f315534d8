"""Placement, scheduler-framework style: filters say yes or no with a reason, scorers return raw
numbers, and one engine normalises, weighs and orders the node groups, explaining every score.

The Tarema scorer prefers the group whose per-feature ranks are closest to the
task's labels (``sum |g_k - t_k|``, ties to the stronger group). Groups become
preferred node-affinity terms with decreasing weights: never a hard
requirement, so a busy best group does not stall the task. Required
capabilities (Steep) are a filter here and a required affinity on the pod.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .registry import Registry


@dataclass(frozen=True)
class GroupView:
    """A node group as placement sees it."""

    id: int
    ranks: Mapping[str, int]  # task feature -> rank (1 = weakest)
    capabilities: frozenset[str] = frozenset()  # offered by at least one member
    largest_allocatable_memory_bytes: int | None = None
    members: tuple[str, ...] = ()
    reserved_fraction: float = 0.0  # share of the group's resources already reserved (0..1)
    idle_nodes: int = 0  # members running nothing now (0 when unknown)


@dataclass(frozen=True)
class GroupLoad:
    """What runs on a group now, when the cluster was asked (live load)."""

    idle_nodes: int = 0  # schedulable members running nothing but per-node pods
    reserved_fraction: float = 0.0  # CPU requested by unfinished pods over the members' allocatable cores


@dataclass(frozen=True)
class TaskDemandView:
    family: str
    labels: Mapping[str, int] | None
    memory_request_bytes: int | None = None
    required_capabilities: frozenset[str] = frozenset()
    runtime_by_group_s: Mapping[int, float] | None = None  # expected runtime per group (core/runtimes.py)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""


class Filter(Protocol):
    @property
    def name(self) -> str: ...

    def __call__(self, task: TaskDemandView, group: GroupView) -> Verdict: ...


class Scorer(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def higher_is_better(self) -> bool: ...

    def __call__(self, task: TaskDemandView, group: GroupView) -> float | None: ...


@dataclass(frozen=True)
class CapabilityFilter:
    name: str = "capabilities"

    def __call__(self, task: TaskDemandView, group: GroupView) -> Verdict:
        missing = sorted(task.required_capabilities - group.capabilities)
        return Verdict(not missing, f"lacks {', '.join(missing)}" if missing else "")


@dataclass(frozen=True)
class MemoryFitFilter:
    name: str = "memory-fit"

    def __call__(self, task: TaskDemandView, group: GroupView) -> Verdict:
        limit, need = group.largest_allocatable_memory_bytes, task.memory_request_bytes
        if limit is None or need is None or need <= limit:
            return Verdict(True)
        return Verdict(False, f"no node can allocate {need} bytes (largest {limit})")


@dataclass(frozen=True)
class TaremaScorer:
    """Distance between the group's ranks and the task's labels; None when the task has no labels.

    Overshooting (a group stronger than the label asks for) counts only while the group is busy:
    Tarema spreads light tasks to weak groups to spare the strong ones from sharing, but a group
    with an idle node has no one to share with, so there a stronger group costs nothing.
    """

    name: str = "tarema"
    higher_is_better: bool = False
    unknown: str = "has no labels yet"

    def __call__(self, task: TaskDemandView, group: GroupView) -> float | None:
        if not task.labels:
            return None
        if group.idle_nodes:
            return float(sum(max(0, t - group.ranks.get(f, 1)) for f, t in task.labels.items()))
        return float(sum(abs(group.ranks.get(f, 1) - t) for f, t in task.labels.items()))


class RoundRobinScorer:
    """Kubernetes-default-like baseline: each placement starts one group further along (stateful)."""

    name = "round-robin"
    higher_is_better = False

    def __init__(self) -> None:
        self._turn = 0
        self._groups = 1

    def __call__(self, task: TaskDemandView, group: GroupView) -> float | None:
        self._groups = max(self._groups, group.id)
        return float((group.id - 1 - self._turn) % self._groups)

    def placed(self) -> None:
        """Called by the engine after every placement: the next one starts at the next group."""
        self._turn += 1


@dataclass(frozen=True)
class ReservedShareScorer:
    """Baselines on a group's reserved share: ``fair`` spreads (the least reserved group first),
    ``fill-nodes`` packs (the most reserved group that still passes the filters first)."""

    name: str = "fair"
    higher_is_better: bool = False

    def __call__(self, task: TaskDemandView, group: GroupView) -> float | None:
        return group.reserved_fraction


@dataclass(frozen=True)
class FastestScorer:
    """SJFN's placement half: the strongest group (sum of its ranks); the queue orders shortest first."""

    name: str = "fastest"
    higher_is_better: bool = True

    def __call__(self, task: TaskDemandView, group: GroupView) -> float | None:
        return float(sum(group.ranks.values()))


@dataclass(frozen=True)
class FinishTimeScorer:
    """The group where the task is expected to finish first: its expected runtime there
    (``core/runtimes.py``), stretched by the share of the group already reserved, since pods there
    share cores and caches with what runs; a group with an idle node has nothing to share.
    None when the family's runtime is unknown (no preference: kube-scheduler spreads)."""

    name: str = "finish-time"
    higher_is_better: bool = False
    unknown: str = "has no recorded runtime yet"

    def __call__(self, task: TaskDemandView, group: GroupView) -> float | None:
        runtime_s = (task.runtime_by_group_s or {}).get(group.id)
        if runtime_s is None:
            return None
        return runtime_s * (1.0 + (0.0 if group.idle_nodes else group.reserved_fraction))


def group_weight(position: int) -> int:
    """Preferred-affinity weight of the group at ``position`` in the ranking: 100, 50, 25, ... (at least 1)."""
    return max(1, 100 >> position)


@dataclass(frozen=True)
class RankedGroup:
    group: GroupView
    score: float  # 0..100 after normalisation, higher is better
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class PlacementResult:
    ranked: tuple[RankedGroup, ...]  # best first; empty when no group passes the filters
    rejected: tuple[tuple[GroupView, str], ...] = ()
    preference: bool = True  # False when no scorer had anything to say (e.g. an unknown task)
    notes: tuple[str, ...] = field(default_factory=tuple)
    labels: Mapping[str, int] | None = None
    runtime_by_group_s: Mapping[int, float] | None = None  # the task's, when known

    @property
    def preferred_groups(self) -> tuple[int, ...]:
        return tuple(r.group.id for r in self.ranked) if self.preference else ()

    def explain(self) -> str:
        if not self.ranked and self.rejected:
            why = "; ".join(f"group {g.id} {reason}" for g, reason in self.rejected)
            return f"no node group fits: {why}"
        if not self.preference:
            return "no placement preference (" + ("; ".join(self.notes) or "nothing known") + ")"
        order = " > ".join(f"group {r.group.id} ({'; '.join(r.reasons)})" for r in self.ranked)
        labels = " ".join(f"{f}={v}" for f, v in (self.labels or {}).items())
        return f"task labels {labels}: prefer {order}" if labels else f"prefer {order}"


class PlacementEngine:
    def __init__(
        self,
        filters: Sequence[Filter] = (CapabilityFilter(), MemoryFitFilter()),
        scorers: Sequence[tuple[Scorer, float]] = ((TaremaScorer(), 1.0),),
    ) -> None:
        self.filters = tuple(filters)
        self.scorers = tuple(scorers)
        # Whether a task's expected runtime per group must be learnt before placing it.
        self.needs_runtimes = any(isinstance(s, FinishTimeScorer) for s, _ in self.scorers)

    def place(self, task: TaskDemandView, groups: Sequence[GroupView]) -> PlacementResult:
        passing, rejected = [], []
        for group in groups:
            verdicts = [(f.name, f(task, group)) for f in self.filters]
            failed = [f"{name}: {v.reason}" for name, v in verdicts if not v.ok]
            if failed:
                rejected.append((group, "; ".join(failed)))
            else:
                passing.append(group)
        if not passing:
            return PlacementResult(
                (), tuple(rejected), labels=task.labels, runtime_by_group_s=task.runtime_by_group_s
            )
        totals = {g.id: 0.0 for g in passing}
        reasons: dict[int, list[str]] = {g.id: [] for g in passing}
        scored = False
        notes = []
        for scorer, weight in self.scorers:
            raw = {g.id: scorer(task, g) for g in passing}
            if any(v is None for v in raw.values()):
                unknown = getattr(scorer, "unknown", "is not known yet")
                notes.append(f"{scorer.name}: task {task.family!r} {unknown}")
                continue
            scored = True
            values = [float(v) for v in raw.values() if v is not None]
            lo, hi = min(values), max(values)
            for g in passing:
                value = float(raw[g.id])  # type: ignore[arg-type]
                normal = 100.0 if hi == lo else 100.0 * (value - lo) / (hi - lo)
                totals[g.id] += weight * (normal if scorer.higher_is_better else 100.0 - normal)
                reasons[g.id].append(f"{scorer.name} {value:g}")
        for scorer, _ in self.scorers:
            placed = getattr(scorer, "placed", None)
            if placed is not None:
                placed()
        strength = {g.id: sum(g.ranks.values()) for g in passing}
        order = sorted(passing, key=lambda g: (-totals[g.id], -strength[g.id], g.id))
        ranked = tuple(RankedGroup(g, totals[g.id], tuple(reasons[g.id])) for g in order)
        return PlacementResult(
            ranked, tuple(rejected), scored, tuple(notes), task.labels, task.runtime_by_group_s
        )


# Each policy's scorer, made afresh per engine (round-robin remembers where it placed last).
PLACEMENT_POLICIES: Registry[Callable[[], Scorer]] = Registry("placement policy")
PLACEMENT_POLICIES.register("round-robin", RoundRobinScorer)
PLACEMENT_POLICIES.register("fair", ReservedShareScorer)
PLACEMENT_POLICIES.register(
    "fill-nodes", functools.partial(ReservedShareScorer, "fill-nodes", higher_is_better=True)
)
PLACEMENT_POLICIES.register("sjfn", FastestScorer)
PLACEMENT_POLICIES.register("tarema", TaremaScorer)
PLACEMENT_POLICIES.register("finish-time", FinishTimeScorer)
DEFAULT_PLACEMENT = "tarema"  # what pods get: PlacementEngine's scorer unless told otherwise


def engine_for(policy: str) -> PlacementEngine:
    """The placement engine of a named policy: ``tarema`` (ours) or a published baseline."""
    return PlacementEngine(scorers=((PLACEMENT_POLICIES.get(policy)(), 1.0),))
