"""Least-finished-first in kube-scheduler's pending queue: the ``adaptive-lff-*`` PriorityClasses.

When the cluster is full, kube-scheduler tries pending pods in priority order, so a pod of a
family the predictors know least gets a higher class. Every class has ``preemptionPolicy: Never``:
it orders the queue and never evicts a running pod. A pod only gets a class that exists in the
cluster (the API server rejects a pod naming a missing one), checked with one list call per
process every ``CHECK_SECONDS``; when the check fails the pod gets no class and is created.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client import models as k8s

from airflow_adaptive.core.lff import PRIORITY_CLASSES, PriorityChoice
from airflow_adaptive.failopen import warn_once
from airflow_adaptive.kubernetes.names import PREFIX
from airflow_adaptive.kubernetes.pods import has_own_priority

LFF_LABEL = f"{PREFIX}/least-finished-first"
CHECK_SECONDS = 300.0
FAILED_CHECK_SECONDS = 60.0
_lock = threading.Lock()
_known: tuple[float, frozenset[str]] | None = None  # (valid until, class names in the cluster)


def manifests() -> list[dict[str, Any]]:
    """The PriorityClass objects, most urgent first (``kubectl apply -f`` the YAML of these)."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name, "labels": {LFF_LABEL: "true"}},
            "value": value,
            "preemptionPolicy": "Never",
            "globalDefault": False,
            "description": "airflow-adaptive least-finished-first: orders pending pods, never preempts.",
        }
        for name, value in PRIORITY_CLASSES
    ]


def existing_classes(api_client: Any) -> frozenset[str]:
    """Our PriorityClasses present in the cluster (cached per process; raises on API errors)."""
    global _known
    now = time.monotonic()
    with _lock:
        if _known is not None and _known[0] > now:
            return _known[1]
    from kubernetes.client import SchedulingV1Api

    try:
        found = SchedulingV1Api(api_client).list_priority_class(label_selector=f"{LFF_LABEL}=true")
    except Exception:
        with _lock:  # do not ask again for every pod while the API is failing
            _known = (now + FAILED_CHECK_SECONDS, frozenset())
        raise
    names = frozenset(item.metadata.name for item in found.items)
    with _lock:
        _known = (now + CHECK_SECONDS, names)
    return names


def forget() -> None:
    global _known
    with _lock:
        _known = None


def create_missing(api_client: Any) -> list[str]:
    """Create the classes the cluster lacks (the profiling DAG does, when allowed); their names."""
    from kubernetes.client import SchedulingV1Api

    api = SchedulingV1Api(api_client)
    present = {item.metadata.name for item in api.list_priority_class().items}
    created = []
    for manifest in manifests():
        if manifest["metadata"]["name"] not in present:
            api.create_priority_class(manifest)
            created.append(manifest["metadata"]["name"])
    forget()
    return created


def priority_class_for(
    choice: PriorityChoice | None, pod: k8s.V1Pod, api_client: Callable[[], Any], *, enabled: bool
) -> tuple[str | None, str]:
    """The class to set on the pod (None: none) and a note for the explanation; never raises.

    The user's class or fixed priority wins; a class missing from the cluster is not set.
    """
    if choice is None or not enabled:
        return None, "" if enabled else " (no class set: priority classes off or a dry run)"
    if has_own_priority(pod):
        return None, " (not set: the pod has its own)"
    try:
        present = existing_classes(api_client())
    except Exception as err:  # any client or API error: the pod goes without a class
        warn_once(f"PriorityClasses cannot be listed ({type(err).__name__})", "pods get no priority class")
        return None, " (not set: PriorityClasses cannot be listed)"
    if choice.class_name not in present:
        warn_once(
            f"PriorityClass {choice.class_name} is not in the cluster (airflow-adaptive priority-classes)",
            "pods get no priority class",
        )
        return None, " (not set: missing in the cluster)"
    return choice.class_name, ""
