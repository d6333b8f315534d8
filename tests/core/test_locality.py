"""Shared-input locality: the size classes, the staging plan, the weight rule and the simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import models as k8s

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.cli import main
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.grouping import NodeProfile, group_nodes
from airflow_adaptive.core.locality import (
    DeclaredInput,
    InputUse,
    SizeClass,
    content_key,
    local_bytes_by_node,
    locality_weight,
    plan_staging,
    preferred_nodes,
    size_class,
)
from airflow_adaptive.core.units import GB, GIB
from airflow_adaptive.exceptions import SimulationInputError
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
from airflow_adaptive.simulation.cluster import preset
from airflow_adaptive.simulation.engine import Simulation
from airflow_adaptive.simulation.params import DEFAULT_PARAMS, SimParams
from airflow_adaptive.simulation.shared import shared_input_workload
from airflow_adaptive.simulation.sources import load_workload
from tests.conftest import sql_store
from tests.memory_store import InMemoryHistoryStore


def test_size_classes_follow_the_paper_thresholds() -> None:
    assert size_class(999_999) is SizeClass.SMALL
    assert size_class(1_000_000) is SizeClass.MEDIUM
    assert size_class(999_999_999) is SizeClass.MEDIUM
    assert size_class(GB) is SizeClass.BIG
    assert size_class(None) is SizeClass.UNKNOWN
    assert size_class(5_000, small_below=1_000) is SizeClass.MEDIUM


def test_content_key_changes_with_size_and_version() -> None:
    key = content_key("s3://b/genome.fa", 10)
    assert key == content_key("s3://b/genome.fa", 10)
    assert len({key, content_key("s3://b/genome.fa", 11), content_key("s3://b/genome.fa", 10, "v2")}) == 3


def test_plan_stages_medium_and_big_inputs_read_by_more_than_one_task() -> None:
    inputs = [
        DeclaredInput("s3://b/small", 10),
        DeclaredInput("s3://b/unknown"),
        DeclaredInput("s3://b/once", 5 * GB),
        DeclaredInput("s3://b/seen", 5 * GB),
        DeclaredInput("s3://b/declared", 50_000_000, shared=True),
    ]
    plan = plan_staging(inputs, {"s3://b/seen": 3})
    assert [i.uri for i in plan.staged] == ["s3://b/seen", "s3://b/declared"]
    assert "small" in plan.reasons["s3://b/small"] and "unknown" in plan.reasons["s3://b/unknown"]
    assert "no other reader" in plan.reasons["s3://b/once"]
    assert "read by 3 earlier tasks" in plan.reasons["s3://b/seen"]


def test_locality_weight_is_the_share_of_time_saved() -> None:
    # 2 GB at 100 MB/s saves 20 s; the task computes 20 s: half its time, weight 50.
    assert locality_weight(2 * GB, 100e6, 20.0) == 50
    assert locality_weight(2 * GB, 100e6, None) == 100
    assert locality_weight(1, 100e6, 3600.0) == 1  # holding anything is worth a little
    assert locality_weight(0, 100e6, 10.0) == 0
    local = local_bytes_by_node([("a", 3 * GB), ("b", GB)], {"a": ["n1", "n2"], "b": ["n2"]})
    assert local == {"n1": 3 * GB, "n2": 4 * GB}
    assert [node for node, _ in preferred_nodes(local, 100e6, 10.0)] == ["n2", "n1"]


def run(placement: str, size_bytes: int, params: SimParams = DEFAULT_PARAMS) -> tuple[float, int]:
    workload = shared_input_workload(10, size_bytes, params, seed=0)
    result = Simulation(preset("5,5,5"), workload, placement, "user", params, seed=0).run()
    assert result.succeeded == len(workload.tasks)
    return result.makespan_s, result.shared_storage_read_bytes


def test_locality_reads_big_shared_inputs_once_per_node_and_finishes_sooner() -> None:
    blind_s, blind_read = run("tarema", 2 * GB)
    local_s, local_read = run("tarema+locality", 2 * GB)
    assert blind_read == 10 * 8 * 2 * 2 * GB  # every task reads both inputs from shared storage
    assert local_read <= 15 * 2 * 2 * GB  # at most one copy per node of the 15
    assert local_s < 0.8 * blind_s


@pytest.mark.parametrize("ram_disk_gib", [4, 8, 12])
def test_a_tasks_inputs_do_not_evict_each_other_from_a_ram_disk(ram_disk_gib: int) -> None:
    """A task's own inputs are never evicted for one another (as the staging program keeps what the
    pod needs): two 8 GiB inputs with one RAM disk's room used to evict each other on every task."""
    _, disk_read = run("tarema+locality", 8 * GIB)
    _, ram_read = run("tarema+locality", 8 * GIB, SimParams(ram_disk_bytes=ram_disk_gib * GIB))
    assert ram_read <= disk_read
    assert ram_read <= 15 * 2 * 8 * GIB  # at most one copy of each input per node


def test_small_inputs_are_never_staged() -> None:
    assert run("tarema+locality", 512 * 1024) == run("tarema", 512 * 1024)


def test_ram_disk_holds_node_memory_only_for_what_it_stores() -> None:
    ram = SimParams(ram_disk_bytes=8 * GIB)
    assert run("tarema+locality", 512 * 1024, ram) == run("tarema", 512 * 1024)
    ram_s, _ = run("tarema+locality", GB, ram)
    disk_s, _ = run("tarema+locality", GB)
    assert ram_s <= disk_s * 1.05


def test_shared_workload_spec_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    workload = load_workload("shared:3:1Gi", SimParams())
    assert len(workload.tasks) == 24 and workload.runs == 3
    assert all(t.inputs == (("reference", GIB), ("index", GIB)) for t in workload.tasks)
    for bad in ("shared:0:1Gi", "shared:3:lots", "shared:3:-1Gi"):
        with pytest.raises(SimulationInputError):
            load_workload(bad, SimParams())
    with pytest.raises(SimulationInputError, match="at most 1Pi"):  # its reads would outrun the calendar
        load_workload("shared:3:1000Ei", SimParams())
    code = main(["simulate", "--cluster", "5,5,5", "--workload", "shared:4:1G",
                 "--placement", "tarema,tarema+locality", "--json"])  # fmt: skip
    assert code == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert (
        results["tarema+locality"]["shared_storage_read_bytes"]
        < results["tarema"]["shared_storage_read_bytes"]
    )
    assert (
        main(["simulate", "--cluster", "5,5,5", "--workload", "shared:4:1G", "--placement", "x+locality"])
        == 2
    )
    assert "unknown placement" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["sql", "memory"])
def test_store_counts_reads_and_keeps_copies_per_node(kind: str, engine: Any) -> None:
    store = sql_store(engine) if kind == "sql" else InMemoryHistoryStore()
    genome, index = "s3://refs/genome.fa", "s3://refs/bwa.idx"
    g, i = content_key(genome, 5 * GB), content_key(index, 2 * GB)
    store.record_inputs("n1", [InputUse(genome, 5 * GB, g, True), InputUse(index, None, i, True)], [])
    store.record_inputs("n2", [InputUse(genome, 5 * GB, g, True)], [])
    store.record_inputs(None, [InputUse(index, 2 * GB)], [])  # read without staging: a read, no copy
    state = store.input_state([genome, index, "s3://never"], [g, i])
    assert state.reads == {genome: 2, index: 2} and state.sizes == {genome: 5 * GB, index: 2 * GB}
    assert state.holders == {g: ("n1", "n2"), i: ("n1",)}
    store.record_inputs("n1", [InputUse(genome, 5 * GB, g, False)], [i])  # staging failed; i evicted
    assert store.input_state([], [g, i]).holders == {g: ("n2",)}
    assert [(c.node, c.uri) for c in store.cached_inputs()] == [("n2", genome)]
    store.save_nodes([NodeProfile("n1", {"cpu": 1.0})], group_nodes([NodeProfile("n1", {"cpu": 1.0})]))
    assert store.cached_inputs() == []  # n2 left the cluster


@pytest.mark.parametrize("kind", ["sql", "memory"])
def test_a_staged_copy_is_listed_only_for_the_dags_that_read_it(kind: str, engine: Any) -> None:
    store = sql_store(engine) if kind == "sql" else InMemoryHistoryStore()
    secret, shared = "s3://secret-bucket/patient-42.bam", "s3://refs/genome.fa"
    s, g = content_key(secret, 5 * GB), content_key(shared, 5 * GB)
    store.record_inputs(
        "n1", [InputUse(secret, 5 * GB, s, True), InputUse(shared, 5 * GB, g, True)], [], "dag_b"
    )
    store.record_inputs("n2", [InputUse(shared, 5 * GB, g, True)], [], "dag_a")
    assert {c.uri for c in store.cached_inputs()} == {secret, shared}  # unrestricted: every copy
    assert {(c.node, c.uri) for c in store.cached_inputs(frozenset({"dag_a"}))} == {
        ("n1", shared),
        ("n2", shared),
    }
    assert {c.uri for c in store.cached_inputs(frozenset({"dag_b"}))} == {secret, shared}
    assert store.cached_inputs(frozenset()) == []
    store.record_inputs(
        "n3", [InputUse("s3://old", GB, "k", True)], []
    )  # no DAG known: hidden when restricted
    assert "s3://old" not in {c.uri for c in store.cached_inputs(frozenset({"dag_a", "dag_b"}))}


def test_with_the_store_down_declared_inputs_are_still_staged_and_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__CACHE_ROOT", "/var/cache/adaptive")
    get_settings.cache_clear()
    genome = tmp_path / "genome.fa"
    genome.write_bytes(b"A" * 2_000_000)
    operator = AdaptiveKubernetesPodOperator(
        task_id="align", image="busybox", shared_inputs=[f"file://{genome}"]
    )
    down = InMemoryHistoryStore()
    down.faults.down = True
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p"), spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="base")])
    )
    operator._stage_inputs(pod, Advisor(get_settings(), lambda: down))
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["ADAPTIVE_INPUT_GENOME_FA"].startswith("/adaptive-cache/")  # a stat found the size
    assert [c.name for c in pod.spec.init_containers] == ["adaptive-stage"]
    assert "no node holds them yet" in pod.metadata.annotations["adaptive.airflow.io/locality"]
