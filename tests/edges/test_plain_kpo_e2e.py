"""Plain KubernetesPodOperator tasks, no DAG change: the task policy gives them the recording
callback, the pod-mutation hook their mode. Real Airflow (``dag.test`` of a DAG loaded through a
DagBag, so cluster policies apply), real database, FakeKubernetesApi."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from airflow.dag_processing.dagbag import DagBag

from airflow_adaptive.config import get_settings
from airflow_adaptive.core.units import GIB, MIB
from airflow_adaptive.kubernetes.names import DECISION_ANNOTATION, MODE_ANNOTATION, MODE_LABEL
from airflow_adaptive.operators.callback import AdaptivePodCallback
from tests.conftest import sql_store, validate_pod
from tests.edges.test_operator_e2e import stored, unfinished
from tests.factories import attempt
from tests.fake_kubernetes import FakeKubernetesApi

DAG = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from kubernetes.client import models as k8s

with DAG(dag_id={dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, tags={tags!r},
         default_args={{"retries": 2, "retry_delay": timedelta(seconds=0)}}) as dag:
    KubernetesPodOperator(
        task_id="load", image="busybox", cmds={cmds!r}, arguments={arguments!r},
        container_resources=k8s.V1ResourceRequirements(
            requests={{"memory": "256Mi", "cpu": "100m"}}, limits={{"memory": "256Mi"}}),
        config_file={kubeconfig!r}, in_cluster=False, namespace="default", deferrable={deferrable!r},
        poll_interval=0.1, base_container_status_polling_interval=0.1, startup_check_interval_seconds=0,
        startup_timeout_seconds=5, get_logs=True,
    )
"""
USER = {"limits": {"memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}


def run_plain(airflow_home: Path, api: FakeKubernetesApi, dag_id: str, *, deferrable: bool,
              tags: tuple[str, ...] = (), command: bool = True) -> Any:  # fmt: skip
    path = airflow_home / "dags" / f"{dag_id}.py"  # in the DAG bundle: dag.test() syncs it
    source = DAG.format(dag_id=dag_id, kubeconfig=str(api.kubeconfig), deferrable=deferrable, tags=list(tags),
                        cmds=["sh", "-c"] if command else None, arguments=["echo loading"] if command else None)  # fmt: skip
    path.write_text(textwrap.dedent(source))
    bag = DagBag(dag_folder=str(path), safe_mode=False)
    assert not bag.import_errors
    return bag.get_dag(dag_id).test()


@pytest.fixture
def observe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MODE", "observe")
    get_settings.cache_clear()


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_plain_kpo_attempts_are_recorded_in_observe_mode_and_keep_the_users_pod(
    airflow_home: Path, tmp_path: Path, engine: Any, observe: None, deferrable: bool
) -> None:
    sql_store(engine).record([attempt(i, family="plain.load", peak=GIB) for i in range(5)])
    dag_id = f"plain_{int(deferrable)}"
    with FakeKubernetesApi(tmp_path, lambda pod: 100 * MIB) as api:
        runs = [run_plain(airflow_home, api, dag_id, deferrable=deferrable) for _ in range(3)]
        assert not api.pods  # deleted at completion (on_finish_action="delete_pod")
    assert [r.state for r in runs] == ["success"] * 3 and len(api.deletions) == 3
    for body in api.created:
        pod = validate_pod(body)
        container = pod["spec"]["containers"][0]
        assert container["resources"] == USER  # byte-identical: observe changes no resource
        assert container["command"][:2] == ["/bin/sh", "-c"]  # wrapped, so its usage is reported
        assert pod["metadata"]["labels"][MODE_LABEL] == "observe"
        assert pod["metadata"]["annotations"][MODE_ANNOTATION] == "observe ([adaptive] mode)"
        assert "would give" in pod["metadata"]["annotations"][DECISION_ANNOTATION]
    rows = stored(engine, f"{dag_id}.load")
    assert sorted(r.run_id for r in rows) == sorted(r.run_id for r in runs)  # real run ids, not labels
    assert all(r.peak_memory_bytes == 100 * MIB and r.node_name == "node-a" for r in rows)
    assert all(r.strategy == "user" and r.user_request_bytes == 256 * MIB for r in rows)
    assert all((r.image, r.program) == ("busybox", "echo loading") for r in rows)
    assert unfinished(engine) == 0


def test_an_oom_kill_is_recorded_and_the_next_try_gets_more_in_enforce(
    airflow_home: Path, tmp_path: Path, engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MODE", "observe")  # the DAG's tag says enforce
    get_settings.cache_clear()

    def peak(pod: dict[str, Any]) -> int:  # more than the user's 256 Mi
        return 300 * MIB

    with FakeKubernetesApi(tmp_path, peak) as api:
        run = run_plain(airflow_home, api, "plain_oom", deferrable=False, tags=("adaptive:enforce",))
    assert run.state == "success"
    limits = [validate_pod(b)["spec"]["containers"][0]["resources"]["limits"]["memory"] for b in api.created]
    assert limits[0] == "256Mi" and len(limits) == 2  # cold family: the user's; then more
    rows = stored(engine, "plain_oom.load")
    assert [(r.try_number, r.exit_reason) for r in rows] == [(1, "OOMKilled"), (2, "Completed")]
    assert rows[1].memory_limit_bytes > rows[0].memory_limit_bytes
    assert api.created[0]["metadata"]["annotations"][MODE_ANNOTATION] == "enforce (DAG tag)"


def test_a_plain_kpo_pod_without_a_command_is_sampled_in_sync_mode(
    airflow_home: Path, tmp_path: Path, engine: Any, observe: None
) -> None:
    with FakeKubernetesApi(tmp_path, lambda pod: 100 * MIB) as api:
        api.metrics_memory = "150Mi"
        run = run_plain(airflow_home, api, "plain_entrypoint", deferrable=False, command=False)
    assert run.state == "success"
    assert not api.created[0]["spec"]["containers"][0].get("command")  # the image's entrypoint runs
    (row,) = stored(engine, "plain_entrypoint.load")
    assert (row.peak_memory_bytes, row.peak_kind) == (150 * MIB, "sampled")  # a lower bound


def test_the_task_policy_gives_plain_kpo_tasks_the_callback_and_leaves_the_operator_alone(
    airflow_home: Path, tmp_path: Path
) -> None:
    folder = airflow_home / "plain_dags" / "policy_only"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "d.py").write_text(
        textwrap.dedent("""
        from datetime import datetime
        from airflow.sdk import DAG
        from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
        from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
        with DAG(dag_id="policy_only", schedule=None, start_date=datetime(2026, 1, 1), tags=["adaptive:recommend"]):
            KubernetesPodOperator(task_id="plain", image="busybox")
            AdaptiveKubernetesPodOperator(task_id="ours", image="busybox")
    """)
    )
    dag = DagBag(dag_folder=str(folder), safe_mode=False).get_dag("policy_only")
    plain, ours = dag.get_task("plain"), dag.get_task("ours")
    assert AdaptivePodCallback in plain.callbacks and AdaptivePodCallback not in ours.callbacks
    assert plain.annotations["adaptive.airflow.io/dag-mode"] == "recommend"
    for task in (plain, ours):  # their KubernetesExecutor workers only wait for their pods
        assert task.executor_config["pod_override"].metadata.labels["adaptive.airflow.io/opt-out"] == "true"


def test_without_a_cluster_the_decision_is_logged_and_the_task_fails_at_once(
    airflow_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    path = airflow_home / "dags" / "no_cluster.py"
    path.write_text(
        textwrap.dedent("""
        from datetime import datetime, timedelta
        from airflow.sdk import DAG
        from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
        with DAG(dag_id="no_cluster", schedule=None, start_date=datetime(2026, 1, 1),
                 default_args={"retries": 2, "retry_delay": timedelta(seconds=30)}):
            AdaptiveKubernetesPodOperator(task_id="t", image="busybox", cmds=["true"], namespace="default")
    """)
    )
    dag = DagBag(dag_folder=str(path), safe_mode=False).get_dag("no_cluster")
    run = dag.test()
    printed = "".join(capfd.readouterr())  # the task's log
    assert run.state == "failed"
    ti = run.get_task_instance("t")
    assert ti.try_number == 1  # failed for good: no retry waits for a cluster that is not there
    decision, failure = (
        printed.find("airflow-adaptive [enforce (operator)"),
        printed.find("no Kubernetes cluster is"),
    )
    assert 0 <= decision < failure  # the decision, logged before the failure
