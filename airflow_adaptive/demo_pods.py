"""The demo's pods: what each KubernetesPodOperator task of a DAG would get at its first try, built
as in a run but without one (no cluster, nothing noted as running)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from airflow_adaptive.exceptions import DagFileError
from airflow_adaptive.failopen import first_line


def _row(task: Any, pod: Any, asked: Any, family: str, mode: str | None) -> dict[str, Any]:
    """A pod as built, beside the memory the user asked for (``asked``: its base container's)."""
    from kubernetes.client import ApiClient

    from airflow_adaptive.kubernetes.names import DECISION_ANNOTATION, STRATEGY_ANNOTATION
    from airflow_adaptive.kubernetes.pods import find_container, memory_of

    container = find_container(pod, task.base_container_name)
    decided = memory_of(container.resources if container else None)
    annotations = pod.metadata.annotations or {}
    return {
        "task_id": task.task_id,
        "task_family": family,
        "mode": mode,
        "user_request_bytes": memory_of(asked).request_bytes,
        "memory_request_bytes": decided.request_bytes,
        "memory_limit_bytes": decided.limit_bytes,
        "strategy": annotations.get(STRATEGY_ANNOTATION),
        "explanation": annotations.get(DECISION_ANNOTATION),
        "pod": ApiClient().sanitize_for_serialization(pod),
    }


def operator_row(task: Any) -> dict[str, Any]:
    """The pod the adaptive operator would create now (its dry run decides without the cluster)."""
    from airflow_adaptive.kubernetes.names import MODE_ANNOTATION

    pod = task.build_pod_request_obj(None, dry_run=True)
    mode = (pod.metadata.annotations or {}).get(MODE_ANNOTATION)
    return _row(task, pod, task.container_resources, task.family, mode)


def plain_row(task: Any) -> dict[str, Any]:
    """What the pod-mutation hook makes of a plain KubernetesPodOperator's first try: the task
    policy's stamp, the pod the operator builds (templates included), the labels a run gives it,
    then the hook's own work as a dry run. A pod it cannot build is one line naming the task."""
    import copy

    from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value

    from airflow_adaptive.attempt import airflow_task_of, pod_mode, stamped_dag_mode
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.names import MANAGED_LABEL, OPT_OUT_LABEL
    from airflow_adaptive.kubernetes.pods import find_container
    from airflow_adaptive.policy import log as hook_log
    from airflow_adaptive.policy import mutate, stamp

    try:
        stamp(task)
        pod = task.build_pod_request_obj(None, dry_run=True)  # no run: its hook call sees no task labels
        run = {"dag_id": task.dag_id, "task_id": task.task_id, "run_id": "demo", "try_number": "1"}
        pod.metadata.labels.update({k: make_safe_label_value(v) for k, v in run.items()})
        container = find_container(pod, task.base_container_name)
        asked = copy.deepcopy(container.resources if container else None)
        labels = pod.metadata.labels  # as the hook finds them (it marks the pods it manages)
        left = labels.get(OPT_OUT_LABEL, "").lower() == "true" or MANAGED_LABEL in labels
        with quieted(hook_log, logging.WARNING):  # its decision line is the table's row
            mutate(pod, dry_run=True)
    except Exception as err:  # the operator's own build (a subclass may need its cloud) or the hook's
        raise DagFileError(
            f"demo: task {task.task_id!r}: its pod cannot be shown here ({first_line(err)})"
        ) from None
    family = (airflow_task_of(pod) or (task.task_id,))[0]
    if left:
        mode = "opted out: left as the user asked, nothing recorded"
    else:
        choice = pod_mode(get_settings(), family, dag=stamped_dag_mode(pod), task=None, operator=False)
        mode = (
            choice.note()
            if choice.mode.records
            else f"{choice.note()}: left as the user asked, nothing recorded"
        )
    return _row(task, pod, asked, family, mode)


def mapped_kubernetes_tasks(dag: Any) -> list[str]:
    """The DAG's mapped KubernetesPodOperator tasks: their pods exist per map index, at run time."""
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    mapped = [t for t in dag.tasks if isinstance(t, MappedOperator)]
    kinds = [(t, t.operator_class) for t in mapped]  # the class it maps, not an instance
    return [
        t.task_id for t, kind in kinds if isinstance(kind, type) and issubclass(kind, KubernetesPodOperator)
    ]


@contextlib.contextmanager
def quieted(log: logging.Logger, level: int) -> Iterator[None]:
    """``log`` held at ``level`` for a block (what it would say, the caller says in its own way)."""
    before = log.level
    log.setLevel(level)
    try:
        yield
    finally:
        log.setLevel(before)
