"""The profiling DAG end to end: real Airflow (dag.test), FakeKubernetesApi nodes, the real profiler."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.kubernetes.names import CAPABILITY_PREFIX, GROUP_LABEL
from tests.conftest import shipped_manifest, sql_store, validate_pod
from tests.fake_kubernetes import FakeKubernetesApi

ROOT = Path(__file__).resolve().parents[2]
HAVE_TOOLS = bool(shutil.which("sysbench") and shutil.which("fio") and shutil.which("airflow-adaptive"))
REQUIRED = os.environ.get("ADAPTIVE_REQUIRE_PROFILER") == "1"


@pytest.mark.skipif(
    not HAVE_TOOLS and not REQUIRED, reason="sysbench, fio or the airflow-adaptive command missing"
)
def test_profiling_dag_profiles_pins_groups_and_labels(
    airflow_home: Path, tmp_path: Path, engine: Any
) -> None:
    (airflow_home / "dags" / "adaptive_profile_cluster.py").write_text(
        (ROOT / "dags" / "adaptive_profile_cluster.py").read_text()
    )
    from airflow_adaptive.example_dags.adaptive_profile_cluster import dag

    with FakeKubernetesApi(tmp_path, lambda pod: 10 * 1024**2) as api:
        api.add_node("node-a", gpus=1, labels={f"{CAPABILITY_PREFIX}old": "true", GROUP_LABEL: "7"})
        api.add_node("node-b")
        api.add_node("cordoned", unschedulable=True)
        api.add_node("not-ready", ready=False)
        conf = {"config_file": str(api.kubeconfig), "kubernetes_conn_id": "", "namespace": "default",
                "seconds": 1, "repeats": 2, "fio_size": "4M"}  # fmt: skip
        dr = dag.test(run_conf=conf)
    assert dr.state == "success"
    for created in api.created:
        validate_pod(created)
    pinned = sorted(p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in api.created)
    assert pinned == ["node-a", "node-b"]  # one pod per schedulable node, pinned to it
    assert sorted(api.priority_classes) == ["adaptive-lff-high", "adaptive-lff-low", "adaptive-lff-medium"]
    command = api.created[0]["spec"]["containers"][0]["command"]
    assert command[:3] == ["airflow-adaptive", "profile-node", "--json"] and "--output" in command
    assert command[command.index("--repeats") + 1] == "2"
    pod_security, container = (
        api.created[0]["spec"]["securityContext"],
        api.created[0]["spec"]["containers"][0],
    )
    assert (
        pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] == 10001
    )  # the profiler image's user
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    patched = dict(api.node_patches)
    assert set(patched) == {"node-a", "node-b", "cordoned", "not-ready"}
    labels_a = patched["node-a"]["metadata"]["labels"]
    assert labels_a[GROUP_LABEL] == "1" and labels_a[f"{CAPABILITY_PREFIX}gpu"] == "true"
    assert labels_a[f"{CAPABILITY_PREFIX}old"] is None  # a capability the node no longer offers is removed
    assert labels_a["adaptive.airflow.io/rank-cpu-events-per-s"] == "1"
    assert f"{CAPABILITY_PREFIX}gpu" not in patched["node-b"]["metadata"]["labels"]
    assert patched["cordoned"]["metadata"]["labels"] == {}  # not profiled, nothing of ours to remove
    assert api.nodes["node-a"]["metadata"]["labels"][GROUP_LABEL] == "1"
    stored = {n.name: n for n in sql_store(engine).nodes()}
    assert set(stored) == {"node-a", "node-b"}
    assert stored["node-a"].group_id == 1 and stored["node-a"].profile.cores == 2
    assert (
        "gpu" in stored["node-a"].profile.capabilities
        and stored["node-a"].profile.benchmarks["cpu_events_per_s"] > 0
    )
    assert set(stored["node-a"].profile.noise) == set(stored["node-a"].profile.benchmarks)  # CV / sqrt(2)


def test_with_no_cluster_configured_the_dag_fails_at_once_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the operator's pods: `airflow dags test` on a laptop is told why, without minutes of retries."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_adaptive.operators.profile_tasks import kubernetes_hook

    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'none.yaml'}{os.pathsep}{tmp_path}")  # a folder is none
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(
        AirflowFailException, match=r"^no Kubernetes cluster is configured here .*: nothing to profile$"
    ):
        kubernetes_hook({"kubernetes_conn_id": "no_such_connection"})
    config = tmp_path / "kubeconfig.yaml"
    config.write_text("{}")
    assert kubernetes_hook({"config_file": str(config)}) is not None  # there: the client's to judge


def test_the_shipped_rbac_grants_what_the_profiling_dag_and_pod_builders_call_and_no_more() -> None:
    docs = {(d["kind"], d["metadata"]["name"]): d for d in shipped_manifest("rbac.yaml")}

    def rules(kind: str, name: str) -> set[tuple[str, ...]]:
        return {(res, *sorted(r["verbs"])) for r in docs[(kind, name)]["rules"] for res in r["resources"]}

    assert rules("ClusterRole", "airflow-adaptive-profiler") == {  # list_node, patch_node, PriorityClasses
        ("nodes", "list", "patch"),
        ("priorityclasses", "create", "list"),
    }
    assert rules("ClusterRole", "airflow-adaptive-pod-builder") == {("priorityclasses", "list")}
    assert rules("ClusterRole", "airflow-adaptive-live-load") == {("nodes", "list"), ("pods", "list")}
    assert rules("Role", "airflow-adaptive-metrics-reader") == {("pods", "get")}  # metrics.k8s.io
    bound = {
        (d["roleRef"]["name"], s["name"]) for d in docs.values() if "roleRef" in d for s in d["subjects"]
    }
    assert bound == {  # node patches for the profiling DAG's own account alone; live load for workers
        ("airflow-adaptive-profiler", "airflow-adaptive-profiler"),
        ("airflow-adaptive-pod-builder", "airflow-scheduler"),
        ("airflow-adaptive-pod-builder", "airflow-worker"),
        ("airflow-adaptive-live-load", "airflow-worker"),
        ("airflow-adaptive-metrics-reader", "airflow-worker"),
        ("airflow-adaptive-metrics-reader", "airflow-triggerer"),
    }
