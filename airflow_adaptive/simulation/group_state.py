"""The simulator's nodes and node groups as placement sees them, kept current as pods start and end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from airflow_adaptive.core.placement import GroupView, NodeLoad

from .cluster import SimNode


@dataclass
class SimNodeState:
    spec: SimNode
    position: int  # in the (shuffled) node list
    group: int
    free_cores: float
    free_memory_bytes: int
    active: bool = False
    running: dict[int, tuple[str, float]] = field(default_factory=dict)  # attempt -> (dominant, cores used)
    expected_busy: dict[int, float] = field(
        default_factory=dict
    )  # attempt -> cores its pod says it keeps busy

    def load(self) -> NodeLoad:
        """What live load reads off this node: cores, cores requested, cores its pods expect to keep busy."""
        cores = self.spec.cores
        return NodeLoad(cores, cores - self.free_cores, sum(self.expected_busy.values()))


class GroupState:
    """Per node group: its view (ranks, capabilities, members), cores, idle members, reserved cores."""

    def __init__(self, ranks: Mapping[int, Mapping[str, int]], live_load_ttl_s: float = 0.0) -> None:
        self.ranks = ranks
        self.live_load_ttl_s = live_load_ttl_s
        self._listed: tuple[float, list[GroupView]] | None = None  # the live view: when, what
        self.views: dict[int, GroupView] = {}
        self.cores: dict[int, float] = {}
        self.idle: dict[int, int] = {}  # active members running nothing
        self.reserved: dict[int, float] = {}  # cores requested now

    def refresh(self, nodes: Sequence[SimNodeState]) -> None:
        """Group views without their load; rebuilt when a node joins."""
        self.views, self.cores, self._listed = {}, {}, None
        for gid in sorted(self.ranks):
            members = [n for n in nodes if n.group == gid and n.active]
            if members:
                caps = frozenset().union(*(n.spec.capabilities for n in members))
                largest = max(n.spec.memory_bytes for n in members)
                names = tuple(n.spec.name for n in members)
                self.views[gid] = GroupView(gid, self.ranks[gid], caps, largest, names)
                self.cores[gid] = sum(n.spec.cores for n in members)
                self.idle[gid] = sum(1 for n in members if not n.running)

    def started(self, node: SimNodeState, cores: float) -> None:
        """Before the attempt joins ``node.running``."""
        self.reserved[node.group] = self.reserved.get(node.group, 0.0) + cores
        if not node.running:
            self.idle[node.group] -= 1

    def ended(self, node: SimNodeState, cores: float) -> None:
        """After the attempt left ``node.running``."""
        self.reserved[node.group] -= cores
        if not node.running:
            self.idle[node.group] += 1

    def now(
        self, nodes: Sequence[SimNodeState], at_s: float, *, blind: bool, live: bool, by_node: bool
    ) -> list[GroupView]:
        """The views as a policy is told them: the reserved share unless blind; with live load, the
        idle members and each node's load (when the policy weighs it) as listed at most
        ``live_load_ttl_s`` ago, the reserved share with them."""
        if live and self._listed is not None and at_s < self._listed[0] + self.live_load_ttl_s:
            return self._listed[1]
        views = [
            replace(
                view,
                reserved_fraction=0.0 if blind else self.reserved.get(gid, 0.0) / self.cores[gid],
                idle_nodes=self.idle[gid] if live else 0,
                nodes=tuple(n.load() for n in nodes if n.group == gid and n.active) if by_node else None,
            )
            for gid, view in self.views.items()
        ]
        if live:
            self._listed = (at_s, views)
        return views
