"""The group-load view the pods of one machine share (placement_live_load): fresh, stale, unreadable."""

from __future__ import annotations

import json
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.core.placement import GroupLoad, NodeLoad
from airflow_adaptive.kubernetes.live_load import live_load_path, shared_group_loads
from airflow_adaptive.kubernetes.names import BUSY_CORES_ANNOTATION

IDLE = {1: GroupLoad(1, 0.0, (NodeLoad(0.0),))}  # its one node reports no allocatable CPU


class CountingCoreV1:
    """Stands in for the CoreV1Api calls group_loads makes: one node of group 1, idle."""

    def __init__(self) -> None:
        self.calls = 0

    def list_node(self, **_: Any) -> Any:
        from kubernetes.client import models as k8s

        self.calls += 1
        ready = k8s.V1NodeCondition(type="Ready", status="True")
        node = k8s.V1Node(
            metadata=k8s.V1ObjectMeta(name="n1", labels={"adaptive.airflow.io/group": "1"}),
            status=k8s.V1NodeStatus(conditions=[ready]),
        )
        return k8s.V1NodeList(items=[node])

    def list_pod_for_all_namespaces(self, **_: Any) -> Any:
        from kubernetes.client import models as k8s

        self.calls += 1
        return k8s.V1PodList(items=[])


def test_a_view_is_shared_until_it_is_older_than_the_ttl(tmp_path: Path) -> None:
    api, path, clock = CountingCoreV1(), live_load_path(str(tmp_path)), [1000.0]
    for _ in range(3):
        assert shared_group_loads(lambda: api, path, 10.0, lambda: clock[0]) == IDLE
    assert api.calls == 2  # listed once, then read from the shared file
    clock[0] += 9.9
    shared_group_loads(lambda: api, path, 10.0, lambda: clock[0])
    assert api.calls == 2
    clock[0] += 0.2  # 10.1 s old: listed again
    shared_group_loads(lambda: api, path, 10.0, lambda: clock[0])
    assert api.calls == 4
    assert Path(path).parent.name == "cache"  # beside the spool, never read by it


def test_a_broken_or_future_view_is_listed_again(tmp_path: Path) -> None:
    api, path = CountingCoreV1(), live_load_path(str(tmp_path))
    Path(path).parent.mkdir(parents=True)
    old_format = json.dumps({"listed_at": 1000.0, "idle": {"1": 0}})  # before the CPU share was kept
    future = json.dumps({"listed_at": 2000.0, "groups": {"1": [0, 0.5, []]}})
    no_nodes = json.dumps({"listed_at": 1000.0, "groups": {"1": [0, 0.5]}})  # before each node's load
    short_node = json.dumps({"listed_at": 1000.0, "groups": {"1": [0, 0.5, [[4.0]]]}})
    for broken in ("{", future, json.dumps({"groups": []}), old_format, no_nodes):
        Path(path).write_text(broken)
        assert shared_group_loads(lambda: api, path, 10.0, lambda: 1000.0) == IDLE
        Path(path).write_text(broken)
    assert api.calls == 10
    Path(path).write_text(short_node)  # a node's missing fields are its defaults, not an error
    assert shared_group_loads(lambda: api, path, 10.0, lambda: 1000.0) == {
        1: GroupLoad(0, 0.5, (NodeLoad(4.0),))
    }
    blocked = tmp_path / "file"
    blocked.write_text("")  # the cache folder cannot be made: still an answer, just not shared
    assert shared_group_loads(lambda: api, live_load_path(str(blocked)), 10.0) == IDLE


def test_a_groups_load_is_its_idle_nodes_and_the_cpu_share_its_pods_request() -> None:
    """Two ready nodes of group 2, of 4 and 3.92 allocatable cores: one runs a task asking 1500m +
    500m (two containers) and a DaemonSet pod asking 100m, which never makes a node busy but does
    take its CPU; the other runs a DaemonSet pod and a pod whose request cannot be read (busy,
    asking nothing). A cordoned node neither counts as idle nor adds cores."""
    from kubernetes.client import models as k8s

    from airflow_adaptive.kubernetes.nodes import group_loads

    def node(name: str, cpu: str = "4", unschedulable: bool = False) -> k8s.V1Node:
        return k8s.V1Node(
            metadata=k8s.V1ObjectMeta(name=name, labels={"adaptive.airflow.io/group": "2"}),
            spec=k8s.V1NodeSpec(unschedulable=unschedulable),
            status=k8s.V1NodeStatus(
                allocatable={"cpu": cpu, "memory": "16Gi"},
                conditions=[k8s.V1NodeCondition(type="Ready", status="True")],
            ),
        )

    def pod(on: str, *cpus: str, daemon: bool = False, busy: str | None = None) -> k8s.V1Pod:
        owners = [k8s.V1OwnerReference(api_version="apps/v1", kind="DaemonSet", name="d", uid="u")]
        containers = [
            k8s.V1Container(name=f"c{i}", resources=k8s.V1ResourceRequirements(requests={"cpu": c}))
            for i, c in enumerate(cpus)
        ]
        return k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(
                name="p",
                owner_references=owners if daemon else None,
                annotations={BUSY_CORES_ANNOTATION: busy} if busy is not None else None,
            ),
            spec=k8s.V1PodSpec(node_name=on, containers=containers),
        )

    class Cluster:
        def list_node(self, **_: Any) -> Any:
            nodes = [node("a"), node("b", "3920m"), node("cordoned", unschedulable=True)]
            return k8s.V1NodeList(items=nodes)

        def list_pod_for_all_namespaces(self, **_: Any) -> Any:
            pods = [
                pod("a", "1500m", "500m", busy="5.5"),  # its family keeps 5.5 cores busy
                pod("a", "100m", daemon=True),
                pod("b", "100m", daemon=True),
                pod("cordoned", "4"),
                pod("b", "not-a-quantity"),  # unreadable: asks for nothing, but the node is busy
                pod("b", "1", busy="-2"),  # not a count of cores: its request stands
                pod("b", "250m", busy="nan"),
            ]
            return k8s.V1PodList(items=pods)

    (load,) = group_loads(Cluster()).values()
    assert load.idle_nodes == 0
    assert load.reserved_fraction == pytest.approx((1.5 + 0.5 + 0.1 + 0.1 + 1 + 0.25) / (4 + 3.92))
    # Per schedulable node: allocatable cores, cores requested, cores expected busy (annotation, else request).
    assert [x for node in load.nodes for x in astuple(node)] == pytest.approx(
        [4.0, 2.1, 5.6, 3.92, 1.35, 1.35]
    )


def record_six_core_runs_on_the_slow_group(engine: Any) -> None:
    """Four runs of ``align`` on node-10 (the slow group), each keeping 6 cores busy."""
    from datetime import datetime, timezone

    from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
    from airflow_adaptive.core.units import GIB
    from tests.conftest import sql_store

    runs = [
        Observation(
            TaskKey("d", "align", f"r{i}", -1, 1),
            "align",
            Usage(GIB, 6.0 * (100.0 + i), 100.0 + i, 10**6, 10**6, PeakKind.MEASURED),
            ExitReason.COMPLETED,
            0,
            finished_at=datetime(2026, 11, 1, i, tzinfo=timezone.utc),
            node_name="node-10",
        )
        for i in range(4)
    ]
    sql_store(engine).record(runs)


def test_finish_time_with_live_load_avoids_a_fast_group_whose_cores_are_shared(
    engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end through the fake API server. A family kept 6 cores busy on the slow group;
    expected there 101.5 s, 90.6 s on the middle group, 85.1 s on the fast one. The fast group's
    nodes run pods asking 1 core that keep 7.5 busy (their annotation): on the node kube-scheduler
    would pick, 7.5 + 6 of 8 cores are busy, 1.6875 x 85.1 = 143.6 s, so the pod prefers the idle
    middle group, then the slow one. Its own pod says its family keeps 6 cores busy."""

    from kubernetes.client import models as k8s

    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.names import GROUP_LABEL, PLACEMENT_ANNOTATION
    from tests.conftest import validate_pod
    from tests.core.test_placement import build, cluster, preferred
    from tests.fake_kubernetes import FakeKubernetesApi

    cluster(engine)
    record_six_core_runs_on_the_slow_group(engine)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__SPOOL_DIR", str(tmp_path / "state"))
    get_settings.cache_clear()
    try:
        blind = build("align")
        assert [g for _, g in preferred(blind)] == ["3", "2", "1"]  # live load off: runtimes alone
        assert blind.metadata.annotations[BUSY_CORES_ANNOTATION] == "6"
        monkeypatch.setenv("AIRFLOW__ADAPTIVE__PLACEMENT_LIVE_LOAD", "True")
        get_settings.cache_clear()
        with FakeKubernetesApi(tmp_path, lambda pod: 0) as api:
            for g in (1, 2, 3):
                for i in (0, 1):
                    api.add_node(f"node-{g}{i}", cores=8, labels={GROUP_LABEL: str(g)})
            for i in (0, 1):
                api.add_pod(
                    "default", f"hog-{i}", f"node-3{i}", cpu="1", annotations={BUSY_CORES_ANNOTATION: "7.5"}
                )
            pod = build("align", config_file=str(api.kubeconfig), in_cluster=False)
            # A 2-core CPU limit (Kubernetes requests the limit too) caps what the family can keep
            # busy: 7.5 + 2 of 8 cores, 1.1875 x 85.1 = 101.1 s, now just ahead of the slow group.
            limited = build(
                "align",
                config_file=str(api.kubeconfig),
                in_cluster=False,
                container_resources=k8s.V1ResourceRequirements(limits={"cpu": "2"}),
            )
        validate_pod(pod)
        assert [g for _, g in preferred(pod)] == ["2", "1", "3"]
        assert "group 3 (finish-time 143.6" in pod.metadata.annotations[PLACEMENT_ANNOTATION]
        validate_pod(limited)
        assert [g for _, g in preferred(limited)] == ["2", "3", "1"]
        assert limited.metadata.annotations[BUSY_CORES_ANNOTATION] == "2"
    finally:
        get_settings.cache_clear()
