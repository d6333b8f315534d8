"""Airflow's cluster policies (the ``airflow.policy`` entry point), for pods the operator did not build.

``pod_mutation_hook``: plain KubernetesPodOperator pods and KubernetesExecutor worker pods get
their mode (``[adaptive] mode``, off by default; a DAG tag ``adaptive:<mode>``;
``[adaptive] family_modes``), their command wrapped, and the decision applied as far as the mode
goes. A pod labelled ``adaptive.airflow.io/opt-out: "true"`` is never changed. It never raises.

``task_policy``: every KubernetesPodOperator task gets the recording callback
(operators/callback.py); a DAG's ``adaptive:<mode>`` tag is stamped on its tasks' pods.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Any

from airflow.policies import hookimpl

if TYPE_CHECKING:
    from kubernetes.client import models as k8s

# Airflow loads this module while it initialises itself: everything else is imported lazily.
log = logging.getLogger(__name__)
BASE_CONTAINER = "base"


def mutate(pod: k8s.V1Pod, *, dry_run: bool = False) -> None:
    """The hook's work (below); ``dry_run`` (the demo): no cluster call, no unfinished attempt noted."""
    from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value

    from airflow_adaptive.advisor import Advisor
    from airflow_adaptive.attempt import airflow_task_of, ask_of_pod, pod_mode, prepare_pod, stamped_dag_mode
    from airflow_adaptive.config import get_settings, settings_readable
    from airflow_adaptive.kubernetes.names import MANAGED_LABEL, OPT_OUT_LABEL
    from airflow_adaptive.kubernetes.priority_classes import priority_class_for
    from airflow_adaptive.observer.loop import keep_for_observer

    if not settings_readable():  # a malformed [adaptive] value: said once, not a traceback per pod
        return
    settings = get_settings()
    labels = (pod.metadata.labels if pod.metadata else None) or {}
    if labels.get(OPT_OUT_LABEL, "").lower() == "true" or MANAGED_LABEL in labels:
        return
    found = airflow_task_of(pod)
    if found is None:
        return
    family, key, run_id_is_label = found
    choice = pod_mode(settings, family, dag=stamped_dag_mode(pod), task=None, operator=False)
    if not choice.mode.records:
        return
    advisor = Advisor(settings)
    previous = advisor.memory.previous_try(key, make_safe_label_value if run_id_is_label else None)
    ask = ask_of_pod(pod, BASE_CONTAINER, family, previous)
    enabled = settings.priority_classes and not dry_run
    worker = not run_id_is_label  # a KubernetesExecutor worker: its ids are in annotations
    decision = prepare_pod(
        pod,
        BASE_CONTAINER,
        choice,
        ask,
        advisor,
        lambda choice: priority_class_for(choice, pod, _api_client, enabled=enabled),
        managed_by="policy",
        entrypoint_runs_args=worker,
    )
    log.info("%s", choice.log_line(decision.strategy, decision.explanation))
    if worker:  # the observer records it; until then it counts as unfinished
        advisor.recording.started(family, key)
        keep_for_observer(pod, _api_client)


KPO = ("airflow.providers.cncf.kubernetes.operators.pod", "KubernetesPodOperator")
ADAPTIVE_KPO = ("airflow_adaptive.operators.pod", "AdaptiveKubernetesPodOperator")


def stamp(task: Any) -> None:
    """Give a plain KubernetesPodOperator task the recording callback (its worker pod, if the
    KubernetesExecutor runs it, is left alone: it only waits), and stamp the DAG's mode tag.

    It runs for every task of every DAG file parsed: a task's classes are told by name, so a DAG
    with no KubernetesPodOperator imports neither the cncf operator nor the sizing libraries."""
    from airflow_adaptive.core.modes import dag_mode
    from airflow_adaptive.kubernetes.names import DAG_MODE_ANNOTATION, OPT_OUT_LABEL

    dag = getattr(task, "dag", None)
    mode = dag_mode(getattr(dag, "tags", None)) if dag is not None else None
    annotations = {DAG_MODE_ANNOTATION: mode.value} if mode is not None else {}
    classes = {(c.__module__, c.__qualname__) for c in type(task).__mro__}
    if KPO in classes:
        # Its KubernetesExecutor worker only waits for its pod, and would share the attempt's key.
        _override_worker(task, {OPT_OUT_LABEL: "true"}, {})
        if ADAPTIVE_KPO in classes:
            return  # it records itself and reads its DAG's tag itself
        from airflow_adaptive.operators.callback import AdaptivePodCallback

        if AdaptivePodCallback not in task.callbacks:
            task.callbacks = [*task.callbacks, AdaptivePodCallback]
        task.annotations = {**(task.annotations or {}), **annotations}
    elif annotations:
        _override_worker(task, {}, annotations)


def _override_worker(task: Any, labels: dict[str, str], annotations: dict[str, str]) -> None:
    """Add labels and annotations to the task's KubernetesExecutor worker pod (its pod_override)."""
    from kubernetes.client import models as k8s

    config = dict(task.executor_config or {})
    pod = copy.deepcopy(config.get("pod_override")) or k8s.V1Pod()
    pod.metadata = pod.metadata or k8s.V1ObjectMeta()
    pod.metadata.labels = {**(pod.metadata.labels or {}), **labels}
    pod.metadata.annotations = {**(pod.metadata.annotations or {}), **annotations}
    config["pod_override"] = pod
    task.executor_config = config


@hookimpl
def task_policy(task: Any) -> None:
    """Stamp the task (above); a failure leaves it as it was, logged once."""
    try:
        stamp(task)
    except Exception as err:
        from airflow_adaptive.failopen import first_line, warn_once

        warn_once(
            f"task policy not applied to {getattr(task, 'task_id', '?')!r}: {first_line(err)}",
            "its pods are left to the pod-mutation hook",
        )


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
    except Exception as err:
        from airflow_adaptive.exceptions import AdaptiveError

        if isinstance(err, AdaptiveError):  # the pod's own mistake (e.g. memory "2GB"): one line
            log.warning("airflow-adaptive: %s; the pod is left as it was", err)
        else:
            log.exception("airflow-adaptive: pod_mutation_hook failed; the pod is left as it was")
        for attr in pod.attribute_map:
            setattr(pod, attr, getattr(snapshot, attr))
