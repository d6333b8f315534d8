"""The simulator's nodes and node groups as placement sees them, kept current as pods start and end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from airflow_adaptive.core.placement import GroupView, NodeLoad

from .cluster import SimNode


@dataclass
class NodeState:
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

    def __init__(self, ranks: Mapping[int, Mapping[str, int]]) -> None:
        self.ranks = ranks
        self.views: dict[int, GroupView] = {}
        self.cores: dict[int, float] = {}
        self.idle: dict[int, int] = {}  # active members running nothing
        self.reserved: dict[int, float] = {}  # cores requested now

    def refresh(self, nodes: Sequence[NodeState]) -> None:
        """Group views without their load; rebuilt when a node joins."""
        self.views, self.cores = {}, {}
        for gid in sorted(self.ranks):
            members = [n for n in nodes if n.group == gid and n.active]
            if members:
                caps = frozenset().union(*(n.spec.capabilities for n in members))
                largest = max(n.spec.memory_bytes for n in members)
                names = tuple(n.spec.name for n in members)
                self.views[gid] = GroupView(gid, self.ranks[gid], caps, largest, names)
                self.cores[gid] = sum(n.spec.cores for n in members)
                self.idle[gid] = sum(1 for n in members if not n.running)

    def started(self, node: NodeState, cores: float) -> None:
        """Before the attempt joins ``node.running``."""
        self.reserved[node.group] = self.reserved.get(node.group, 0.0) + cores
        if not node.running:
            self.idle[node.group] -= 1

    def ended(self, node: NodeState, cores: float) -> None:
        """After the attempt left ``node.running``."""
        self.reserved[node.group] -= cores
        if not node.running:
            self.idle[node.group] += 1

    def now(self, nodes: Sequence[NodeState], *, blind: bool, live: bool, by_node: bool) -> list[GroupView]:
        """The views as a policy is told them: the reserved share unless blind, idle members and each
        node's load only with live load (each node's only when the policy weighs it)."""
        return [
            replace(
                view,
                reserved_fraction=0.0 if blind else self.reserved.get(gid, 0.0) / self.cores[gid],
                idle_nodes=self.idle[gid] if live else 0,
                nodes=tuple(n.load() for n in nodes if n.group == gid and n.active) if by_node else (),
            )
            for gid, view in self.views.items()
        ]
