"""The operator end to end: real Airflow 3.3 (``dag.test``), real database, FakeKubernetesApi."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value
from sqlalchemy import func, select

from airflow_adaptive.config import get_settings
from airflow_adaptive.core.units import MIB
from airflow_adaptive.kubernetes.names import DECISION_ANNOTATION, FAMILY_LABEL
from airflow_adaptive.store.tables import task_attempt, unfinished_attempt
from tests.conftest import validate_pod
from tests.fake_kubernetes import FakeKubernetesApi

DAG_TEMPLATE = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from kubernetes.client import models as k8s
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator

with DAG(dag_id={dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={{"retries": {retries}, "retry_delay": timedelta(seconds=0)}}) as dag:
    AdaptiveKubernetesPodOperator(
        task_id="work",
        task_family={family!r},
        image="busybox",
        cmds={cmds!r},
        arguments={arguments!r},
        container_resources=k8s.V1ResourceRequirements(
            requests={{"memory": {memory!r}, "cpu": "100m"}}, limits={{"memory": {memory!r}}}),
        config_file={kubeconfig!r},
        in_cluster=False,
        namespace="default",
        deferrable={deferrable!r},
        poll_interval=0.1,
        base_container_status_polling_interval=0.1,
        startup_check_interval_seconds=0,
        get_logs=True,
        required_capabilities={capabilities!r},
        startup_timeout_seconds=5,
    )
"""


def run_dag(airflow_home: Path, api: FakeKubernetesApi, dag_id: str, *, deferrable: bool, memory: str = "256Mi",
            retries: int = 2, family: str = "e2e.work", command: bool = True,
            capabilities: set[str] | None = None) -> Any:  # fmt: skip
    path = airflow_home / "dags" / f"{dag_id}.py"
    path.write_text(textwrap.dedent(DAG_TEMPLATE.format(
        dag_id=dag_id, retries=retries, family=family, memory=memory,
        kubeconfig=str(api.kubeconfig), deferrable=deferrable, capabilities=capabilities or set(),
        cmds=["sh", "-c"] if command else None, arguments=["echo working; echo oops >&2"] if command else None)))  # fmt: skip
    spec = importlib.util.spec_from_file_location(dag_id, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = next(v for v in vars(module).values() if getattr(v, "dag_id", None) == dag_id)
    return dag.test()


def stored(engine: Any, family: str) -> list[Any]:
    with engine.connect() as conn:
        return conn.execute(
            select(task_attempt)
            .where(task_attempt.c.task_family == family)
            .order_by(task_attempt.c.try_number)
        ).all()


def unfinished(engine: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(unfinished_attempt)).scalar())


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_successful_pod_is_recorded_with_its_usage(
    airflow_home: Path, tmp_path: Path, engine: Any, deferrable: bool
) -> None:
    with FakeKubernetesApi(tmp_path, lambda pod: 100 * MIB) as api:
        dr = run_dag(airflow_home, api, f"e2e_ok_{int(deferrable)}", deferrable=deferrable)
    assert dr.state == "success"
    assert len(api.created) == 1
    pod = validate_pod(api.created[0])
    labels = pod["metadata"]["labels"]
    assert labels["dag_id"] == f"e2e_ok_{int(deferrable)}" and labels["task_id"] == "work"
    assert labels["run_id"] == make_safe_label_value(dr.run_id)
    assert labels["kubernetes_pod_operator"] == "True" and labels["try_number"] == "1"
    assert labels[FAMILY_LABEL] == "e2e.work"
    assert pod["spec"]["containers"][0]["command"][:2] == ["/bin/sh", "-c"]
    rows = stored(engine, "e2e.work")
    assert len(rows) == 1
    row = rows[0]
    assert (row.exit_reason, row.exit_code, row.try_number) == ("Completed", 0, 1)
    assert row.peak_memory_bytes == 100 * MIB and row.peak_kind == "measured"
    assert row.cpu_core_seconds == pytest.approx(2.5)
    assert (row.read_bytes, row.write_bytes) == (4096, 8192)
    assert row.memory_limit_bytes == 256 * MIB
    assert row.node_name == "node-a" and row.run_id == dr.run_id
    assert row.strategy == "user"
    assert (row.image, row.program) == ("busybox", "echo working")  # its own command, not the wrapper


def noted_start(engine: Any) -> Any:
    """The note's start and whether it says the pod runs yet."""
    with engine.connect() as conn:
        return conn.execute(select(unfinished_attempt.c.started_at, unfinished_attempt.c.running)).one()


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_note_starts_again_when_the_pod_starts_running(
    airflow_home: Path, tmp_path: Path, engine: Any, deferrable: bool
) -> None:
    noted: dict[str, Any] = {}

    def peak(pod: Any) -> int:  # the container runs while the operator waits for the pod to start
        noted["created"] = noted_start(engine)
        return 100 * MIB

    with FakeKubernetesApi(tmp_path, peak) as api:
        api.on_log = lambda key: noted.setdefault("running", noted_start(engine))  # after the start
        dr = run_dag(
            airflow_home, api, f"e2e_started_{int(deferrable)}", deferrable=deferrable, family="e2e.started"
        )
    assert dr.state == "success" and unfinished(engine) == 0
    (created, running_at_creation), (started, running) = noted["created"], noted["running"]
    assert started > created and not running_at_creation and running  # Pending time is not time run


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_oom_killed_try_is_censored_and_the_retry_gets_more_memory(
    airflow_home: Path, tmp_path: Path, engine: Any, deferrable: bool
) -> None:
    noted: list[int] = []  # unfinished attempts noted while each pod runs

    def peak(pod: Any) -> int:
        noted.append(unfinished(engine))
        return 300 * MIB

    with FakeKubernetesApi(tmp_path, peak) as api:
        dr = run_dag(airflow_home, api, f"e2e_oom_{int(deferrable)}", deferrable=deferrable, family="e2e.oom")
    assert dr.state == "success"
    assert set(noted) == {1} and unfinished(engine) == 0  # each try noted, then removed by its recording
    limits = [validate_pod(p)["spec"]["containers"][0]["resources"]["limits"]["memory"] for p in api.created]
    assert limits == ["256Mi", "512Mi"]
    second = api.created[1]["metadata"]
    assert "OOM-killed" in second["annotations"][DECISION_ANNOTATION]
    rows = stored(engine, "e2e.oom")
    assert [(r.try_number, r.exit_reason, r.peak_kind) for r in rows] == [
        (1, "OOMKilled", "censored"),
        (2, "Completed", "measured"),
    ]
    assert rows[0].exit_code == 137 and rows[0].peak_memory_bytes is None
    assert rows[0].memory_limit_bytes == 256 * MIB and rows[1].memory_limit_bytes == 512 * MIB
    assert rows[1].peak_memory_bytes == 300 * MIB


def test_a_try_at_the_cap_fails_without_further_retries(
    airflow_home: Path, tmp_path: Path, engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MAX_ALLOCATABLE_MEMORY", "512Mi")
    with FakeKubernetesApi(tmp_path, lambda pod: 600 * MIB) as api:
        dr = run_dag(airflow_home, api, "e2e_cap", deferrable=False, retries=3, family="e2e.cap")
    assert dr.state == "failed"
    limits = [p["spec"]["containers"][0]["resources"]["limits"]["memory"] for p in api.created]
    assert limits == ["256Mi", "512Mi"]  # retries=3, but a try at the cap ends the task
    assert [r.exit_reason for r in stored(engine, "e2e.cap")] == ["OOMKilled", "OOMKilled"]


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_malformed_adaptive_option_never_fails_the_task(
    airflow_home: Path, tmp_path: Path, engine: Any, deferrable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a pod is at stake a bad [adaptive] value is logged, not raised: the pod is the user's,
    unwrapped, and the task succeeds (the commands name the option and exit 2 instead)."""
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MAX_ALLOCATABLE_MEMORY", "lots")
    get_settings.cache_clear()
    with FakeKubernetesApi(tmp_path, lambda pod: 100 * MIB) as api:
        dr = run_dag(airflow_home, api, f"e2e_badconf_{int(deferrable)}", deferrable=deferrable,
                     family="e2e.badconf", memory="300Mi")  # fmt: skip
    assert dr.state == "success"
    pod = validate_pod(api.created[0])
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"]["memory"] == "300Mi" and container["command"] == ["sh", "-c"]
    assert FAMILY_LABEL not in pod["metadata"]["labels"]
    assert stored(engine, "e2e.badconf") == []


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_entrypoint_pods_are_sampled_from_the_metrics_api(
    airflow_home: Path, tmp_path: Path, engine: Any, deferrable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__METRICS_SAMPLE_INTERVAL_SECONDS", "0.05")
    family = f"e2e.sampled.{int(deferrable)}"
    with FakeKubernetesApi(tmp_path, lambda pod: 100 * MIB) as api:
        api.metrics_memory = "150Mi"
        dr = run_dag(
            airflow_home,
            api,
            f"e2e_sampled_{int(deferrable)}",
            deferrable=deferrable,
            family=family,
            command=False,
        )
    assert dr.state == "success"
    assert not api.created[0]["spec"]["containers"][0].get("command")
    assert any(path.startswith("/apis/metrics.k8s.io/") for _, path in api.requests)
    (row,) = stored(engine, family)
    assert (row.peak_memory_bytes, row.peak_kind) == (150 * MIB, "sampled")


def test_oom_errors_say_what_happened_and_what_comes_next(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
    from airflow_adaptive.operators.pod import (
        AdaptiveKubernetesPodOperator,
        AdaptiveMemoryCapReached,
        AdaptiveOOMKilled,
    )

    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MAX_ALLOCATABLE_MEMORY", "1Gi")
    op = AdaptiveKubernetesPodOperator(task_id="t", image="busybox")

    def killed_at(limit: int) -> Observation:
        return Observation(TaskKey("d", "t", "r", -1, 2), "d.t", Usage(peak_kind=PeakKind.CENSORED),
                           ExitReason.OOM_KILLED, 137, limit, limit)  # fmt: skip

    retry = op._oom_error(killed_at(512 * MIB))
    assert isinstance(retry, AdaptiveOOMKilled) and not isinstance(retry, AirflowFailException)
    assert "OOM-killed at 512 MiB (try 2); the next try gets more memory" in str(retry)
    final = op._oom_error(killed_at(1024 * MIB))
    assert isinstance(final, AdaptiveMemoryCapReached) and isinstance(final, AirflowFailException)
    assert "largest allocatable memory" in str(final) and "retrying cannot help" in str(final)


def test_a_missing_capability_waits_in_the_triggerer_not_in_a_worker(
    airflow_home: Path, tmp_path: Path, engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Deferrable mode: the pod is created, then the worker gives its slot back while the pod is Pending."""
    from kubernetes.client import ApiClient

    with FakeKubernetesApi(tmp_path, lambda pod: 10 * MIB) as api:
        api.add_node("cpu-only")
        dr = run_dag(airflow_home, api, "e2e_pending", deferrable=True, retries=0, family="e2e.pending",
                     capabilities={"gpu"})  # fmt: skip
    assert dr.state == "failed"  # the startup timeout ends the wait in this test
    (pod,) = api.created
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms[0]["matchExpressions"] == [
        {"key": "capability.adaptive.airflow.io/gpu", "operator": "In", "values": ["true"]}
    ]
    placement = pod["metadata"]["annotations"]["adaptive.airflow.io/placement"]
    assert "no node groups profiled yet" in placement and "requires gpu (required node affinity" in placement
    assert not api.logs  # the container never ran: the pod stayed Pending
    # Who polled the Pending pod: the triggerer's asyncio client, not the task's (worker's) client.
    worker_agent = ApiClient().user_agent
    name = pod["metadata"]["name"]
    polls = [
        ua
        for (method, path), ua in zip(api.requests, api.user_agents, strict=True)
        if method == "GET" and path.endswith(name)
    ]
    by_trigger = sum(ua != worker_agent for ua in polls)
    assert by_trigger >= 10 and by_trigger > 5 * (len(polls) - by_trigger)
    (row,) = stored(engine, "e2e.pending")  # the try is recorded, with nothing measured
    assert (row.exit_reason, row.peak_memory_bytes, row.node_name) == ("Unschedulable", None, None)


def test_a_killed_task_records_nothing(engine: Any) -> None:
    """``on_kill`` (Airflow's public hook) marks the try: its pod's state says nothing about memory."""
    from types import SimpleNamespace

    from kubernetes.client import models as k8s

    from airflow_adaptive.advisor import Advisor
    from airflow_adaptive.attempt import task_key
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.names import MODE_LABEL
    from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator

    op = AdaptiveKubernetesPodOperator(task_id="t", image="busybox", on_kill_action="keep_pod")
    context = {"ti": SimpleNamespace(dag_id="d", task_id="t", run_id="r", map_index=-1, try_number=1)}
    finished = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p", labels={MODE_LABEL: "enforce"}),
        status=k8s.V1PodStatus(phase="Succeeded"),
    )
    assert op._record(finished, context) is not None  # recorded while not killed
    op.on_kill()
    Advisor(get_settings()).recording.started("f", task_key(context))  # type: ignore[arg-type]
    assert unfinished(engine) == 1
    assert op._record(finished, context) is None
    assert unfinished(engine) == 0  # nor counted as unfinished any longer


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_an_attempt_builds_one_advisor_per_process(
    airflow_home: Path, tmp_path: Path, engine: Any, deferrable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_adaptive import weight_rule
    from airflow_adaptive.advisor import Advisor

    # the scheduler's least-finished-first weight, read when the task instance is created, is not
    # the attempt's (another process in a deployment)
    monkeypatch.setattr(weight_rule, "family_progress", lambda task_family: None)
    built: list[Advisor] = []
    original = Advisor.__init__

    def counting(self: Advisor, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Advisor, "__init__", counting)
    with FakeKubernetesApi(tmp_path, lambda pod: 100 * MIB) as api:
        dr = run_dag(airflow_home, api, f"e2e_one_{int(deferrable)}", deferrable=deferrable)
    assert dr.state == "success" and len(stored(engine, "e2e.work")) == 1
    # sync: decide, note, record through one; deferrable: the worker that defers, the triggerer that
    # notes the start, the worker that resumes and records (three processes in a deployment)
    assert len(built) == (3 if deferrable else 1)
