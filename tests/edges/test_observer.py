"""KubernetesExecutor worker pods end to end: built by Airflow's own PodGenerator from the executor's
template (then our hook), run by FakeKubernetesApi, deleted by "the executor" at completion, and
recorded by the observer (``airflow-adaptive observe``) that holds them with a finalizer."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.cncf.kubernetes import kubernetes_executor_templates
from airflow.providers.cncf.kubernetes.pod_generator import PodGenerator
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client import models as k8s

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.units import GIB, MIB
from airflow_adaptive.exceptions import HistoryUnavailableError
from airflow_adaptive.kubernetes.names import MODE_ANNOTATION, RECORD_FINALIZER
from airflow_adaptive.observer import lease as lease_module
from airflow_adaptive.observer.lease import LeaderLease
from airflow_adaptive.observer.loop import Observer
from airflow_adaptive.store.spool import Spool
from tests.conftest import shipped_config_map, shipped_manifest, sql_store, validate_pod
from tests.edges.test_operator_e2e import stored, unfinished
from tests.factories import attempt
from tests.fake_kubernetes import FakeKubernetesApi

TEMPLATE = Path(kubernetes_executor_templates.__file__).parent / "basic_template.yaml"
NAMESPACE = "airflow"
FAMILY = "etl.transform"
USER_MEMORY = "1Gi"


class Clock:
    """The real time, moved on by ``offset``: the hook judges the Lease by the real clock, so the
    observers' clock must follow it however long the test runs."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(timezone.utc) + self.offset


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKubernetesApi]:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MODE", "enforce")
    get_settings.cache_clear()
    peaks: dict[str, int] = {}
    with FakeKubernetesApi(tmp_path, lambda pod: peaks.get(pod["metadata"]["name"], 300 * MIB)) as api:
        api.peaks = peaks  # type: ignore[attr-defined]
        monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__IN_CLUSTER", "False")
        monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE", str(api.kubeconfig))
        lease_module.forget()
        yield api
    lease_module.forget()


def client(api: FakeKubernetesApi) -> ApiClient:
    return kube_config.new_client_from_config(str(api.kubeconfig))


def observer(api: FakeKubernetesApi, identity: str, clock: Clock, advisor: Any = None) -> Observer:
    api_client = client(api)
    lease = LeaderLease(api_client, NAMESPACE, identity, clock=clock)
    return Observer(api_client, lease, advisor or (lambda: Advisor(get_settings())))


def worker_pod(
    run_id: str, try_number: int = 1, memory: str = USER_MEMORY, *, hook: bool = True
) -> k8s.V1Pod:
    """A worker pod as the KubernetesExecutor builds it: its template, the task's override, the hook."""
    override = k8s.V1Pod(spec=k8s.V1PodSpec(containers=[k8s.V1Container(
        name="base", resources=k8s.V1ResourceRequirements(requests={"memory": memory}, limits={"memory": memory}))]))  # fmt: skip
    return PodGenerator.construct_pod(
        dag_id="etl", task_id="transform", pod_id=f"etl-transform-{run_id}-{try_number}", try_number=try_number,
        kube_image="apache/airflow:3.3.2", date=None, args=["python", "-c", "print('transformed')"],
        pod_override_object=override, base_worker_pod=PodGenerator.deserialize_model_file(str(TEMPLATE)),
        namespace=NAMESPACE, scheduler_job_id="7", run_id=run_id, with_mutation_hook=hook,
    )  # fmt: skip


def run_and_delete(api: FakeKubernetesApi, pod: k8s.V1Pod) -> dict[str, Any]:
    """Create the pod, let it run to its end, then delete it as the executor does."""
    core = CoreV1Api(client(api))
    body = validate_pod(ApiClient().sanitize_for_serialization(pod))
    core.create_namespaced_pod(NAMESPACE, body)
    for _ in range(2):  # Pending on the first read, ended on the second
        ended = core.read_namespaced_pod(pod.metadata.name, NAMESPACE)
    core.delete_namespaced_pod(pod.metadata.name, NAMESPACE)
    return body | {"ended": ended}


def memory_limit(body: dict[str, Any]) -> str:
    return body["spec"]["containers"][0]["resources"]["limits"]["memory"]


def test_three_runs_an_oom_kill_and_a_larger_try_are_recorded_after_deletion(
    cluster: FakeKubernetesApi, engine: Any
) -> None:
    clock = Clock()
    watcher = observer(cluster, "observer-a", clock)
    assert watcher.cycle() == 0  # takes the Lease: from now on worker pods wait for it
    for run in ("r1", "r2", "r3"):
        body = run_and_delete(cluster, worker_pod(run))
        assert RECORD_FINALIZER in body["metadata"]["finalizers"]
        assert body["spec"]["containers"][0]["args"][:2] == ["bash", "-c"]  # the image's entrypoint runs it
        assert body["metadata"]["annotations"][MODE_ANNOTATION] == "enforce ([adaptive] mode)"
        assert (NAMESPACE, body["metadata"]["name"]) in cluster.pods  # deleted, held by the finalizer
        assert watcher.cycle() == 1
        assert (NAMESPACE, body["metadata"]["name"]) not in cluster.pods  # released, so gone
    rows = stored(engine, FAMILY)
    assert len(rows) == 3 and {r.run_id for r in rows} == {"r1", "r2", "r3"}
    assert all(r.peak_memory_bytes == 300 * MIB and r.node_name == "node-a" for r in rows)
    assert all(r.exit_reason == "Completed" and r.user_request_bytes == GIB for r in rows)
    assert unfinished(engine) == 0

    first = worker_pod("r4")
    cluster.peaks[first.metadata.name] = 2 * GIB  # type: ignore[attr-defined]  # above any limit so far
    killed = run_and_delete(cluster, first)
    assert watcher.cycle() == 1
    second = run_and_delete(cluster, worker_pod("r4", try_number=2))
    assert watcher.cycle() == 1
    r4 = [r for r in stored(engine, FAMILY) if r.run_id == "r4"]
    assert [(r.try_number, r.exit_reason) for r in r4] == [(1, "OOMKilled"), (2, "Completed")]
    assert r4[1].memory_limit_bytes > r4[0].memory_limit_bytes
    assert memory_limit(killed) != USER_MEMORY  # enforced: sized from the three runs
    assert len(stored(engine, FAMILY)) == 5 and not cluster.pods
    assert second["metadata"]["labels"]["adaptive.airflow.io/managed-by"] == "policy"


def test_nothing_is_lost_with_the_store_down_or_the_observer_restarted(
    cluster: FakeKubernetesApi, engine: Any
) -> None:
    spool = Spool(get_settings().spool_dir)
    for leftover in spool.folder.rglob("*.*") if spool.folder.exists() else []:
        leftover.unlink()
    clock = Clock()

    def down() -> Any:
        raise HistoryUnavailableError("the store is down")

    first = observer(cluster, "observer-a", clock, lambda: Advisor(get_settings(), down))
    assert first.cycle() == 0
    run_and_delete(cluster, worker_pod("s1"))
    assert first.cycle() == 0  # spooled, and still held by its finalizer
    assert stored(engine, FAMILY) == [] and len(spool.pending()) == 1
    assert (NAMESPACE, "etl-transform-s1-1") in cluster.pods

    run_and_delete(cluster, worker_pod("s2"))  # observer-a dies before it sees this one
    second = observer(cluster, "observer-b", clock)  # a new replica: observer-a's Lease still holds
    assert second.cycle() == 0 and (NAMESPACE, "etl-transform-s2-1") in cluster.pods
    clock.offset += timedelta(seconds=31)  # observer-a's Lease expires
    assert second.cycle() == 2  # the store is up for observer-b: s1 (also spooled) and s2
    assert first.cycle() == 0  # observer-a is back: it follows now, it records nothing twice
    rows = stored(engine, FAMILY)
    assert sorted(r.run_id for r in rows) == ["s1", "s2"]  # once each
    assert spool.pending() == [] and not cluster.pods


def test_without_an_observer_no_pod_waits(cluster: FakeKubernetesApi, engine: Any) -> None:
    body = run_and_delete(cluster, worker_pod("n1"))
    assert "finalizers" not in body["metadata"] or not body["metadata"]["finalizers"]
    assert not cluster.pods  # deleted at once
    assert memory_limit(body) == USER_MEMORY  # a cold family keeps the user's request


def test_a_scheduler_that_may_not_read_the_lease_says_so_once(
    cluster: FakeKubernetesApi, engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """No Lease is no observer, said by no one; a refused read is a missing Role, said once."""
    from airflow_adaptive.failopen import forget_warnings

    forget_warnings()
    with caplog.at_level(logging.WARNING):
        worker_pod("quiet")
        assert not [r for r in caplog.records if "Lease" in r.getMessage()]
        cluster.forbid_lease_reads = True
        for run in ("r1", "r2"):
            lease_module.forget()
            assert RECORD_FINALIZER not in (worker_pod(run).metadata.finalizers or [])
    (said,) = [r.getMessage() for r in caplog.records if "Lease" in r.getMessage()]
    assert (
        "cannot read the observer's Lease 'airflow-adaptive-observer'" in said
        and "403 Forbidden; the scheduler needs get" in said
    )


@pytest.mark.parametrize("mode", ["observe", "recommend", "enforce"])
def test_each_mode_on_a_worker_pod(
    cluster: FakeKubernetesApi, engine: Any, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    sql_store(engine).record([attempt(i, family=FAMILY, peak=GIB // 4) for i in range(5)])
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MODE", mode)
    get_settings.cache_clear()
    users = worker_pod("m", hook=False).spec.containers[0].resources
    pod = worker_pod("m", memory=USER_MEMORY)
    validate_pod(pod)
    resources = pod.spec.containers[0].resources
    assert pod.metadata.annotations[MODE_ANNOTATION] == f"{mode} ([adaptive] mode)"
    if mode == "enforce":
        assert resources.limits["memory"] != USER_MEMORY
    else:  # byte-identical to the user's
        assert (
            resources.to_dict() == users.to_dict()
            and pod.spec.affinity == worker_pod("m", hook=False).spec.affinity
        )


def test_the_shipped_observer_manifest_is_valid_and_runs_as_no_root() -> None:
    docs = shipped_manifest("observer.yaml")
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}  # Pod Security "restricted"
    assert pod["containers"][0]["command"][:2] == ["airflow-adaptive", "observe"]
    assert shipped_config_map(pod) == "airflow-airflow-config"  # the chart's "<release>-airflow-config"
    role = next(d for d in docs if d["kind"] == "Role")
    verbs = {(r["resources"][0], *r.get("resourceNames", ()), *sorted(r["verbs"])) for r in role["rules"]}
    assert verbs == {  # what the loop and LeaderLease call, no more
        ("pods", "list", "patch"),
        ("leases", "create"),
        ("leases", lease_module.LEASE_NAME, "get", "update"),
    }
    # the scheduler's hook may read that one Lease, and nothing else
    reader = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("lease-reader"))
    assert reader["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                "resourceNames": [lease_module.LEASE_NAME], "verbs": ["get"]}]  # fmt: skip


def test_the_observe_command_runs_a_cycle_and_says_a_missing_cluster_in_one_line(
    cluster: FakeKubernetesApi,
    engine: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from airflow_adaptive.cli import main

    lease_module.forget()
    assert main(["observe", "--once", "--namespace", NAMESPACE]) == 0
    assert "recorded 0 ended pods" in capsys.readouterr().out
    assert (NAMESPACE, lease_module.LEASE_NAME) in cluster.leases  # it leads now
    monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE", str(cluster.workdir / "missing.yaml"))
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))  # not used: Airflow's setting names a file
    assert main(["observe", "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "airflow-adaptive: error: no Kubernetes API: [kubernetes_executor] config_file unusable"
    )
    # where Airflow names none and this is no cluster, $KUBECONFIG is used as kubectl uses it, and said
    monkeypatch.delenv("AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE")
    monkeypatch.setenv("KUBECONFIG", str(cluster.workdir / "missing-too.yaml"))
    assert main(["observe", "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("airflow-adaptive: error: no Kubernetes API: not in a cluster (")
    assert err[-1].endswith("and no kubeconfig at $KUBECONFIG or ~/.kube/config")
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    assert main(["observe", "--once", "--namespace", NAMESPACE]) == 0
    captured = capsys.readouterr()
    assert "recorded 0 ended pods" in captured.out
    assert f"not in a cluster: using kubeconfig {cluster.kubeconfig}" in captured.err
    # an API that does not answer: one line, no traceback
    closed = cluster.refused_kubeconfig()
    monkeypatch.setenv("KUBECONFIG", str(closed))
    lease_module.forget()
    assert main(["observe", "--once", "--namespace", NAMESPACE]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == f"not in a cluster: using kubeconfig {closed}"
    assert len(err) == 2 and err[1].startswith("airflow-adaptive: error: observe: the cycle failed ("), err
    assert "Connection refused" in err[1]  # the cause, not urllib3's URL


def test_store_down_and_api_unreachable_the_worker_pod_keeps_the_users_resources(
    cluster: FakeKubernetesApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_adaptive import advisor as advisor_module

    def down(settings: Any) -> Any:
        raise HistoryUnavailableError("history store unavailable: connection refused")

    monkeypatch.setattr(advisor_module, "open_store", down)
    monkeypatch.setenv("AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE", str(cluster.workdir / "missing.yaml"))
    lease_module.forget()
    pod = worker_pod("down")
    validate_pod(pod)
    assert (
        pod.spec.containers[0].resources.to_dict()
        == worker_pod("down", hook=False).spec.containers[0].resources.to_dict()
    )
    assert not pod.metadata.finalizers  # no observer can be seen: nothing may wait for one
    assert "history store unavailable" in pod.metadata.annotations["adaptive.airflow.io/decision"]
    assert pod.spec.containers[0].args[:2] == ["bash", "-c"]  # still observed, for when the store is back


def test_a_template_with_a_command_is_wrapped_on_its_command(cluster: FakeKubernetesApi) -> None:
    base = PodGenerator.deserialize_model_file(str(TEMPLATE))
    base.spec.containers[0].command = ["/usr/bin/dumb-init", "--"]
    pod = PodGenerator.construct_pod(
        dag_id="etl", task_id="transform", pod_id="cmd", try_number=1, kube_image="my/worker:1", date=None,
        args=["python", "-c", "print('transformed')"], pod_override_object=None, base_worker_pod=base,
        namespace=NAMESPACE, scheduler_job_id="7", run_id="cmd", with_mutation_hook=True,
    )  # fmt: skip
    container = validate_pod(pod)["spec"]["containers"][0]
    assert container["command"][:2] == ["/bin/sh", "-c"] and not container.get("args")
    assert container["command"][4:] == ["/usr/bin/dumb-init", "--", "python", "-c", "print('transformed')"]


def test_an_api_that_does_not_answer_is_said_once_while_it_lasts(
    cluster: FakeKubernetesApi, caplog: pytest.LogCaptureFixture
) -> None:
    import threading

    closed = cluster.refused_kubeconfig()
    api_client = kube_config.new_client_from_config(str(closed))
    watcher = Observer(api_client, LeaderLease(api_client, NAMESPACE, "me"), lambda: Advisor(get_settings()))
    runner = threading.Thread(target=watcher.run, args=(0.01,))
    with caplog.at_level(logging.WARNING):
        runner.start()
        runner.join(1.0)  # many cycles, all refused
        watcher.stop.set()
        runner.join(5)
    failed = [r.getMessage() for r in caplog.records if "cycle failed" in r.getMessage()]
    assert len(failed) == 1 and "Connection refused" in failed[0], failed
