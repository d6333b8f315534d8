"""Observe and record a plain KubernetesPodOperator's attempts, with no change to its DAG.

The task policy (policy.py) gives every KubernetesPodOperator task this callback; the pod-mutation
hook has already wrapped, decided and applied its pod by its mode when the callbacks run. The
operator calls them in both modes (cncf.kubernetes 10.25, ``operators/pod.py``): in sync mode
``on_pod_creation``, ``on_pod_starting`` and ``on_pod_completion``; in deferrable mode
``on_pod_creation`` before it defers and ``on_pod_completion`` on re-entry, where the task process
is new (so nothing is kept between calls: each reads the pod and the context). Both call
``on_pod_completion`` before the pod is deleted (``on_finish_action="delete_pod"``). The gaps: a
deferrable pod deleted by someone else before re-entry reaches no callback (re-entry returns on the
404), so that attempt is not recorded (its unfinished note is pruned); and a deferrable pod is
noted from its creation, not from when it started running, and, with no command to wrap, records
no peak (sync mode samples the metrics API instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.cncf.kubernetes.callbacks import KubernetesPodOperatorCallback

from airflow_adaptive.failopen import first_line, warn_once

if TYPE_CHECKING:
    from kubernetes.client import models as k8s

    from airflow_adaptive.advisor import Advisor

# The task policy imports this module while Airflow parses every DAG file with a KPO task: the
# advisor (and the sizing libraries it loads) is imported when a callback runs, not here.

ADVISOR_ATTR = "_adaptive_callback_advisor"  # one advisor per attempt in this process
SAMPLER_ATTR = "_adaptive_callback_sampler"  # the metrics sampler of an unwrapped container


class AdaptivePodCallback(KubernetesPodOperatorCallback):
    """Notes the attempt while it runs and records it from its final pod; never raises."""

    @staticmethod
    def on_pod_creation(*, pod: k8s.V1Pod, operator: Any, context: Any = None, **kwargs: Any) -> None:
        """Pending, when ``on_pod_starting`` will note it running (sync mode); a deferrable pod is
        noted running from here, as nothing in this process sees it start."""
        running = bool(getattr(operator, "deferrable", False))
        _guarded("attempt not noted as started", lambda: _note_started(pod, operator, context, running))

    @staticmethod
    def on_pod_starting(
        *, pod: k8s.V1Pod, operator: Any, context: Any = None, client: Any = None, **kwargs: Any
    ) -> None:
        """Running now: time Pending is not time running; a container with no command to wrap is
        sampled from the metrics API until it completes (sync mode only: both calls in this process)."""
        _guarded("attempt not noted as running", lambda: _note_started(pod, operator, context, True))
        _guarded("peak not sampled", lambda: _start_sampler(pod, operator, context, client))

    @staticmethod
    def on_pod_completion(*, pod: k8s.V1Pod, operator: Any, context: Any = None, **kwargs: Any) -> None:
        sampler = getattr(operator, SAMPLER_ATTR, None)
        if sampler is not None:
            setattr(operator, SAMPLER_ATTR, None)
            _guarded("peak not sampled", lambda: sampler.__exit__(None, None, None))
        peak = sampler.peak_bytes if sampler is not None else None
        _guarded("attempt not recorded", lambda: _record(pod, operator, context, peak))


def _guarded(what: str, call: Any) -> None:
    try:
        call()
    except Exception as err:  # a callback must never fail the task
        warn_once(f"{what} ({type(err).__name__}: {first_line(err)})", "the task runs as asked")


def _ours(pod: k8s.V1Pod | None, context: Any) -> bool:
    from airflow_adaptive.attempt import recorded_mode, task_key
    from airflow_adaptive.config import settings_readable

    mode = recorded_mode(pod)
    return mode is not None and mode.records and task_key(context) is not None and settings_readable()


def _advisor(operator: Any) -> Advisor:
    from airflow_adaptive.advisor import Advisor
    from airflow_adaptive.config import get_settings

    advisor = getattr(operator, ADVISOR_ATTR, None)
    if advisor is None:
        advisor = Advisor(get_settings())
        setattr(operator, ADVISOR_ATTR, advisor)
    return advisor


def _family(pod: k8s.V1Pod, operator: Any) -> str:
    from airflow_adaptive.core.model import family_of_task
    from airflow_adaptive.kubernetes.names import FAMILY_ANNOTATION

    annotations = (pod.metadata.annotations if pod.metadata else None) or {}
    return annotations.get(FAMILY_ANNOTATION) or family_of_task(operator.dag_id, operator.task_id)


def _note_started(pod: k8s.V1Pod | None, operator: Any, context: Any, running: bool) -> None:
    from airflow_adaptive.attempt import task_key

    if pod is None or not _ours(pod, context):
        return
    key = task_key(context)
    assert key is not None
    _advisor(operator).recording.started(_family(pod, operator), key, running=running)


def _start_sampler(pod: k8s.V1Pod | None, operator: Any, context: Any, client: Any) -> None:
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.command_wrapper import container_wrapped
    from airflow_adaptive.kubernetes.metrics import PeakSampler
    from airflow_adaptive.kubernetes.pods import find_container

    if pod is None or client is None or not _ours(pod, context):
        return
    container = find_container(pod, operator.base_container_name)
    if container is None or container_wrapped(container):
        return
    sampler = PeakSampler(
        client.api_client,
        pod.metadata.namespace,
        pod.metadata.name,
        operator.base_container_name,
        get_settings().metrics_sample_interval_seconds,
    )
    setattr(operator, SAMPLER_ATTR, sampler.__enter__())


def _record(
    pod: k8s.V1Pod | None, operator: Any, context: Any, sampled_peak_bytes: int | None = None
) -> None:
    from airflow_adaptive.attempt import record_final_pod, task_key
    from airflow_adaptive.config import settings_readable

    key = task_key(context)
    if key is None or not settings_readable():
        return
    if pod is None:  # gone before it could be read: no record, and no longer unfinished
        _advisor(operator).recording.ended_unrecorded(key)
        return
    if not _ours(pod, context):
        return
    record_final_pod(
        _advisor(operator),
        pod,
        operator.base_container_name,
        key,
        _family(pod, operator),
        sampled_peak_bytes=sampled_peak_bytes,
    )
