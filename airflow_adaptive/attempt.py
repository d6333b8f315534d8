"""One attempt's pod, whoever built it (the operator, the pod-mutation hook for a plain
KubernetesPodOperator or a KubernetesExecutor worker): its mode chosen, its command wrapped, its
decision applied as far as the mode goes, and its final state recorded. One way to observe and
record, so that every pod kind learns the same fields."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kubernetes.client import models as k8s

from airflow_adaptive.advisor import Advisor, ClassOf, PodAsk
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.core.growth_plan import GrowthPlan
from airflow_adaptive.core.model import Decision, Observation, TaskKey
from airflow_adaptive.core.modes import Mode, ModeChoice, choose_mode, parse_mode
from airflow_adaptive.failopen import warn_once
from airflow_adaptive.kubernetes.apply import apply_decision
from airflow_adaptive.kubernetes.command_wrapper import unwrapped, wrap_container
from airflow_adaptive.kubernetes.names import (
    DAG_MODE_ANNOTATION,
    FAMILY_ANNOTATION,
    GROWN_ANNOTATION,
    MODE_LABEL,
)
from airflow_adaptive.kubernetes.observe import observe_pod
from airflow_adaptive.kubernetes.pods import (
    cpu_limit_of,
    cpu_request_of,
    find_container,
    memory_of,
    tool_of,
    user_memory_of,
)
from airflow_adaptive.kubernetes.resize import allow_growth


def task_key(context: Any) -> TaskKey | None:
    """The attempt of a task's execution context (None outside one)."""
    ti = (context or {}).get("ti")
    if ti is None:
        return None
    map_index = getattr(ti, "map_index", -1)
    return TaskKey(ti.dag_id, ti.task_id, ti.run_id, -1 if map_index is None else map_index, ti.try_number)


def airflow_task_of(pod: k8s.V1Pod) -> tuple[str, TaskKey, bool] | None:
    """(task family, key, run_id_is_label) of a pod Airflow made, or None for other pods.

    Executor pods carry the raw ids in annotations; KPO pods only sanitised labels.
    """
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


def stamped_dag_mode(pod: k8s.V1Pod) -> Mode | None:
    """The DAG's mode the task policy stamped on the pod's task (None: the DAG sets none)."""
    stamped = ((pod.metadata.annotations if pod.metadata else None) or {}).get(DAG_MODE_ANNOTATION)
    if not stamped:
        return None
    try:
        return parse_mode(stamped, "DAG mode")
    except ValueError as err:
        warn_once(str(err), "the deployment's mode applies")
        return None


def pod_mode(
    settings: AdaptiveSettings, family: str, *, dag: Mode | None, task: Mode | None, operator: bool
) -> ModeChoice:
    """The mode of a pod: the operator's pods default to enforce (their DAG chose it), others to
    ``[adaptive] mode``."""
    default, source = (Mode.ENFORCE, "operator") if operator else (settings.mode, settings.mode_source)
    return choose_mode(
        settings.family_modes, family, dag=dag, task=task, default=default, default_source=source
    )


def recorded_mode(pod: k8s.V1Pod | None) -> Mode | None:
    """The mode a pod was given when it was decided (None: not one of ours)."""
    value = ((pod.metadata.labels if pod is not None and pod.metadata else None) or {}).get(MODE_LABEL)
    try:
        return Mode(value) if value else None
    except ValueError:
        return None


def ask_of_pod(pod: k8s.V1Pod, container_name: str, family: str, previous: Observation | None) -> PodAsk:
    """What a pod built elsewhere asks for and runs, read off the pod (the hook's view of it)."""
    container = find_container(pod, container_name)
    resources = container.resources if container else None
    name = pod.metadata.name if pod.metadata else None
    image, program = (
        tool_of(container.image, container.command, container.args) if container else (None, None)
    )
    return PodAsk(
        family,
        memory_of(resources, what=f"pod {name} memory"),
        None,
        previous_attempt=previous,
        cpu_limit_millicores=cpu_limit_of(resources),
        cpu_request_millicores=cpu_request_of(resources),
        image=image,
        program=program,
    )


def prepare_pod(
    pod: k8s.V1Pod,
    container_name: str,
    choice: ModeChoice,
    ask: PodAsk,
    advisor: Advisor,
    class_of: ClassOf,
    *,
    managed_by: str,
    entrypoint_runs_args: bool = False,
) -> Decision:
    """Wrap the command (the attempt will report its usage), decide, apply as far as the mode goes."""
    container = find_container(pod, container_name)
    if container is not None:
        wrap_container(container, entrypoint_runs_args=entrypoint_runs_args)
    decision = advisor.pod_decision(ask, class_of if choice.mode.enforces else _no_class)
    apply_decision(pod, decision, ask.task_family, container_name, managed_by=managed_by, choice=choice)
    grows = advisor.settings.grow_in_place and choice.mode.enforces and decision.adaptive
    if grows and decision.memory_limit_bytes:
        allow_growth(pod, container_name, growth_plan_of(advisor, ask.task_family, decision))
    return decision


def growth_plan_of(advisor: Advisor, task_family: str, decision: Decision) -> GrowthPlan | None:
    """The family's growth plan for a pod of this decision. As the replay's grow: a family without
    one, or the retry of a try that outgrew its limit (growth could not save it), keeps the
    decision, rescued only (None)."""
    if "oom_retry" in decision.details or not decision.memory_limit_bytes:
        return None
    rule = GrowthRule(latency_s=advisor.settings.grow_resize_latency_seconds)
    return advisor.memory.growth_plan(task_family, rule, decision.memory_limit_bytes)


def _no_class(choice: Any) -> tuple[str | None, str]:
    return None, ""  # a pod in observe or recommend mode keeps its priority: no cluster call


def record_final_pod(
    advisor: Advisor,
    remote_pod: k8s.V1Pod,
    container_name: str,
    key: TaskKey,
    family: str,
    *,
    input_size_bytes: int | None = None,
    sampled_peak_bytes: int | None = None,
) -> Observation:
    """Record the attempt as its final pod shows it (never raises for the store: spooled)."""
    observation = observe_pod(
        remote_pod,
        container_name,
        key,
        ((remote_pod.metadata.annotations if remote_pod.metadata else None) or {}).get(
            FAMILY_ANNOTATION, family
        ),
        input_size_bytes=input_size_bytes,
        sampled_peak_bytes=sampled_peak_bytes,
    )
    container = find_container(remote_pod, container_name)
    command, args = unwrapped(container) if container else ([], [])
    image, program = tool_of(container.image if container else None, command, args)
    user = user_memory_of(remote_pod, container_name)
    observation = replace(observation, user_request_bytes=user.request_bytes, image=image, program=program)
    grown = ((remote_pod.metadata.annotations if remote_pod.metadata else None) or {}).get(GROWN_ANNOTATION)
    if grown:  # what the grow agent did to this attempt's memory
        observation = replace(
            observation, explanation=f"{observation.explanation or ''} In place: {grown}".strip()
        )
    advisor.recording.record(observation)
    return observation
