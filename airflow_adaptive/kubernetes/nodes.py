"""Kubernetes nodes: which are schedulable, what they offer, and the labels that carry their group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client import models as k8s

from airflow_adaptive.core.grouping import Grouping
from airflow_adaptive.kubernetes.pods import CAPABILITY_PREFIX, GROUP_LABEL, PREFIX, capability_label
from airflow_adaptive.kubernetes.quantity import parse_memory_bytes

RANK_PREFIX = f"{PREFIX}/rank-"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")


def schedulable(node: k8s.V1Node) -> bool:
    if node.spec and node.spec.unschedulable:
        return False
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def node_facts(node: k8s.V1Node) -> dict[str, Any]:
    """Name, allocatable cores and memory, and capabilities Kubernetes already knows (arch, GPUs)."""
    allocatable = (node.status.allocatable if node.status else None) or {}
    labels = node.metadata.labels or {}
    capabilities = set()
    if labels.get("kubernetes.io/arch"):
        capabilities.add(
            {"amd64": "x86_64", "arm64": "aarch64"}.get(
                labels["kubernetes.io/arch"], labels["kubernetes.io/arch"]
            )
        )
    if any(str(allocatable.get(r, "0")) not in ("0", "") for r in GPU_RESOURCES):
        capabilities.add("gpu")
    cpu = allocatable.get("cpu")
    memory = allocatable.get("memory")
    return {
        "name": node.metadata.name,
        "cores": int(float(str(cpu).rstrip("m")) / (1000 if str(cpu).endswith("m") else 1)) if cpu else None,
        "memory_bytes": parse_memory_bytes(memory) if memory else None,
        "capabilities": sorted(capabilities),
    }


def label_patch(
    current: Mapping[str, str], grouping: Grouping, node: str, capabilities: set[str] | frozenset[str]
) -> dict[str, Any]:
    """A merge patch setting our labels for one node and removing (null) our labels that are stale."""
    wanted: dict[str, str | None] = {}
    group = grouping.group_of(node)
    if group is not None:
        wanted[GROUP_LABEL] = str(group.id)
        wanted.update(
            {RANK_PREFIX + feature.replace("_", "-"): str(rank) for feature, rank in group.ranks.items()}
        )
    wanted.update({capability_label(c): "true" for c in capabilities})
    ours = [k for k in current if k == GROUP_LABEL or k.startswith((RANK_PREFIX, CAPABILITY_PREFIX))]
    wanted.update({k: None for k in ours if k not in wanted})
    return {"metadata": {"labels": wanted}}
