"""Kubernetes nodes: which are schedulable, what they offer, and the labels that carry their group."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kubernetes.client import models as k8s

from airflow_adaptive.core.grouping import Grouping
from airflow_adaptive.core.placement import GroupLoad, NodeLoad
from airflow_adaptive.exceptions import InvalidQuantityError
from airflow_adaptive.kubernetes.names import BUSY_CORES_ANNOTATION, CAPABILITY_PREFIX, GROUP_LABEL, PREFIX
from airflow_adaptive.kubernetes.pods import capability_label
from airflow_adaptive.kubernetes.quantity import parse_cpu_millicores, parse_memory_bytes

RANK_PREFIX = f"{PREFIX}/rank-"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")


def schedulable(node: k8s.V1Node) -> bool:
    if node.spec and node.spec.unschedulable:
        return False
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


# Pods that run on every node and so never make one busy: DaemonSet members and static (mirror) pods.
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def _per_node_pod(pod: k8s.V1Pod) -> bool:
    owners = pod.metadata.owner_references or []
    return any(o.kind == "DaemonSet" for o in owners) or MIRROR_ANNOTATION in (pod.metadata.annotations or {})


def group_loads(core_v1: Any) -> dict[int, GroupLoad]:
    """Per node group: its schedulable nodes running nothing but per-node (DaemonSet, static) pods,
    the share of their allocatable CPU that unfinished pods request, and each node's load.

    Live load for placement: two list calls (labelled nodes, unfinished pods of every namespace).
    """
    nodes = core_v1.list_node(label_selector=GROUP_LABEL).items
    pods = core_v1.list_pod_for_all_namespaces(
        field_selector="status.phase!=Succeeded,status.phase!=Failed"
    ).items
    busy = {p.spec.node_name for p in pods if p.spec and p.spec.node_name and not _per_node_pod(p)}
    requested: dict[str, float] = {}
    expected: dict[str, float] = {}
    for pod in pods:
        if pod.spec and pod.spec.node_name:
            name, cores_requested = pod.spec.node_name, _cpu_request(pod)
            requested[name] = requested.get(name, 0.0) + cores_requested
            expected[name] = expected.get(name, 0.0) + _busy_cores(pod, cores_requested)
    idle: dict[int, int] = {}
    members: dict[int, list[NodeLoad]] = {}
    for node in nodes:
        try:
            group = int((node.metadata.labels or {})[GROUP_LABEL])
        except (KeyError, ValueError):
            continue  # not one of our groups (a label someone else wrote)
        ready = schedulable(node)
        idle[group] = idle.get(group, 0) + (ready and node.metadata.name not in busy)
        if ready:
            name = node.metadata.name
            load = NodeLoad(_allocatable_cores(node), requested.get(name, 0.0), expected.get(name, 0.0))
            members.setdefault(group, []).append(load)
    return {g: _group_load(n, members.get(g, [])) for g, n in idle.items()}


def _group_load(idle_nodes: int, nodes: list[NodeLoad]) -> GroupLoad:
    cores = sum(n.cores for n in nodes)
    reserved = min(1.0, sum(n.requested_cores for n in nodes) / cores) if cores else 0.0
    return GroupLoad(idle_nodes, reserved, tuple(nodes))


def _busy_cores(pod: k8s.V1Pod, requested_cores: float) -> float:
    """Cores the pod is expected to keep busy: what its family's history says (our annotation),
    else its request."""
    try:
        value = float((pod.metadata.annotations or {})[BUSY_CORES_ANNOTATION])
    except (KeyError, ValueError, TypeError):
        return requested_cores
    return value if math.isfinite(value) and value >= 0 else requested_cores


def _cores(value: object) -> float:
    """Cores of a CPU quantity, fractions kept ("3920m" is 3.92); 0 when absent or unreadable."""
    try:
        return parse_cpu_millicores(value) / 1000 if value is not None else 0.0
    except InvalidQuantityError:
        return 0.0


def _allocatable_cores(node: k8s.V1Node) -> float:
    return _cores(((node.status.allocatable if node.status else None) or {}).get("cpu"))


def _cpu_request(pod: k8s.V1Pod) -> float:
    """Cores a pod requests: its containers' requests."""
    return sum(
        _cores(((c.resources.requests if c.resources else None) or {}).get("cpu"))
        for c in pod.spec.containers or []
    )


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
        "cores": int(_cores(cpu)) if cpu else None,  # whole cores, as the profiling DAG sizes its runs
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
