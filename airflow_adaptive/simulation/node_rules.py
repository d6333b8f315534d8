"""How each placement policy picks a node inside the node group it chose."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .cluster import SimNode
from .workload import SimTask


class NodeState(Protocol):
    spec: SimNode
    position: int
    group: int
    free_cores: float


NodeRule = Callable[[list[Any], SimTask], Any]  # the engine's nodes in, one of them out


def node_rules(dominant: Mapping[str, str], node_count: int) -> dict[str, NodeRule]:
    """Per placement: least reserved (fair, Tarema), first fit, fastest for the task's dominant
    feature (SJFN), or rotating through the group (round-robin)."""
    rotation: dict[int, int] = {}

    def least_reserved(nodes: list[Any], task: SimTask) -> Any:
        return min(nodes, key=lambda n: (1.0 - n.free_cores / n.spec.cores, n.position))

    def first_fit(nodes: list[Any], task: SimTask) -> Any:
        return min(nodes, key=lambda n: n.position)

    def fastest(nodes: list[Any], task: SimTask) -> Any:
        feature = dominant[task.family]
        return min(
            nodes, key=lambda n: (-n.spec.speed[feature], 1.0 - n.free_cores / n.spec.cores, n.position)
        )

    def rotate(nodes: list[Any], task: SimTask) -> Any:
        group = nodes[0].group
        start = rotation.get(group, 0)
        chosen = min(nodes, key=lambda n: ((n.position - start) % node_count, n.position))
        rotation[group] = chosen.position + 1
        return chosen

    return {
        "round-robin": rotate,
        "fair": least_reserved,
        "fill-nodes": first_fit,
        "sjfn": fastest,
        "tarema": least_reserved,
        "tarema-idle": least_reserved,
        "finish-time": least_reserved,
        "finish-time-live": least_reserved,
    }
