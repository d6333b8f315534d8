"""Profiled nodes as the store keeps them, and the node groups placement reads from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .grouping import NodeProfile, task_feature_ranks


@dataclass(frozen=True)
class StoredNode:
    """A node's profile and the group it was put in, when."""

    profile: NodeProfile
    group_id: int | None = None
    group_ranks: Mapping[str, int] = field(default_factory=dict)  # benchmark -> rank (1 = weakest)
    profiled_at: datetime | None = None

    @property
    def name(self) -> str:
        return self.profile.node


@dataclass(frozen=True)
class GroupSummary:
    """One node group: members, ranks per benchmark and per task feature, capabilities, capacity."""

    id: int
    members: tuple[str, ...]
    ranks: Mapping[str, int]
    task_ranks: Mapping[str, int]
    capabilities: frozenset[str]
    cores: int
    memory_bytes: int
    largest_memory_bytes: int | None


def summarize_groups(nodes: Sequence[StoredNode]) -> list[GroupSummary]:
    """Per group (by id): members, offered capabilities and summed capacity of the grouped nodes."""
    by_group: dict[int, list[StoredNode]] = {}
    for n in nodes:
        if n.group_id is not None:
            by_group.setdefault(n.group_id, []).append(n)
    summaries = []
    for group_id in sorted(by_group):
        members = by_group[group_id]
        memories = [n.profile.memory_bytes for n in members if n.profile.memory_bytes]
        ranks = dict(members[0].group_ranks)
        summaries.append(
            GroupSummary(
                group_id,
                tuple(n.name for n in members),
                ranks,
                task_feature_ranks(ranks),
                frozenset().union(*(n.profile.capabilities for n in members)),
                sum(n.profile.cores or 0 for n in members),
                sum(memories),
                max(memories) if memories else None,
            )
        )
    return summaries
