"""The pod-mutation policy, run by Airflow's own call sites (KPO build and PodGenerator)."""

from __future__ import annotations

import copy
import logging
import re
from dataclasses import replace
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, cast

import pytest
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.pod_generator import PodGenerator, make_safe_label_value
from kubernetes.client import models as k8s

from airflow_adaptive.core.model import ExitReason, PeakKind, TaskKey, Usage
from airflow_adaptive.core.units import GIB
from airflow_adaptive.kubernetes.names import DECISION_ANNOTATION, FAMILY_LABEL, OPT_OUT_LABEL
from airflow_adaptive.policy import pod_mutation_hook
from tests.conftest import sql_store, validate_pod
from tests.factories import attempt

RUN_ID = "manual__2026-11-25T10:00:00+00:00"
# Five peaks of 1 GiB, by hand: far steadier than the prior spread (a variance of 0, floored at the
# resolution's log(1.01)² / 12, against 0.3², below F(4, 1)'s 1 % quantile 0.0472), so their own
# spread bounds them: sqrt(8.26e-6) = 0.00287 on 4 df at the target, t(0.99, 4) = 3.747,
# exp(3.747 x 0.00287 x sqrt(1 + 1/5)) = 1.0119 GiB. The rule, P95 + 15 % = 1.15 GiB = 1177.6 MiB,
# is above it: rounded up to whole MiB.
SIZED = "1178Mi"


@pytest.fixture
def mutate_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MODE", "enforce")


def history(engine: Any, family: str = "etl.load", n: int = 5) -> None:
    sql_store(engine).record([attempt(i, family=family, peak=GIB) for i in range(n)])


def kpo_pod(try_number: int = 1, labels: dict[str, str] | None = None, memory: str = "4Gi") -> k8s.V1Pod:
    """A plain KubernetesPodOperator pod; Airflow calls our hook inside this build."""
    op = KubernetesPodOperator(
        task_id="load", image="busybox", cmds=["true"], labels=labels or {},
        container_resources=k8s.V1ResourceRequirements(requests={"memory": memory}, limits={"memory": memory}),
    )  # fmt: skip
    ti = SimpleNamespace(dag_id="etl", task_id="load", map_index=-1, try_number=try_number)
    context = cast(Any, {"ti": ti, "run_id": RUN_ID, "dag": SimpleNamespace()})  # the parts it reads
    return op.build_pod_request_obj(context, dry_run=True)


def memory(pod: k8s.V1Pod) -> str:
    return pod.spec.containers[0].resources.limits["memory"]


def test_off_by_default(engine: Any) -> None:
    history(engine)
    pod = kpo_pod()
    assert memory(pod) == "4Gi" and FAMILY_LABEL not in pod.metadata.labels


def test_plain_kpo_pod_is_sized_from_history_and_airflow_labels_stay(engine: Any, mutate_all: None) -> None:
    history(engine)
    pod = kpo_pod()
    assert memory(pod) == SIZED  # 5 peaks of 1 GiB: P95 + 15 %, above their small-sample bound
    labels = pod.metadata.labels
    assert labels[FAMILY_LABEL] == "etl.load"
    assert {k: labels[k] for k in ("dag_id", "task_id", "run_id", "try_number", "kubernetes_pod_operator")} == {
        "dag_id": "etl", "task_id": "load", "run_id": make_safe_label_value(RUN_ID), "try_number": "1",
        "kubernetes_pod_operator": "True",
    }  # fmt: skip
    assert "P95 of peaks +15%" in pod.metadata.annotations[DECISION_ANNOTATION]
    validate_pod(pod)


def test_a_cold_family_borrows_from_a_family_that_runs_the_same_image_and_program(
    engine: Any, mutate_all: None
) -> None:
    runs_busybox_true = [
        replace(a, image="busybox:1.36", program="true")
        for a in (attempt(i, family="other.dag", peak=GIB) for i in range(5))
    ]
    sql_store(engine).record(runs_busybox_true)
    pod = kpo_pod()  # etl.load has no history; it runs busybox's `true` too
    assert memory(pod) == SIZED  # other.dag's model
    assert (
        "similar family 'other.dag' (the same image and program"
        in pod.metadata.annotations[DECISION_ANNOTATION]
    )


def test_opt_out_label_is_respected(engine: Any, mutate_all: None) -> None:
    history(engine)
    pod = kpo_pod(labels={OPT_OUT_LABEL: "true"})
    assert memory(pod) == "4Gi" and FAMILY_LABEL not in pod.metadata.labels


def test_the_deprecated_mutate_all_pods_enforces_and_the_pod_says_so(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.names import MODE_ANNOTATION

    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MUTATE_ALL_PODS", "True")
    get_settings.cache_clear()
    history(engine)
    pod = kpo_pod()
    assert memory(pod) == SIZED
    said = pod.metadata.annotations[MODE_ANNOTATION]
    assert said == "enforce ([adaptive] mutate_all_pods, deprecated: set mode = enforce)"


def test_previous_oom_of_a_sanitised_run_escalates(engine: Any, mutate_all: None) -> None:
    killed = attempt(0, family="etl.load", run=RUN_ID)
    killed = type(killed)(**{**killed.__dict__, "key": TaskKey("etl", "load", RUN_ID, -1, 1),
                             "usage": Usage(peak_kind=PeakKind.CENSORED), "exit_reason": ExitReason.OOM_KILLED,
                             "memory_limit_bytes": 4 * GIB})  # fmt: skip
    sql_store(engine).record([killed])
    pod = kpo_pod(try_number=2)
    assert memory(pod) == "8192Mi"
    assert "OOM-killed" in pod.metadata.annotations[DECISION_ANNOTATION]


def test_a_failure_inside_leaves_the_pod_exactly_as_it_was(
    engine: Any, mutate_all: None, caplog: pytest.LogCaptureFixture
) -> None:
    history(engine)
    pod = KubernetesPodOperator(
        task_id="load", image="busybox",
        container_resources=k8s.V1ResourceRequirements(limits={"memory": "plenty"}),
    ).build_pod_request_obj(cast(Any, {"ti": SimpleNamespace(dag_id="etl", task_id="load", map_index=-1, try_number=1),
                             "run_id": RUN_ID, "dag": SimpleNamespace()}), dry_run=True)  # fmt: skip
    before = copy.deepcopy(pod)
    with caplog.at_level(logging.WARNING):
        pod_mutation_hook(pod)  # run again directly: it must not raise either
    assert pod == before
    assert FAMILY_LABEL not in pod.metadata.labels
    # the pod's own mistake is said in one line naming the pod, without a traceback
    said = [r for r in caplog.records if "plenty" in r.getMessage()]  # built, and run again here
    assert len(said) == 2 and all(r.exc_info is None for r in said)
    assert said[-1].getMessage() == (
        f"airflow-adaptive: pod {pod.metadata.name} memory limit: 'plenty' is not a Kubernetes quantity "
        "(e.g. 512Mi, 1.5Gi, 2G); the pod is left as it was"
    )


def executor_pod(memory: str | None = None) -> k8s.V1Pod:
    """A KubernetesExecutor worker pod; Airflow's PodGenerator calls our hook."""
    asked = (
        k8s.V1ResourceRequirements(requests={"memory": memory}, limits={"memory": memory}) if memory else None
    )
    return PodGenerator.construct_pod(
        dag_id="etl", task_id="transform", pod_id="etl-transform-abc", try_number=1, kube_image="apache/airflow:3.3.2",
        date=datetime(2026, 11, 25, tzinfo=timezone.utc), args=["airflow", "tasks", "run"], pod_override_object=None,
        base_worker_pod=k8s.V1Pod(metadata=k8s.V1ObjectMeta(), spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="base", resources=asked)])),
        namespace="airflow", scheduler_job_id="7", run_id=RUN_ID, with_mutation_hook=True,
    )  # fmt: skip


def test_kubernetes_executor_worker_pod(engine: Any, mutate_all: None) -> None:
    history(engine, family="etl.transform")
    pod = executor_pod()
    assert memory(pod) == SIZED
    assert (
        pod.metadata.labels["airflow-worker"] == "7" and pod.metadata.labels[FAMILY_LABEL] == "etl.transform"
    )
    validate_pod(pod)


def test_a_new_executor_task_keeps_its_request_beside_other_executor_tasks_history(
    engine: Any, mutate_all: None
) -> None:
    """Every worker runs Airflow's image and task runner: that makes no family a donor of another's."""
    from airflow_adaptive.kubernetes.pods import tool_of

    image, program = tool_of("apache/airflow:3.3.2", None, ["airflow", "tasks", "run"])  # as executor_pod's
    tiny = [
        replace(attempt(i, family="small_dag.tiny", peak=GIB // 8), image=image, program=program)
        for i in range(6)
    ]
    sql_store(engine).record(tiny)
    pod = executor_pod(memory="8Gi")
    assert pod.metadata.labels[FAMILY_LABEL] == "etl.transform" and memory(pod) == "8Gi"
    assert "similar family" not in pod.metadata.annotations[DECISION_ANNOTATION]
    validate_pod(pod)


def test_executor_pod_gets_the_priority_class_the_cluster_has(
    engine: Any, mutate_all: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_adaptive.kubernetes import priority_classes as classes
    from airflow_adaptive.kubernetes.names import PRIORITY_ANNOTATION
    from tests.fake_kubernetes import FakeKubernetesApi

    history(engine, family="etl.transform")
    with FakeKubernetesApi(tmp_path, lambda pod: 1) as api:
        monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__IN_CLUSTER", "False")
        monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE", str(api.kubeconfig))
        for manifest in classes.manifests():
            api.priority_classes[manifest["metadata"]["name"]] = manifest
        pod = executor_pod()
    classes.forget()  # the cluster's classes were cached while it was there
    assert pod.spec.priority_class_name == "adaptive-lff-high"  # the only family, nothing behind it
    assert "5 successful attempts" in pod.metadata.annotations[PRIORITY_ANNOTATION]
    validate_pod(pod)
    gone = executor_pod()  # the API server is gone now: no class, and the pod is still sized
    assert gone.spec.priority_class_name is None and memory(gone) == SIZED


def operator_pod(mode: str) -> k8s.V1Pod:
    """The operator's pod, its mode set by the operator's own argument."""
    from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator

    op = AdaptiveKubernetesPodOperator(
        task_id="load", task_family="etl.load", image="busybox", cmds=["true"], mode=mode,
        container_resources=k8s.V1ResourceRequirements(requests={"memory": "4Gi"}, limits={"memory": "4Gi"}),
    )  # fmt: skip
    ti = SimpleNamespace(dag_id="etl", task_id="load", map_index=-1, try_number=1, run_id=RUN_ID)
    return op.build_pod_request_obj(
        cast(Any, {"ti": ti, "run_id": RUN_ID, "dag": SimpleNamespace()}), dry_run=True
    )


@pytest.mark.parametrize("mode", ["observe", "recommend", "enforce"])
@pytest.mark.parametrize("kind", ["plain KPO", "operator"])
def test_each_mode_on_a_kpo_pod(
    engine: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, mode: str, kind: str
) -> None:
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.names import MODE_ANNOTATION, MODE_LABEL

    history(engine)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MODE", mode)
    get_settings.cache_clear()
    with caplog.at_level(logging.INFO):
        pod = kpo_pod() if kind == "plain KPO" else operator_pod(mode)
    validate_pod(pod)
    if kind == "plain KPO":  # the hook's log line says what the pod gets (the operator's: its task log)
        (logged,) = [r.getMessage() for r in caplog.records if "P95 of peaks" in r.getMessage()]
        assert ("keeps the user's resources; would give adaptive: P95" in logged) == (mode != "enforce")
    source = "[adaptive] mode" if kind == "plain KPO" else "task"
    assert pod.metadata.annotations[MODE_ANNOTATION] == f"{mode} ({source})"
    assert pod.metadata.labels[MODE_LABEL] == mode
    resources = pod.spec.containers[0].resources
    if mode == "enforce":
        assert memory(pod) == SIZED and resources.requests["memory"] == SIZED
    else:  # byte-identical to what the user wrote
        assert (
            resources.to_dict()
            == k8s.V1ResourceRequirements(requests={"memory": "4Gi"}, limits={"memory": "4Gi"}).to_dict()
        )
        assert "would give adaptive: P95 of peaks" in pod.metadata.annotations[DECISION_ANNOTATION]
        assert (
            not (pod.spec.affinity and pod.spec.affinity.node_affinity)
            and pod.spec.priority_class_name is None
        )


def test_a_family_rule_overrides_the_dag_and_the_operator(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.names import MODE_ANNOTATION

    history(engine)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__FAMILY_MODES", "etl.*=observe")
    get_settings.cache_clear()
    pod = operator_pod("enforce")
    assert memory(pod) == "4Gi"
    assert pod.metadata.annotations[MODE_ANNOTATION] == "observe ([adaptive] family_modes)"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [("MODE", "sometimes", "[adaptive] mode: 'sometimes' is not a mode"),
     ("FAMILY_MODES", "etl.*", "[adaptive] family_modes: 'etl.*' is not family=mode"),
     ("FAMILY_MODES", "a=enforce;b=observe", "'a=enforce;b=observe' is not one family=mode (separate rules "
                                             "with commas)"),
     ("FAMILY_MODES", "a==enforce", "'a==enforce' is not one family=mode")],
)  # fmt: skip
def test_a_bad_mode_setting_is_a_typed_error_naming_the_option(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    from airflow_adaptive.config import load_settings
    from airflow_adaptive.exceptions import InvalidConfigError

    monkeypatch.setenv(f"AIRFLOW__ADAPTIVE__{name}", value)
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        load_settings()


def test_a_bad_operator_mode_is_a_typed_error_when_the_dag_is_parsed() -> None:
    from airflow_adaptive.exceptions import InvalidConfigError
    from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator

    with pytest.raises(InvalidConfigError, match="task 't': mode: 'sometimes' is not a mode"):
        AdaptiveKubernetesPodOperator(task_id="t", image="busybox", mode="sometimes")


def test_a_malformed_setting_leaves_every_pod_as_asked_and_is_said_once(
    engine: Any, mutate_all: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A typo in [adaptive] (here a true/false option that is neither) stops nothing: pods keep the
    user's resources, the reason is logged once, and no traceback is logged per pod."""
    from airflow_adaptive.config import get_settings

    history(engine)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__WARM_STARTS", "maybe")
    get_settings.cache_clear()  # recording the history read the settings before the typo
    with caplog.at_level(logging.WARNING):
        pods = [kpo_pod(), kpo_pod()]
    assert [memory(p) for p in pods] == ["4Gi", "4Gi"]
    assert all(FAMILY_LABEL not in (p.metadata.labels or {}) for p in pods)
    said = [r.getMessage() for r in caplog.records if "warm_starts" in r.getMessage()]
    assert said == ["airflow-adaptive: [adaptive] warm_starts = 'maybe' is not true or false; "
                    "pods keep the user's resources and are not recorded"]  # fmt: skip
    assert not [r for r in caplog.records if "pod_mutation_hook failed" in r.getMessage()]


@pytest.mark.parametrize(
    ("name", "value", "read"),
    [("WARM_STARTS", "True  # borrow a similar family's model", True), ("SIZE_CPU", "off", False),
     ("LIMIT_TO_REQUEST_RATIO", "1", 1.0), ("LIMIT_TO_REQUEST_RATIO", "1.5", 1.5)],
)  # fmt: skip
def test_settings_airflow_accepts_are_read(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, read: object
) -> None:
    from airflow_adaptive.config import load_settings

    monkeypatch.setenv(f"AIRFLOW__ADAPTIVE__{name}", value)
    assert getattr(load_settings().sizing, name.lower()) == read


def test_the_logged_decision_says_what_the_pod_gets_in_every_mode() -> None:
    """The operator logs the same line as the hook, to its task log: observe and recommend keep
    the user's resources, and say what enforcing would have given."""
    from airflow_adaptive.core.modes import Mode, ModeChoice

    enforced = ModeChoice(Mode.ENFORCE, "operator").log_line("adaptive", "P95 of peaks -> request 2 GiB")
    assert enforced == "airflow-adaptive [enforce (operator), adaptive] P95 of peaks -> request 2 GiB"
    for mode in (Mode.OBSERVE, Mode.RECOMMEND):
        kept = ModeChoice(mode, "DAG tag").log_line("adaptive", "P95 of peaks -> request 2 GiB")
        assert kept == (
            f"airflow-adaptive [{mode.value} (DAG tag)] keeps the user's resources; "
            "would give adaptive: P95 of peaks -> request 2 GiB"
        )


def test_a_limit_alone_is_the_request_too(engine: Any, mutate_all: None) -> None:
    """The API server defaults a missing request to the limit: a pod that sets only a limit asked
    for that much, and is sized as one that sets both."""
    history(engine)
    op = KubernetesPodOperator(
        task_id="load", image="busybox", cmds=["true"],
        container_resources=k8s.V1ResourceRequirements(limits={"memory": "4Gi"}),
    )  # fmt: skip
    ti = SimpleNamespace(dag_id="etl", task_id="load", map_index=-1, try_number=1)
    pod = op.build_pod_request_obj(
        cast(Any, {"ti": ti, "run_id": RUN_ID, "dag": SimpleNamespace()}), dry_run=True
    )
    both = kpo_pod(memory="4Gi")
    validate_pod(pod)
    assert memory(pod) == memory(both) == SIZED
    assert "(user asked 4 GiB)" in pod.metadata.annotations[DECISION_ANNOTATION]
