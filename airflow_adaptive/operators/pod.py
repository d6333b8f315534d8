"""KubernetesPodOperator that sizes memory from history and records what each attempt used."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any, NoReturn

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.triggers.pod import KubernetesPodTrigger
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from kubernetes.client import models as k8s

from airflow_adaptive.advisor import Advisor, PodAsk
from airflow_adaptive.attempt import pod_mode, prepare_pod, record_final_pod, recorded_mode, task_key
from airflow_adaptive.config import get_settings, settings_readable
from airflow_adaptive.core.model import Decision, ExitReason, Observation, TaskKey, family_of_task
from airflow_adaptive.core.modes import Mode, ModeChoice, dag_mode, parse_mode
from airflow_adaptive.core.placement import GroupLoad
from airflow_adaptive.core.units import format_bytes
from airflow_adaptive.exceptions import InvalidConfigError, InvalidQuantityError
from airflow_adaptive.failopen import warn_once
from airflow_adaptive.kubernetes.command_wrapper import container_wrapped
from airflow_adaptive.kubernetes.live_load import live_load_path, shared_group_loads
from airflow_adaptive.kubernetes.metrics import PeakSampler
from airflow_adaptive.kubernetes.names import MANAGED_LABEL
from airflow_adaptive.kubernetes.pods import (
    capability_label,
    cpu_limit_of,
    cpu_request_of,
    find_container,
    memory_of,
    tool_of,
)
from airflow_adaptive.kubernetes.priority_classes import priority_class_for
from airflow_adaptive.kubernetes.sampling_trigger import SAMPLED_PEAK_KEY, SamplingPodTrigger
from airflow_adaptive.kubernetes.staging import LOCALITY_ANNOTATION
from airflow_adaptive.operators.cluster_check import missing_cluster
from airflow_adaptive.operators.noting_trigger import NotingPodTrigger
from airflow_adaptive.shared_inputs import declared_inputs, record_inputs, stage_inputs

LFF_WEIGHT_RULE = "airflow_adaptive.LeastFinishedFirst"


class AdaptiveOOMKilled(AirflowException):
    """The task's container was OOM-killed; the next try gets more memory."""


class AdaptiveMemoryCapReached(AirflowFailException):
    """The task was OOM-killed at the largest allocatable memory; retrying cannot help."""


class AdaptiveKubernetesPodOperator(KubernetesPodOperator):
    """A KubernetesPodOperator whose memory comes from the history of its task family.

    :param task_family: history key shared by tasks that do the same work
        (default ``dag_id.task_id``); several DAGs may share one family. (templated; the scheduler's
        least-finished-first weight sees it unrendered)

    Unless ``weight_rule`` is given (here or in ``default_args``), the task is ordered
    least-finished-first (``airflow_adaptive.LeastFinishedFirst``).
    :param input_size_bytes: declared input size of this attempt, for size-aware strategies. (templated)
    :param adaptive: set False to record history without changing resources (``mode="observe"``).
    :param mode: ``enforce`` (the default), ``recommend``, ``observe`` or ``off`` (core/modes.py); a DAG
        tag ``adaptive:<mode>`` and ``[adaptive] family_modes`` override it.
    :param required_capabilities: node capabilities the task cannot run without (e.g. ``{"gpu", "avx512"}``):
        a required node affinity. Until such a node exists the pod stays Pending; in deferrable mode the
        worker slot is free meanwhile.
    :param shared_inputs: URIs (or Assets) this task reads that other tasks read too, e.g. a reference
        genome. With ``[adaptive] cache_root`` set, medium and big ones (and big enough ``inlets`` that
        earlier tasks read) are staged on the node and nodes holding them are preferred; the task finds
        each at ``$ADAPTIVE_INPUT_<NAME>`` (reads ``$ADAPTIVE_INPUT_<NAME>_URI`` when that path is missing).
        (templated)
    """

    template_fields: Sequence[str] = (
        *KubernetesPodOperator.template_fields,
        "input_size_bytes",
        "task_family",
        "shared_inputs",
    )

    def __init__(
        self,
        *,
        task_family: str | None = None,
        input_size_bytes: int | str | None = None,
        adaptive: bool = True,
        mode: str | None = None,
        required_capabilities: Iterable[str] | None = None,
        shared_inputs: Iterable[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # Least-finished-first unless the DAG chose a weight rule (here or in default_args).
        if "weight_rule" not in kwargs and "weight_rule" not in (kwargs.get("default_args") or {}):
            kwargs["weight_rule"] = LFF_WEIGHT_RULE
        super().__init__(**kwargs)
        self.required_capabilities = frozenset(required_capabilities or ())
        for capability in self.required_capabilities:
            capability_label(capability)  # a bad name is a clear error when the DAG is parsed
        self.task_family = task_family
        self.shared_inputs = list(shared_inputs or [])
        self.input_size_bytes = input_size_bytes
        self.adaptive = adaptive
        try:
            self.mode = parse_mode(mode, f"task {self.task_id!r}: mode") if mode is not None else None
        except ValueError as err:  # a clear error when the DAG is parsed
            raise InvalidConfigError(str(err)) from None
        self._adaptive_killed = False
        self._noted_key: TaskKey | None = None  # this attempt, noted as unfinished until recorded
        self._advisor: Advisor | None = None
        # The policy leaves pods that carry this label to the operator.
        self.labels = {**(self.labels or {}), MANAGED_LABEL: "operator"}
        resources = self.container_resources
        if resources is not None and "{{" not in str(resources):
            memory_of(resources, what=f"task {self.task_id!r} container_resources memory")

    @property
    def family(self) -> str:
        return self.task_family or family_of_task(self.dag_id, self.task_id)

    def _input_size(self) -> int | None:
        if self.input_size_bytes in (None, ""):
            return None
        try:
            size = int(self.input_size_bytes)
        except (TypeError, ValueError):
            raise InvalidQuantityError(
                f"task {self.task_id!r}: input_size_bytes={self.input_size_bytes!r} is not a whole number"
            ) from None
        if size < 0:
            raise InvalidQuantityError(f"task {self.task_id!r}: input_size_bytes must not be negative")
        return size

    def _tool(self) -> tuple[str | None, str | None]:
        """The image and program this task runs, from its own arguments (the pod's command is
        wrapped by then)."""
        return tool_of(self.image, self.cmds, self.arguments)

    def execute(self, context: Any) -> Any:
        """With no cluster configured at all, the decision is logged (from a dry-run pod, as the
        client is needed to build the real one) and the task fails at once, without retries."""
        reason = missing_cluster(self)
        if reason is not None:
            self.build_pod_request_obj(context, dry_run=True)
            raise AirflowFailException(
                f"{reason}; the decision logged above is what the pod would get (README: Try it without a cluster)"
            )
        return super().execute(context)

    def build_pod_request_obj(self, context: Any = None, *, dry_run: bool = False) -> k8s.V1Pod:
        pod = super().build_pod_request_obj(context, dry_run=dry_run)
        if not settings_readable():
            return pod  # the user's pod as asked, unwrapped, recorded by no one
        advisor = self.advisor()
        choice = self.mode_of(context)
        if not choice.mode.records:
            self.log.info("airflow-adaptive: mode %s: the pod is left as asked", choice.note())
            return pod
        decision = self.decide(pod, context, choice, dry_run=dry_run)
        self.log.info("%s", choice.log_line(decision.strategy, decision.explanation))
        key = task_key(context)
        if key is not None and not dry_run:  # until recorded, unfinished; Pending until it runs
            advisor.recording.started(self.family, key, running=False)
            self._noted_key = key
        if choice.mode.enforces:
            self._stage_inputs(pod, advisor)
        return pod

    def mode_of(self, context: Any) -> ModeChoice:
        """This attempt's mode: the family's rule, the DAG's tag, the task's own, else enforce. Without
        a context (a dry run: ``demo --dag-file``), the DAG the task was defined in."""
        dag = (context or {}).get("dag") if context else self.get_dag()
        task: Mode | None = Mode.OBSERVE if not self.adaptive else self.mode
        tags = getattr(dag, "tags", None) if dag is not None else None
        try:
            by_dag = dag_mode(tags)
        except ValueError as err:
            raise InvalidConfigError(str(err)) from None
        return pod_mode(get_settings(), self.family, dag=by_dag, task=task, operator=True)

    def _stage_inputs(self, pod: k8s.V1Pod, advisor: Advisor) -> None:
        """Declared inputs: staged on the node when shared and big enough; never stops the pod."""
        try:
            declared = declared_inputs(self.inlets or (), self.shared_inputs or ())
            if not declared:
                return
            note = stage_inputs(pod, self.base_container_name, declared, advisor, self.family)
        except Exception as err:  # the cache must never fail the task
            warn_once(f"inputs not staged ({type(err).__name__}: {str(err)[:200]})")
            note = f"inputs not staged ({type(err).__name__})"
        self.log.info("airflow-adaptive %s", note)
        pod.metadata.annotations = {**(pod.metadata.annotations or {}), LOCALITY_ANNOTATION: note[:1000]}

    def advisor(self) -> Advisor:
        """This attempt's advisor: one per attempt in this process (a deferred pod's trigger and
        re-entry run in others), so an unavailable store is waited for once."""
        if self._advisor is None:
            self._advisor = Advisor(get_settings())
        return self._advisor

    def decide(self, pod: k8s.V1Pod, context: Any, choice: ModeChoice, *, dry_run: bool = False) -> Decision:
        """Wrap, decide and apply through the path every pod kind takes (attempt.prepare_pod)."""
        container = find_container(pod, self.base_container_name)
        resources = container.resources if container else None
        image, program = self._tool()
        advisor = self.advisor()
        ask = PodAsk(
            self.family,
            memory_of(resources),
            task_key(context),
            input_size_bytes=self._input_size(),
            cpu_limit_millicores=cpu_limit_of(resources),
            cpu_request_millicores=cpu_request_of(resources),
            image=image,
            program=program,
            required_capabilities=self.required_capabilities,
            static_weight=self.priority_weight,
            group_loads=self._group_loads() if choice.mode.enforces else None,
        )
        enabled = advisor.settings.priority_classes and not dry_run
        return prepare_pod(
            pod,
            self.base_container_name,
            choice,
            ask,
            advisor,
            lambda choice: priority_class_for(choice, pod, lambda: self.client.api_client, enabled=enabled),
            managed_by="operator",
        )

    def _group_loads(self) -> dict[int, GroupLoad] | None:
        """Load per group when live load is on; None (no load known) when off or unreachable."""
        settings = get_settings()
        if not settings.placement_live_load:
            return None
        try:
            return shared_group_loads(
                lambda: self.client,
                live_load_path(settings.spool_dir),
                settings.placement_live_load_ttl_seconds,
            )
        except Exception as err:  # any API or transport error: place without live load
            warn_once(f"live node load unavailable ({type(err).__name__}); placing without it")
            return None

    def _command_wrapped(self) -> bool:
        pod = self.pod_request_obj or self.pod
        container = find_container(pod, self.base_container_name) if pod is not None else None
        return bool(container is not None and container_wrapped(container))

    def await_pod_start(self, pod: k8s.V1Pod) -> None:
        """Then the attempt's note starts again, now: time spent Pending (a full cluster, an image
        pull) is not time running, which the unfinished-attempt guard compares with finished runtimes.
        A deferrable pod is awaited in the triggerer, which notes it the same way (``defer``)."""
        super().await_pod_start(pod)
        if self._noted_key is not None:
            self.advisor().recording.started(self.family, self._noted_key)

    def await_pod_completion(self, pod: k8s.V1Pod) -> None:  # type: ignore[override]
        """Sample the metrics API while the pod runs when the command could not be wrapped."""
        if self._command_wrapped() or not settings_readable() or recorded_mode(pod) is None:
            return super().await_pod_completion(pod)
        sampler = PeakSampler(
            self.client.api_client,
            pod.metadata.namespace,
            pod.metadata.name,
            self.base_container_name,
            get_settings().metrics_sample_interval_seconds,
        )
        with sampler:
            super().await_pod_completion(pod)
        self._sampled_peak_bytes = sampler.peak_bytes

    def defer(
        self, *, trigger: Any, method_name: str, kwargs: dict[str, Any] | None = None, timeout: Any = None
    ) -> NoReturn:
        """In deferrable mode the trigger samples the metrics API when the command could not be
        wrapped, and notes the attempt again when its pod starts running, as ``await_pod_start``
        does for a pod awaited here."""
        pod_trigger = isinstance(trigger, KubernetesPodTrigger) and not isinstance(
            trigger, SamplingPodTrigger
        )
        sample = not self._command_wrapped()
        if pod_trigger and (sample or self._noted_key is not None) and settings_readable():
            _, trigger_kwargs = trigger.serialize()
            trigger = NotingPodTrigger(
                **trigger_kwargs,
                sample_interval_seconds=get_settings().metrics_sample_interval_seconds if sample else None,
                noted_attempt=None
                if self._noted_key is None
                else {"key": asdict(self._noted_key), "family": self.family},
            )
        super().defer(trigger=trigger, method_name=method_name, kwargs=kwargs, timeout=timeout)

    def trigger_reentry(self, context: Any, event: dict[str, Any]) -> Any:
        self._sampled_peak_bytes = event.get(SAMPLED_PEAK_KEY)
        return super().trigger_reentry(context, event)

    def cleanup(
        self,
        pod: k8s.V1Pod,
        remote_pod: k8s.V1Pod,
        xcom_result: dict | None = None,
        context: Any = None,
    ) -> None:
        observation = self._record(remote_pod, context) if settings_readable() else None
        try:
            super().cleanup(pod=pod, remote_pod=remote_pod, xcom_result=xcom_result, context=context)
        except AirflowException as err:
            if observation is None or observation.exit_reason is not ExitReason.OOM_KILLED:
                raise
            raise self._oom_error(observation) from err
        if observation is not None and observation.exit_reason is ExitReason.OOM_KILLED:
            raise self._oom_error(observation)

    def _record(self, remote_pod: k8s.V1Pod | None, context: Any) -> Observation | None:
        key = task_key(context)
        if key is None:
            return None
        if remote_pod is None or self._adaptive_killed or not (recorded_mode(remote_pod) or Mode.OFF).records:
            self.advisor().recording.ended_unrecorded(key)  # no record: no longer unfinished either
            return None
        advisor = self.advisor()
        observation = record_final_pod(
            advisor,
            remote_pod,
            self.base_container_name,
            key,
            self.family,
            input_size_bytes=self._input_size(),
            sampled_peak_bytes=getattr(self, "_sampled_peak_bytes", None),
        )
        try:
            record_inputs(advisor, remote_pod, self.base_container_name, key.dag_id)
        except Exception as err:  # where inputs are cached is soft state: a later pod misses
            warn_once(f"input cache report not recorded ({type(err).__name__})")
        return observation

    def on_kill(self) -> None:
        self._adaptive_killed = True  # a killed task's pod says nothing about its memory: not recorded
        super().on_kill()

    def _oom_error(self, observation: Observation) -> AirflowException:
        limit = observation.memory_limit_bytes
        cap = get_settings().sizing.cap_bytes
        if limit is not None and limit >= cap:
            return AdaptiveMemoryCapReached(
                f"task family {observation.task_family!r} was OOM-killed at {format_bytes(limit)}, the "
                f"largest allocatable memory ([adaptive] max_allocatable_memory = {format_bytes(cap)}); "
                "it needs a bigger node or less memory, retrying cannot help"
            )
        return AdaptiveOOMKilled(
            f"task family {observation.task_family!r} was OOM-killed at {format_bytes(limit)} "
            f"(try {observation.key.try_number}); the next try gets more memory"
        )
