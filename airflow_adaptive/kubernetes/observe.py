"""Observe: the attempt as the final pod shows it (exit reason, the wrapper's usage line, a
sampled peak when there was no wrapper, node, resources)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from kubernetes.client import models as k8s

from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.telemetry import parse_memory_profile, parse_memory_rebound, parse_usage
from airflow_adaptive.kubernetes.names import DECISION_ANNOTATION, STRATEGY_ANNOTATION
from airflow_adaptive.kubernetes.pods import find_container, memory_of


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
    message = None if reason is ExitReason.OOM_KILLED or terminated is None else terminated.message
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
        memory_profile_s=parse_memory_profile(message),  # a killed try's shape is cut short
        memory_rebound_bytes=parse_memory_rebound(message),
    )


def _wall_seconds(terminated: k8s.V1ContainerStateTerminated | None) -> float | None:
    if terminated is None or not terminated.started_at or not terminated.finished_at:
        return None
    return max(0.0, (terminated.finished_at - terminated.started_at).total_seconds())
