"""``pod_mutation_hook`` for pods the operator did not build (plain KPO, KubernetesExecutor workers).

Registered through the ``airflow.policy`` entry point. Off unless
``[adaptive] mutate_all_pods`` is true; a pod labelled
``adaptive.airflow.io/opt-out: "true"`` is never changed. It never raises.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Any

from airflow.policies import hookimpl

if TYPE_CHECKING:
    from kubernetes.client import models as k8s

    from airflow_adaptive.core.model import TaskKey

# Airflow loads this module while it initialises itself: everything else is imported lazily.
log = logging.getLogger(__name__)
BASE_CONTAINER = "base"


def airflow_task_of(pod: k8s.V1Pod) -> tuple[str, TaskKey, bool] | None:
    """(task family, key, run_id_is_label) of a pod Airflow made, or None for other pods.

    Executor pods carry the raw ids in annotations; KPO pods only sanitised labels.
    """
    from airflow_adaptive.core.model import TaskKey
    from airflow_adaptive.kubernetes.pods import FAMILY_ANNOTATION

    meta = pod.metadata
    labels = (meta.labels if meta else None) or {}
    annotations = (meta.annotations if meta else None) or {}
    source = annotations if "dag_id" in annotations and "task_id" in annotations else labels
    if "dag_id" not in source or "task_id" not in source:
        return None
    try:
        try_number = int(source.get("try_number") or labels.get("try_number") or 1)
        map_index = int(source.get("map_index") or labels.get("map_index") or -1)
    except ValueError:
        return None
    run_id = source.get("run_id") or labels.get("run_id") or ""
    key = TaskKey(source["dag_id"], source["task_id"], run_id, map_index, try_number)
    family = annotations.get(FAMILY_ANNOTATION) or key.default_family
    return family, key, source is labels


def mutate(pod: k8s.V1Pod) -> None:
    from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value

    from airflow_adaptive.advisor import Advisor, PodAsk
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.apply import apply_decision
    from airflow_adaptive.kubernetes.pods import (
        MANAGED_LABEL,
        OPT_OUT_LABEL,
        cpu_limit_of,
        find_container,
        memory_of,
        tool_of,
    )
    from airflow_adaptive.kubernetes.priority_classes import priority_class_for

    settings = get_settings()
    if not settings.mutate_all_pods:
        return
    labels = (pod.metadata.labels if pod.metadata else None) or {}
    if labels.get(OPT_OUT_LABEL, "").lower() == "true" or MANAGED_LABEL in labels:
        return
    found = airflow_task_of(pod)
    if found is None:
        return
    family, key, run_id_is_label = found
    container = find_container(pod, BASE_CONTAINER)
    resources = container.resources if container else None
    user = memory_of(resources, what=f"pod {pod.metadata.name} memory")
    advisor = Advisor(settings)
    previous = advisor.memory.previous_try(key, make_safe_label_value if run_id_is_label else None)
    image, program = (
        tool_of(container.image, container.command, container.args) if container else (None, None)
    )
    ask = PodAsk(
        family,
        user,
        None,
        previous_attempt=previous,
        cpu_limit_millicores=cpu_limit_of(resources),
        image=image,
        program=program,
    )
    enabled = settings.priority_classes
    decision = advisor.pod_decision(
        ask, lambda choice: priority_class_for(choice, pod, _api_client, enabled=enabled)
    )
    apply_decision(pod, decision, family, BASE_CONTAINER, managed_by="policy")


def _api_client() -> Any:
    """The Kubernetes client of this process, configured as the KubernetesExecutor's."""
    from airflow.providers.cncf.kubernetes.kube_client import get_kube_client

    return get_kube_client().api_client


@hookimpl
def pod_mutation_hook(pod: Any) -> None:
    """Apply the adaptive decision; on any failure leave the pod exactly as it was."""
    snapshot = copy.deepcopy(pod)
    try:
        mutate(pod)
    except Exception:
        log.exception("airflow-adaptive: pod_mutation_hook failed; the pod is left as it was")
        for attr in pod.attribute_map:
            setattr(pod, attr, getattr(snapshot, attr))
