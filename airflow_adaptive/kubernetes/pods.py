"""Reading and changing V1Pod objects: user resources in, decisions out, observations back."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone

from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value
from kubernetes.client import models as k8s

from airflow_adaptive.core.model import (
    Decision,
    ExitReason,
    MemoryRequest,
    Observation,
    PeakKind,
    TaskKey,
    Usage,
)
from airflow_adaptive.core.placement import group_weight
from airflow_adaptive.core.telemetry import parse_usage
from airflow_adaptive.exceptions import InvalidCapabilityError, InvalidQuantityError
from airflow_adaptive.kubernetes.quantity import format_memory, parse_cpu_millicores, parse_memory_bytes

PREFIX = "adaptive.airflow.io"
FAMILY_LABEL = f"{PREFIX}/task-family"
STRATEGY_LABEL = f"{PREFIX}/strategy"
OPT_OUT_LABEL = f"{PREFIX}/opt-out"
MANAGED_LABEL = f"{PREFIX}/managed-by"
DECISION_ANNOTATION = f"{PREFIX}/decision"
PLACEMENT_ANNOTATION = f"{PREFIX}/placement"
PRIORITY_ANNOTATION = f"{PREFIX}/priority"
GROUP_LABEL = f"{PREFIX}/group"
CAPABILITY_PREFIX = "capability.adaptive.airflow.io/"
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def label_value(text: str) -> str:
    """A valid label value for any text (empty, at most 63 characters, alphanumeric at both ends).

    Airflow's own ``make_safe_label_value`` when that is valid; otherwise the text's label-safe
    characters (a readable prefix) and a hash of the whole text, so different texts stay apart.
    """
    safe = make_safe_label_value(text)
    if _NAME.match(safe) or safe == "":
        return safe
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    readable = re.sub(r"[^-A-Za-z0-9_.]", "", text).strip("-_.")[:52].rstrip("-_.")
    return f"{readable}-{digest}" if readable else f"h{digest}"


def has_own_priority(pod: k8s.V1Pod) -> bool:
    """Whether the pod names a priority class or a fixed priority: the user's choice wins."""
    spec = pod.spec
    return spec is not None and bool(spec.priority_class_name or spec.priority is not None)


def capability_label(capability: str) -> str:
    """The node label key that offers a capability; the name must be a valid label name."""
    if not isinstance(capability, str) or not _NAME.match(capability):
        raise InvalidCapabilityError(
            f"capability {capability!r} is not a valid label name (letters, digits, '-', '_', '.'; at most 63)"
        )
    return CAPABILITY_PREFIX + capability


def node_affinity_of(pod: k8s.V1Pod) -> k8s.V1NodeAffinity:
    """The pod's node affinity, created empty where it has none (the user's own terms stay)."""
    spec = pod.spec
    spec.affinity = spec.affinity or k8s.V1Affinity()
    spec.affinity.node_affinity = spec.affinity.node_affinity or k8s.V1NodeAffinity()
    return spec.affinity.node_affinity


def prefer(pod: k8s.V1Pod, label: str, weighted: Sequence[tuple[str, int]]) -> None:
    """A preferred (never required) node-affinity term ``label In [value]`` per (value, weight)."""
    if not weighted:
        return
    node_affinity = node_affinity_of(pod)
    terms = list(node_affinity.preferred_during_scheduling_ignored_during_execution or [])
    for value, weight in weighted:
        requirement = k8s.V1NodeSelectorRequirement(key=label, operator="In", values=[value])
        term = k8s.V1NodeSelectorTerm(match_expressions=[requirement])
        terms.append(k8s.V1PreferredSchedulingTerm(weight=weight, preference=term))
    node_affinity.preferred_during_scheduling_ignored_during_execution = terms


def apply_placement(pod: k8s.V1Pod, decision: Decision) -> None:
    """Preferred affinity to the decided groups (decreasing weights) and required affinity to capabilities.

    A user's required node terms are ORed by Kubernetes, so the capabilities join every one of them.
    """
    groups = decision.preferred_groups
    prefer(pod, GROUP_LABEL, [(str(group), group_weight(position)) for position, group in enumerate(groups)])
    if decision.required_capabilities:
        node_affinity = node_affinity_of(pod)
        needs = [
            k8s.V1NodeSelectorRequirement(key=capability_label(c), operator="In", values=["true"])
            for c in sorted(decision.required_capabilities)
        ]
        required = node_affinity.required_during_scheduling_ignored_during_execution
        if required is None or not required.node_selector_terms:
            node_affinity.required_during_scheduling_ignored_during_execution = k8s.V1NodeSelector(
                node_selector_terms=[k8s.V1NodeSelectorTerm(match_expressions=needs)]
            )
        else:
            for term in required.node_selector_terms:
                term.match_expressions = [*(term.match_expressions or []), *needs]


STRATEGY_ANNOTATION = f"{PREFIX}/strategy"
FAMILY_ANNOTATION = f"{PREFIX}/task-family"


def find_container(pod: k8s.V1Pod, name: str | None) -> k8s.V1Container | None:
    containers = (pod.spec.containers if pod.spec else None) or []
    if name is not None:
        for container in containers:
            if container.name == name:
                return container
    return containers[0] if containers else None


def memory_of(resources: k8s.V1ResourceRequirements | dict | None, *, what: str = "memory") -> MemoryRequest:
    """The memory request and limit in bytes; bad quantities raise InvalidQuantityError."""
    if resources is None:
        return MemoryRequest()
    if isinstance(resources, dict):
        requests, limits = resources.get("requests"), resources.get("limits")
    else:
        requests, limits = resources.requests, resources.limits
    req = (requests or {}).get("memory")
    lim = (limits or {}).get("memory")
    return MemoryRequest(
        parse_memory_bytes(req, what=f"{what} request") if req is not None else None,
        parse_memory_bytes(lim, what=f"{what} limit") if lim is not None else None,
    )


def cpu_limit_of(resources: k8s.V1ResourceRequirements | dict | None) -> int | None:
    """The container's CPU limit in millicores (None: none set, or not a quantity)."""
    limits = (
        resources.get("limits") if isinstance(resources, dict) else resources.limits if resources else None
    )
    value = (limits or {}).get("cpu")
    try:
        return parse_cpu_millicores(value) if value is not None else None
    except InvalidQuantityError:
        return None  # the API server refuses the pod for it; the request then stays the user's


def apply_decision(
    pod: k8s.V1Pod, decision: Decision, task_family: str, container_name: str | None, *, managed_by: str
) -> k8s.V1Pod:
    """Write the decision into the pod: resources, our labels, a decision annotation.

    Airflow's own labels are never touched; our label values are made valid.
    """
    metadata = pod.metadata or k8s.V1ObjectMeta()
    pod.metadata = metadata
    metadata.labels = dict(metadata.labels or {})
    metadata.annotations = dict(metadata.annotations or {})
    metadata.labels[FAMILY_LABEL] = label_value(task_family)
    metadata.labels[STRATEGY_LABEL] = label_value(decision.strategy)
    metadata.labels[MANAGED_LABEL] = managed_by
    metadata.annotations[FAMILY_ANNOTATION] = task_family
    metadata.annotations[STRATEGY_ANNOTATION] = decision.strategy
    metadata.annotations[DECISION_ANNOTATION] = decision.summary(max_chars=1000)
    if decision.placement:
        metadata.annotations[PLACEMENT_ANNOTATION] = decision.placement[:1000]
    if decision.priority:
        metadata.annotations[PRIORITY_ANNOTATION] = decision.priority[:1000]
    if decision.priority_class and pod.spec and not has_own_priority(pod):
        pod.spec.priority_class_name = decision.priority_class
    apply_placement(pod, decision)
    container = find_container(pod, container_name)
    if container is None or not decision.adaptive:
        return pod
    resources = container.resources or k8s.V1ResourceRequirements()
    requests = dict(resources.requests or {})
    limits = dict(resources.limits or {})
    if decision.memory_request_bytes is not None:
        requests["memory"] = format_memory(decision.memory_request_bytes)
    if decision.memory_limit_bytes is not None:
        limits["memory"] = format_memory(decision.memory_limit_bytes)
    if decision.cpu_request_millicores is not None:
        requests["cpu"] = f"{decision.cpu_request_millicores}m"
    container.resources = k8s.V1ResourceRequirements(
        requests=requests or None, limits=limits or None, claims=resources.claims
    )
    return pod


def terminated_state(
    pod: k8s.V1Pod, container_name: str | None, *, init: bool = False
) -> k8s.V1ContainerStateTerminated | None:
    """How the named container (an init container with ``init``) ended; None while it has not."""
    status = pod.status
    statuses = (status.init_container_statuses if init else status.container_statuses) if status else None
    for status in statuses or []:
        if status.name == container_name and status.state and status.state.terminated:
            return status.state.terminated
    return None


def observe_pod(
    remote_pod: k8s.V1Pod,
    container_name: str,
    key: TaskKey,
    task_family: str,
    *,
    input_size_bytes: int | None = None,
    sampled_peak_bytes: int | None = None,
) -> Observation:
    """The attempt as the final pod shows it.

    OOM kills are censored (the peak was at least the limit); with no wrapper output,
    a metrics-API peak is kept as a lower bound.
    """
    terminated = terminated_state(remote_pod, container_name)
    phase = remote_pod.status.phase if remote_pod.status else None
    reason = ExitReason.parse(terminated.reason if terminated else None)
    if terminated is None and remote_pod.status and remote_pod.status.reason == "Evicted":
        reason = ExitReason.EVICTED
    elif terminated is None and phase == "Failed":
        reason = ExitReason.ERROR
    elif terminated is None and phase == "Pending":
        reason = ExitReason.UNSCHEDULABLE
    usage = parse_usage(terminated.message if terminated else None) or Usage()
    if reason is ExitReason.OOM_KILLED:
        usage = replace(usage, peak_memory_bytes=None, peak_kind=PeakKind.CENSORED)
    elif usage.peak_kind is PeakKind.NONE and sampled_peak_bytes:
        usage = replace(usage, peak_memory_bytes=sampled_peak_bytes, peak_kind=PeakKind.SAMPLED)
    if usage.wall_seconds is None and terminated is not None:
        usage = replace(usage, wall_seconds=_wall_seconds(terminated))
    annotations = (remote_pod.metadata.annotations if remote_pod.metadata else None) or {}
    container = find_container(remote_pod, container_name)
    memory = memory_of(container.resources if container else None)
    return Observation(
        key=key,
        task_family=task_family,
        usage=usage,
        exit_reason=reason,
        exit_code=terminated.exit_code if terminated else None,
        memory_request_bytes=memory.request_bytes,
        memory_limit_bytes=memory.limit_bytes,
        input_size_bytes=input_size_bytes,
        node_name=remote_pod.spec.node_name if remote_pod.spec else None,
        finished_at=(terminated.finished_at if terminated and terminated.finished_at else None)
        or datetime.now(timezone.utc),
        strategy=annotations.get(STRATEGY_ANNOTATION),
        explanation=annotations.get(DECISION_ANNOTATION),
    )


def _wall_seconds(terminated: k8s.V1ContainerStateTerminated | None) -> float | None:
    if terminated is None or not terminated.started_at or not terminated.finished_at:
        return None
    return max(0.0, (terminated.finished_at - terminated.started_at).total_seconds())
