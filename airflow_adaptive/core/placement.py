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
from .units import MIB, format_bytes


@dataclass(frozen=True)
class NodeLoad:
    """One node as live load saw it: its allocatable cores, the cores its unfinished pods request, and
    the cores they are expected to keep busy (each pod's family's recorded mean, else its request)."""

    cores: float
    requested_cores: float = 0.0
    busy_cores: float = 0.0


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
    nodes: tuple[NodeLoad, ...] | None = None  # its schedulable members' load (None: no live load)


@dataclass(frozen=True)
class GroupLoad:
    """What runs on a group now, when the cluster was asked (live load)."""

    idle_nodes: int = 0  # schedulable members running nothing but per-node pods
    reserved_fraction: float = 0.0  # CPU requested by unfinished pods over the members' allocatable cores
    nodes: tuple[NodeLoad, ...] = ()  # each schedulable member's load


@dataclass(frozen=True)
class TaskDemandView:
    family: str
    labels: Mapping[str, int] | None
    memory_request_bytes: int | None = None
    required_capabilities: frozenset[str] = frozenset()
    runtime_by_group_s: Mapping[int, float] | None = None  # expected runtime per group (core/runtimes.py)
    request_cores: float = 0.0  # the pod's CPU request
    busy_cores: float | None = None  # the family's recorded mean cores busy (None: unknown)


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
class SchedulableFilter:
    """With live load, a group with no schedulable member now (all cordoned, not ready, or gone)."""

    name: str = "schedulable"

    def __call__(self, task: TaskDemandView, group: GroupView) -> Verdict:
        if group.nodes is not None and not group.nodes:
            return Verdict(False, "has no schedulable node now")
        return Verdict(True)


@dataclass(frozen=True)
class MemoryFitFilter:
    name: str = "memory-fit"

    def __call__(self, task: TaskDemandView, group: GroupView) -> Verdict:
        limit, need = group.largest_allocatable_memory_bytes, task.memory_request_bytes
        if limit is None or need is None or need <= limit:
            return Verdict(True)
        said = format_bytes(need), format_bytes(limit)
        if said[0] == said[1]:  # 16 GiB + 1 MiB against 16 GiB: say the difference
            said = f"{need / MIB:,.0f} MiB", f"{limit / MIB:,.0f} MiB"
        return Verdict(False, f"no node can allocate {said[0]} (largest {said[1]})")


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


def shared_cpu_slowdown(busy_cores: float, cores: float) -> float:
    """Cores kept busy over the node's cores, when above 1: how much slower each pod there runs."""
    return max(1.0, busy_cores / cores)


def cpu_slowdown(task: TaskDemandView, nodes: Sequence[NodeLoad] | None) -> float:
    """How much slower the task runs on the node kube-scheduler would likely give it (the least
    requested one its CPU request fits; none fits: the least requested, where it would wait) than
    alone. Kubernetes packs by requests, so a node whose pods use more cores than they request
    shares them. No live load (None) or no readable cores: 1."""
    usable = [n for n in nodes or () if n.cores > 0]
    fitting = [n for n in usable if n.cores - n.requested_cores >= task.request_cores - 1e-9] or usable
    if not fitting:
        return 1.0
    node = min(fitting, key=lambda n: n.requested_cores / n.cores)
    own = task.busy_cores if task.busy_cores is not None else task.request_cores
    return shared_cpu_slowdown(node.busy_cores + own, node.cores)


@dataclass(frozen=True)
class FinishTimeScorer:
    """The group where the task is expected to finish first: its expected runtime there
    (``core/runtimes.py``), stretched by the CPU sharing it would meet (``cpu_slowdown``, with live
    load). None when the family's runtime is unknown: tarema's labels decide (``engine_for``)."""

    name: str = "finish-time"
    higher_is_better: bool = False
    unknown: str = "has no recorded runtime yet"

    def __call__(self, task: TaskDemandView, group: GroupView) -> float | None:
        runtime_s = (task.runtime_by_group_s or {}).get(group.id)
        if runtime_s is None:
            return None
        return runtime_s * cpu_slowdown(task, group.nodes)


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
    busy_cores: float | None = None  # the task's family's recorded mean cores busy, when known

    @property
    def preferred_groups(self) -> tuple[int, ...]:
        return tuple(r.group.id for r in self.ranked) if self.preference else ()

    def explain(self, with_labels: bool = True) -> str:
        """Why this order (``with_labels``: led by the task's labels, which a page may show apart)."""
        if not self.ranked and self.rejected:
            why = "; ".join(f"group {g.id} {reason}" for g, reason in self.rejected)
            return f"no node group fits: {why}"
        if not self.preference:
            return "no placement preference (" + ("; ".join(self.notes) or "nothing known") + ")"
        order = " > ".join(f"group {r.group.id} ({'; '.join(r.reasons)})" for r in self.ranked)
        labels = " ".join(f"{f}={v}" for f, v in (self.labels or {}).items()) if with_labels else ""
        text = f"task labels {labels}: prefer {order}" if labels else f"prefer {order}"
        return text + (f" ({'; '.join(self.notes)})" if self.notes else "")


class PlacementEngine:
    """Filters, then scorers; ``PlacementEngine()`` alone is tarema's rule. Policies by name, the
    default included: ``engine_for``."""

    def __init__(
        self,
        filters: Sequence[Filter] = (CapabilityFilter(), MemoryFitFilter(), SchedulableFilter()),
        scorers: Sequence[tuple[Scorer, float]] = ((TaremaScorer(), 1.0),),
        fallback: Scorer | None = None,
    ) -> None:
        self.filters = tuple(filters)
        self.scorers = tuple(scorers)
        self.fallback = fallback  # scores alone when none of ``scorers`` knows the task
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
                (),
                tuple(rejected),
                labels=task.labels,
                runtime_by_group_s=task.runtime_by_group_s,
                busy_cores=task.busy_cores,
            )
        totals, reasons, notes = _scores(self.scorers, task, passing)
        if not reasons and self.fallback is not None:
            totals, reasons, unknown = _scores(((self.fallback, 1.0),), task, passing)
            notes += unknown
        for scorer, _ in self.scorers:
            placed = getattr(scorer, "placed", None)
            if placed is not None:
                placed()
        strength = {g.id: sum(g.ranks.values()) for g in passing}
        order = sorted(passing, key=lambda g: (-totals[g.id], -strength[g.id], g.id))
        ranked = tuple(RankedGroup(g, totals[g.id], tuple(reasons.get(g.id, ()))) for g in order)
        return PlacementResult(
            ranked,
            tuple(rejected),
            bool(reasons),
            tuple(notes),
            task.labels,
            task.runtime_by_group_s,
            task.busy_cores,
        )


def _scores(
    scorers: Sequence[tuple[Scorer, float]], task: TaskDemandView, groups: Sequence[GroupView]
) -> tuple[dict[int, float], dict[int, list[str]], list[str]]:
    """Each group's weighted, normalised total (0..100 per scorer) and its reasons; a scorer that
    cannot score every group is left out with a note. No reasons: no scorer knew the task."""
    totals = {g.id: 0.0 for g in groups}
    reasons: dict[int, list[str]] = {}
    notes = []
    for scorer, weight in scorers:
        raw = {g.id: scorer(task, g) for g in groups}
        if any(v is None for v in raw.values()):
            unknown = getattr(scorer, "unknown", "is not known yet")
            notes.append(f"{scorer.name}: task {task.family!r} {unknown}")
            continue
        values = [float(v) for v in raw.values() if v is not None]
        lo, hi = min(values), max(values)
        for g in groups:
            value = float(raw[g.id])  # type: ignore[arg-type]
            normal = 100.0 if hi == lo else 100.0 * (value - lo) / (hi - lo)
            totals[g.id] += weight * (normal if scorer.higher_is_better else 100.0 - normal)
            shown = f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"  # 291.7, 12346: no exponent
            reasons.setdefault(g.id, []).append(f"{scorer.name} {shown}")
    return totals, reasons, notes


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
DEFAULT_PLACEMENT = "finish-time"  # what pods get unless placement_policy says otherwise


def engine_for(policy: str) -> PlacementEngine:
    """The placement engine of a named policy: ours or a published baseline. Finish-time places a
    family whose runtime is not known yet (no run on a profiled node) by tarema's labels, which come
    from any recorded attempt."""
    scorer = PLACEMENT_POLICIES.get(policy)()
    fallback = TaremaScorer() if isinstance(scorer, FinishTimeScorer) else None
    return PlacementEngine(scorers=((scorer, 1.0),), fallback=fallback)
