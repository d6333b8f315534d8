"""Apply: a decision written into a V1Pod (resources, preferred and required node affinity,
labels, annotations, priority class). Airflow's own labels are never touched."""

from __future__ import annotations

import math
from collections.abc import Sequence

from kubernetes.client import models as k8s

from airflow_adaptive.core.model import Decision
from airflow_adaptive.core.modes import ModeChoice
from airflow_adaptive.core.placement import group_weight
from airflow_adaptive.kubernetes.names import (
    BUSY_CORES_ANNOTATION,
    DECISION_ANNOTATION,
    FAMILY_ANNOTATION,
    FAMILY_LABEL,
    GROUP_LABEL,
    MANAGED_LABEL,
    MODE_ANNOTATION,
    MODE_LABEL,
    PLACEMENT_ANNOTATION,
    PRIORITY_ANNOTATION,
    STRATEGY_ANNOTATION,
    STRATEGY_LABEL,
    USER_MEMORY_ANNOTATION,
)
from airflow_adaptive.kubernetes.pods import (
    capability_label,
    find_container,
    has_own_priority,
    label_value,
    user_memory_note,
)
from airflow_adaptive.kubernetes.quantity import format_memory


def _cut(text: str, max_chars: int = 1000) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


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


def apply_decision(
    pod: k8s.V1Pod,
    decision: Decision,
    task_family: str,
    container_name: str | None,
    *,
    managed_by: str,
    choice: ModeChoice | None = None,
) -> k8s.V1Pod:
    """Write the decision into the pod as far as the mode goes (None: enforce): our labels and
    annotations always, resources, node affinity and priority class only when enforced.

    Airflow's own labels are never touched; our label values are made valid.
    """
    metadata = pod.metadata or k8s.V1ObjectMeta()
    pod.metadata = metadata
    metadata.labels = dict(metadata.labels or {})
    metadata.annotations = dict(metadata.annotations or {})
    container = find_container(pod, container_name)
    user = (container.resources if container else None) or k8s.V1ResourceRequirements()
    enforced = choice is None or choice.mode.enforces
    strategy = decision.strategy if enforced else "user"  # what the pod runs with
    metadata.labels[FAMILY_LABEL] = label_value(task_family)
    metadata.labels[STRATEGY_LABEL] = label_value(strategy)
    metadata.labels[MANAGED_LABEL] = managed_by
    metadata.annotations[FAMILY_ANNOTATION] = task_family
    metadata.annotations[STRATEGY_ANNOTATION] = strategy
    metadata.annotations.setdefault(USER_MEMORY_ANNOTATION, user_memory_note(user))
    if decision.busy_cores is not None and math.isfinite(decision.busy_cores) and decision.busy_cores >= 0:
        metadata.annotations[BUSY_CORES_ANNOTATION] = f"{max(0.0, round(decision.busy_cores, 3)):g}"
    if choice is not None:
        metadata.labels[MODE_LABEL] = choice.mode.value
        metadata.annotations[MODE_ANNOTATION] = choice.note()
    if not enforced:
        would = f"{decision.strategy}: {decision.explanation}"
        metadata.annotations[DECISION_ANNOTATION] = _cut(f"keeps the user's resources; would give {would}")
        return pod
    metadata.annotations[DECISION_ANNOTATION] = decision.summary(max_chars=1000)
    if decision.placement:
        metadata.annotations[PLACEMENT_ANNOTATION] = decision.placement[:1000]
    if decision.priority:
        metadata.annotations[PRIORITY_ANNOTATION] = decision.priority[:1000]
    if decision.priority_class and pod.spec and not has_own_priority(pod):
        pod.spec.priority_class_name = decision.priority_class
    apply_placement(pod, decision)
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
