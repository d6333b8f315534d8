"""Task labels and group placement on hand-checked cases."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kubernetes.client import models as k8s

from airflow_adaptive.core.grouping import NodeProfile, group_nodes
from airflow_adaptive.core.labels import FamilyDemand, interval_bounds, task_labels
from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.placement import (
    GroupView,
    PlacementEngine,
    TaremaScorer,
    TaskDemandView,
    engine_for,
)
from airflow_adaptive.core.units import GIB
from airflow_adaptive.exceptions import InvalidCapabilityError, InvalidSettingError, UnknownStrategyError
from airflow_adaptive.kubernetes.names import DECISION_ANNOTATION, GROUP_LABEL, PLACEMENT_ANNOTATION
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
from tests.conftest import sql_store, validate_pod


def test_interval_bounds_follow_group_capacity() -> None:
    values = list(range(1, 101))
    # Two groups, the stronger twice the capacity: the lower third of demands goes to the weaker one.
    assert interval_bounds(values, [1, 2]) == pytest.approx(np.quantile(values, [1 / 3]))
    with pytest.raises(InvalidSettingError, match="positive"):
        interval_bounds(values, [1, 0])


def demands() -> dict[str, FamilyDemand]:
    return {
        "light": FamilyDemand("light", 0.2, 0.2 * GIB, 1e5),
        "mid": FamilyDemand("mid", 1.0, 2 * GIB, 1e6),
        "cpu-heavy": FamilyDemand("cpu-heavy", 7.5, 0.3 * GIB, 1e5),
        "mem-heavy": FamilyDemand("mem-heavy", 0.5, 30 * GIB, 1e6),
        "io-heavy": FamilyDemand("io-heavy", 0.5, 1 * GIB, 5e8),
        "unmeasured-io": FamilyDemand("unmeasured-io", 2.0, 4 * GIB, None),
    }


CAPACITIES = {"cpu": [8, 8, 8], "memory": [32, 32, 32], "io": [5, 5, 5]}


def test_labels_rank_each_family_among_all() -> None:
    assert task_labels("cpu-heavy", demands(), CAPACITIES) == {"cpu": 3, "memory": 1, "io": 1}
    assert task_labels("mem-heavy", demands(), CAPACITIES)["memory"] == 3  # type: ignore[index]
    assert task_labels("unmeasured-io", demands(), CAPACITIES) == {"cpu": 3, "memory": 3}
    assert task_labels("never-seen", demands(), CAPACITIES) is None


GROUPS = [
    GroupView(1, {"cpu": 1, "memory": 1, "io": 1}, frozenset({"x86_64"}), 16 * GIB),
    GroupView(2, {"cpu": 2, "memory": 2, "io": 1}, frozenset({"x86_64", "avx2"}), 64 * GIB),
    GroupView(3, {"cpu": 3, "memory": 3, "io": 1}, frozenset({"x86_64", "avx2", "avx512"}), 64 * GIB),
]


def test_cpu_heavy_memory_light_prefers_the_best_cpu_group_and_explains_why() -> None:
    labels = task_labels("cpu-heavy", demands(), CAPACITIES)
    result = PlacementEngine().place(TaskDemandView("cpu-heavy", labels), GROUPS)
    assert labels == {"cpu": 3, "memory": 1, "io": 1}
    # |3-3|+|3-1|+|1-1| = 2 for group 3 and |2-3|+|2-1|+0 = 2 for group 2: a tie goes to the stronger group.
    assert [r.group.id for r in result.ranked] == [3, 2, 1]
    assert "tarema 2" in result.explain() and result.preference


def test_unknown_task_has_no_preference() -> None:
    result = PlacementEngine().place(TaskDemandView("new", None), GROUPS)
    assert not result.preference and "no labels yet" in result.explain()


def test_capabilities_and_memory_filter_groups_with_reasons() -> None:
    engine = PlacementEngine()
    needs = TaskDemandView("t", {"cpu": 1}, 32 * GIB, frozenset({"avx2"}))
    result = engine.place(needs, GROUPS)
    assert [r.group.id for r in result.ranked] == [2, 3]
    assert dict((g.id, why) for g, why in result.rejected) == {
        1: "capabilities: lacks avx2; memory-fit: no node can allocate 32 GiB (largest 16 GiB)"
    }
    just_above = engine.place(TaskDemandView("t", None, 16 * GIB + 2**20), GROUPS[:1])  # both "16 GiB"
    assert just_above.rejected[0][1] == "memory-fit: no node can allocate 16,385 MiB (largest 16,384 MiB)"
    nowhere = engine.place(TaskDemandView("t", None, None, frozenset({"gpu"})), GROUPS)
    assert nowhere.ranked == () and "lacks gpu" in nowhere.explain()


# -- through the store, the operator and the CLI -------------------------------------------------


IO = {"io_seq_read_iops": 480.0, "io_rand_read_iops": 102.0}


def cluster(engine: Any) -> None:
    """Three groups of two nodes (slow, mid, fast CPU and memory); only the fast ones offer avx512."""
    profiles = []
    for g, (cpu, mem) in enumerate([(370, 13800), (460, 17500), (524, 19850)], start=1):
        for i in range(2):
            caps = frozenset({"x86_64", "avx512"} if g == 3 else {"x86_64"})
            benchmarks = {"cpu_events_per_s": cpu + i, "memory_mib_per_s": mem + 10 * i, **IO}
            profiles.append(NodeProfile(f"node-{g}{i}", benchmarks, 8, 32 * GIB, caps))
    sql_store(engine).save_nodes(profiles, group_nodes(profiles))


def history(engine: Any, family: str, cores: float, peak: int, n: int = 5) -> None:
    sql_store(engine).record(
        [
            Observation(
                TaskKey("d", family, f"r{i}", -1, 1),
                family,
                Usage(peak, cores * 100.0, 100.0, 10**6, 10**6, PeakKind.MEASURED),
                ExitReason.COMPLETED,
                0,
                finished_at=datetime(2026, 11, 1, i, tzinfo=timezone.utc),
            )
            for i in range(n)
        ]
    )


def build(family: str, **kwargs: Any) -> k8s.V1Pod:
    op = AdaptiveKubernetesPodOperator(
        task_id="t", image="busybox", cmds=["true"], task_family=family, **kwargs
    )
    return op.build_pod_request_obj(None, dry_run=True)


def preferred(pod: k8s.V1Pod) -> list[tuple[int, str]]:
    terms = pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    return [(t.weight, t.preference.match_expressions[0].values[0]) for t in terms]


def test_cpu_heavy_family_prefers_the_best_cpu_group(engine: Any) -> None:
    cluster(engine)
    history(engine, "cpu-heavy", cores=7.5, peak=200 * 1024**2)
    for name, cores, peak in (("light", 0.1, 100 * 1024**2), ("mid", 1.0, 1 * GIB), ("mem", 0.5, 20 * GIB)):
        history(engine, name, cores, peak)
    pod = build("cpu-heavy")
    validate_pod(pod)
    assert preferred(pod)[0] == (100, "3") and [w for w, _ in preferred(pod)] == [100, 50, 25]
    assert all(t.preference.match_expressions[0].key == GROUP_LABEL for t in
               pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution)  # fmt: skip
    assert "task labels cpu=3" in pod.metadata.annotations[PLACEMENT_ANNOTATION]


def test_unknown_task_states_no_preference(engine: Any) -> None:
    cluster(engine)
    pod = build("never-seen")
    assert not pod.spec.affinity  # KubernetesPodOperator's empty default, untouched
    assert "no placement preference" in pod.metadata.annotations[PLACEMENT_ANNOTATION]


def test_missing_capability_is_a_required_affinity_with_an_explanation(engine: Any) -> None:
    cluster(engine)
    user_affinity = k8s.V1Affinity(node_affinity=k8s.V1NodeAffinity(
        required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(node_selector_terms=[
            k8s.V1NodeSelectorTerm(match_expressions=[k8s.V1NodeSelectorRequirement(key="zone", operator="In", values=["a"])]),
            k8s.V1NodeSelectorTerm(match_expressions=[k8s.V1NodeSelectorRequirement(key="zone", operator="In", values=["b"])]),
        ])))  # fmt: skip
    pod = build("gpu-job", required_capabilities={"gpu"}, affinity=user_affinity)
    validate_pod(pod)
    terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert [[e.key for e in t.match_expressions] for t in terms] == [
        ["zone", "capability.adaptive.airflow.io/gpu"],
        ["zone", "capability.adaptive.airflow.io/gpu"],
    ]  # ANDed into each of the user's ORed terms
    assert "no node group fits" in pod.metadata.annotations[PLACEMENT_ANNOTATION]
    assert "lacks gpu" in pod.metadata.annotations[PLACEMENT_ANNOTATION]
    avx = build("avx-job", required_capabilities={"avx512"})
    assert [t.match_expressions[0].key for t in
            avx.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms] == [
        "capability.adaptive.airflow.io/avx512"]  # fmt: skip
    with pytest.raises(InvalidCapabilityError):
        AdaptiveKubernetesPodOperator(task_id="bad", image="busybox", required_capabilities={"no spaces"})


def test_decide_cli_shows_labels_and_group_order(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from airflow_adaptive.cli import main

    cluster(engine)
    history(engine, "cpu-heavy", cores=7.5, peak=200 * 1024**2)
    history(engine, "light", cores=0.1, peak=100 * 1024**2)
    assert main(["decide", "--task-family", "cpu-heavy", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["task_labels"] == {"cpu": 3, "memory": 3, "io": 1}  # identical disks: one I/O interval
    assert out["preferred_groups"] == [3, 2, 1] and "prefer group 3 (tarema 0)" in out["placement"]
    assert main(["groups", "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert [g["members"] for g in groups] == [
        ["node-10", "node-11"],
        ["node-20", "node-21"],
        ["node-30", "node-31"],
    ]


def test_baseline_policies_behind_the_same_engine() -> None:

    loaded = [
        replace(GROUPS[0], reserved_fraction=0.9),
        replace(GROUPS[1], reserved_fraction=0.1),
        replace(GROUPS[2], reserved_fraction=0.5),
    ]
    task = TaskDemandView("t", None)
    assert [r.group.id for r in engine_for("fair").place(task, loaded).ranked] == [2, 3, 1]
    assert [r.group.id for r in engine_for("fill-nodes").place(task, loaded).ranked] == [1, 3, 2]
    assert [r.group.id for r in engine_for("sjfn").place(task, loaded).ranked] == [3, 2, 1]
    round_robin = engine_for("round-robin")
    firsts = [round_robin.place(TaskDemandView("t", None), GROUPS).ranked[0].group.id for _ in range(3)]
    assert sorted(firsts) == [1, 2, 3]  # each group leads once in three placements
    with pytest.raises(UnknownStrategyError, match="unknown placement policy 'random'; known: fair, "):
        engine_for("random")


def test_tarema_distance_ignores_overshoot_only_on_groups_with_an_idle_node() -> None:
    light = TaskDemandView("light", {"cpu": 1, "memory": 2})
    strong = {"cpu": 3, "memory": 3}
    assert TaremaScorer()(light, GroupView(3, strong)) == 3.0  # busy: |3-1| + |3-2|
    assert TaremaScorer()(light, GroupView(3, strong, idle_nodes=1)) == 0.0
    weak = {"cpu": 1, "memory": 1}
    assert TaremaScorer()(light, GroupView(1, weak, idle_nodes=2)) == 1.0  # too weak still counts


def test_live_load_lets_a_light_task_use_an_idle_strong_group(
    engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.nodes import group_loads
    from tests.fake_kubernetes import FakeKubernetesApi

    cluster(engine)
    history(engine, "cpu-heavy", cores=7.5, peak=200 * 1024**2)
    history(engine, "light", cores=0.1, peak=100 * 1024**2)
    assert preferred(build("light"))[0] == (100, "1")  # live load off: the light task's own group
    with FakeKubernetesApi(tmp_path, lambda pod: 0) as api:
        for g in (1, 2, 3):
            for i in (0, 1):
                api.add_node(f"node-{g}{i}", labels={GROUP_LABEL: str(g)})
        api.add_node("other", labels={GROUP_LABEL: "not-a-number"})
        api.add_pod("default", "task-20", "node-20")
        api.add_pod("default", "task-21", "node-21")
        api.add_pod("default", "task-30", "node-30")
        api.add_pod("kube-system", "proxy-31", "node-31", owner_kind="DaemonSet")  # does not count
        api.add_pod("default", "done-10", "node-10", phase="Succeeded")  # finished: does not count
        core_v1 = k8s_client.CoreV1Api(k8s_config.new_client_from_config(str(api.kubeconfig)))
        # The fake's pods request no CPU: every group's requested share is 0 (tests/kubernetes has one).
        loads = group_loads(core_v1)
        assert {g: (load.idle_nodes, load.reserved_fraction) for g, load in loads.items()} == {
            1: (2, 0.0),
            2: (0, 0.0),
            3: (1, 0.0),
        }
        monkeypatch.setenv("AIRFLOW__ADAPTIVE__PLACEMENT_LIVE_LOAD", "True")
        monkeypatch.setenv("AIRFLOW__ADAPTIVE__SPOOL_DIR", str(tmp_path / "state"))
        get_settings.cache_clear()
        lists = lambda: sum(path in ("/api/v1/nodes", "/api/v1/pods") for _, path in api.requests)  # noqa: E731
        before = lists()
        pods = [build("light", config_file=str(api.kubeconfig), in_cluster=False) for _ in range(5)]
        for pod in pods:
            validate_pod(pod)
            # Group 3 has an idle node: overshooting there costs nothing, ties go to the stronger group.
            assert [group for _, group in preferred(pod)] == ["3", "1", "2"]
        assert lists() - before == 2  # five pods, one shared view: two list calls, not ten
        api.add_pod("default", "task-31", "node-31")  # group 3 is busy now; the view is 10 s old at most
        assert [group for _, group in preferred(build("light", config_file=str(api.kubeconfig)))] == [
            "3",
            "1",
            "2",
        ]
        monkeypatch.setenv("AIRFLOW__ADAPTIVE__PLACEMENT_LIVE_LOAD_TTL_SECONDS", "0")  # no sharing
        get_settings.cache_clear()
        before = lists()
        assert preferred(build("light", config_file=str(api.kubeconfig), in_cluster=False))[0] == (100, "1")
        assert lists() - before == 2
    # Live load on but no API server: the pod is still built, with the plain preference.
    assert preferred(build("light", config_file=str(tmp_path / "missing"), in_cluster=False))[0] == (100, "1")


def test_size_cpu_requests_what_the_family_kept_busy(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Off by default; on, the CPU request is P90 of the recorded cores busy, never above the
    largest profiled node (8 cores) nor the pod's own CPU limit, and the limit stays as set."""
    from airflow_adaptive.config import get_settings

    cluster(engine)
    history(engine, "busy", cores=3.25, peak=200 * 1024**2)
    history(engine, "greedy", cores=11.0, peak=200 * 1024**2)
    history(engine, "idle", cores=0.01, peak=200 * 1024**2)
    plain = build("busy", container_resources=k8s.V1ResourceRequirements(requests={"cpu": "1"}))
    assert plain.spec.containers[0].resources.requests["cpu"] == "1"  # size_cpu is off by default
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__SIZE_CPU", "True")
    get_settings.cache_clear()
    requested = {}
    for family, resources in (
        ("busy", k8s.V1ResourceRequirements(requests={"cpu": "1"})),
        ("greedy", None),
        ("idle", None),
        ("busy", k8s.V1ResourceRequirements(limits={"cpu": "2"})),
        ("never-seen", k8s.V1ResourceRequirements(requests={"cpu": "1"})),
    ):
        pod = build(family, container_resources=resources) if resources else build(family)
        validate_pod(pod)
        container = pod.spec.containers[0].resources
        requested[family, bool(resources and resources.limits)] = (
            container.requests.get("cpu"),
            (container.limits or {}).get("cpu"),
            pod.metadata.annotations[DECISION_ANNOTATION].split("; cpu: ")[-1],
        )
    assert requested["busy", False] == (
        "3250m",
        None,
        "P90 of 5 attempts' cores busy = 3.25 -> request 3250m",
    )
    assert (
        requested["greedy", False][0] == "8000m"
        and "capped at the largest node" in requested["greedy", False][2]
    )
    assert requested["idle", False][0] == "100m"  # the min_cpu floor
    assert (
        requested["busy", True][:2] == ("2000m", "2")
        and "capped at the CPU limit" in requested["busy", True][2]
    )
    assert requested["never-seen", False][:2] == ("1", None)  # no history: the user's request stays


def test_finish_time_policy_learns_runtimes_per_group_from_recorded_runs(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A family that ran only on the slow group is expected to finish first on the fast one: its
    stored runs are scaled by the groups' CPU scores (I/O is the same everywhere). Runs on a node
    that is in no group now drop; a family without runs gets no preference."""
    from airflow_adaptive.config import get_settings

    cluster(engine)
    sql_store(engine).record(
        [
            Observation(
                TaskKey("d", "align", f"r{i}", -1, 1),
                "align",
                Usage(GIB, 100.0, 100.0 + i, 10**6, 10**6, PeakKind.MEASURED),
                ExitReason.COMPLETED,
                0,
                finished_at=datetime(2026, 11, 1, i, tzinfo=timezone.utc),
                node_name="node-10" if i < 4 else "gone-node",
            )
            for i in range(5)
        ]
    )
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__PLACEMENT_POLICY", "finish-time")
    get_settings.cache_clear()
    try:
        pod = build("align")
        validate_pod(pod)
        assert [g for _, g in preferred(pod)] == ["3", "2", "1"]
        note = pod.metadata.annotations[PLACEMENT_ANNOTATION]
        # Group 1: the runs' geometric mean, 101.494 s. Lotaru's halves of the CPU and (equal) I/O
        # score ratios to the mean group (cpu 451.83) scale it: f(g) = 0.5 x 451.83 / cpu_g + 0.5.
        f = {cpu: 0.5 * (370.5 + 460.5 + 524.5) / 3 / cpu + 0.5 for cpu in (370.5, 524.5)}
        assert "group 1 (finish-time 101.5)" in note
        mean_s = float(np.exp(np.mean(np.log([100.0, 101.0, 102.0, 103.0]))))
        assert f"prefer group 3 (finish-time {mean_s * f[524.5] / f[370.5]:.4g})" in note
        assert "no recorded runtime yet" in build("never-ran").metadata.annotations[PLACEMENT_ANNOTATION]

        # Runtimes that cannot be learnt (here: a numerical error) leave the pod without a runtime
        # preference, never without a pod.
        def broken(*_: Any) -> None:
            raise FloatingPointError("overflow")

        monkeypatch.setattr("airflow_adaptive.advice.placement_advice.fit_runtimes", broken)
        pod = build("align")
        validate_pod(pod)
        note = pod.metadata.annotations[PLACEMENT_ANNOTATION]
        assert "no recorded runtime yet" in note and "(tarema " in note  # tarema's labels place it
        monkeypatch.undo()
        monkeypatch.setenv("AIRFLOW__ADAPTIVE__PLACEMENT_POLICY", "fastest-please")
        get_settings.cache_clear()
        assert "prefer group 3 (finish-time " in build("align").metadata.annotations[PLACEMENT_ANNOTATION]
    finally:
        get_settings.cache_clear()
