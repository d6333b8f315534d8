"""Staged shared inputs end to end: real Airflow (``dag.test``), real database, FakeKubernetesApi
running the staging init container and the wrapped command locally, one cache folder per node."""

from __future__ import annotations

import importlib.util
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from airflow_adaptive.core.locality import StageReport, content_key
from airflow_adaptive.core.telemetry import parse_stage_report
from airflow_adaptive.kubernetes.staging import LOCALITY_ANNOTATION, STAGE_CONTAINER
from airflow_adaptive.store.tables import cached_input, shared_input
from tests.conftest import validate_pod
from tests.fake_kubernetes import FakeKubernetesApi

CACHE_ROOT = "/var/cache/adaptive"
DAG = """
from datetime import datetime
from airflow.sdk import DAG, Asset
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator

with DAG(dag_id={dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    AdaptiveKubernetesPodOperator(
        task_id="align", task_family="locality.align", image="busybox", cmds=["sh", "-c"],
        arguments=['for v in $(env | grep "^ADAPTIVE_INPUT_[A-Z_]*=/" | cut -d= -f2); do [ ! -e "$v" ] || wc -c < "$v"; done'],
        shared_inputs={shared!r}, inlets=[Asset(u, extra=e) for u, e in {inlets!r}],
        config_file={kubeconfig!r}, in_cluster=False, namespace="default", poll_interval=0.1,
        startup_check_interval_seconds=0, get_logs=True, startup_timeout_seconds=5,
    )
"""


def run(home: Path, api: FakeKubernetesApi, dag_id: str, shared: list[str],
        inlets: list[tuple[str, dict[str, Any]]] | None = None) -> Any:  # fmt: skip
    path = home / "dags" / f"{dag_id}.py"
    path.write_text(textwrap.dedent(DAG.format(dag_id=dag_id, shared=shared, inlets=inlets or [],
                                                kubeconfig=str(api.kubeconfig))))  # fmt: skip
    spec = importlib.util.spec_from_file_location(dag_id, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag.test()


def report_of(api: FakeKubernetesApi, index: int) -> StageReport:
    """The staging report in the pod's main container termination message (the wrapper's lines)."""
    name = api.created[index]["metadata"]["name"]
    pod = api.finished[name]
    message = pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
    report = parse_stage_report(message)
    assert report is not None, message
    return report


@pytest.fixture
def staging(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__CACHE_ROOT", CACHE_ROOT)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__SMALL_INPUT_BELOW", "100")  # small test files count as medium
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__CACHE_BUDGET", "5000")


def source(tmp_path: Path, name: str, size: int) -> str:
    path = tmp_path / "shared-storage" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(os.urandom(size))
    return f"file://{path}"


def test_second_reader_on_a_node_hits_and_is_preferred_there(
    airflow_home: Path, tmp_path: Path, engine: Any, staging: None
) -> None:
    genome = source(tmp_path, "genome.fa", 2000)
    key = content_key(genome, 2000)
    with FakeKubernetesApi(tmp_path, lambda pod: 10 * 2**20) as api:
        assert run(airflow_home, api, "loc_a", [genome]).state == "success"
        assert run(airflow_home, api, "loc_b", [genome]).state == "success"
    first, second = report_of(api, 0), report_of(api, 1)
    assert (first.copied, first.hits, first.copied_bytes) == ((key,), (), 2000)
    assert (second.copied, second.hits, second.copied_bytes) == ((), (key,), 0)
    assert (tmp_path / "nodes/node-a" / CACHE_ROOT.strip("/") / key / "data").stat().st_size == 2000
    assert "2000" in api.logs[next(k for k in api.logs if k[1] == api.created[1]["metadata"]["name"])]
    pod = validate_pod(api.created[1])
    assert [c["name"] for c in pod["spec"]["initContainers"]] == [STAGE_CONTAINER]
    assert {v["name"] for v in pod["spec"]["volumes"]} >= {"adaptive-cache", "adaptive-stage"}
    terms = pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    hostname = [t for t in terms if t["preference"]["matchExpressions"][0]["key"] == "kubernetes.io/hostname"]
    assert hostname and hostname[0]["preference"]["matchExpressions"][0]["values"] == ["node-a"]
    assert "node-a holds" in pod["metadata"]["annotations"][LOCALITY_ANNOTATION]
    assert "required" not in str(pod["spec"]["affinity"]["nodeAffinity"])  # preferred only
    with engine.connect() as conn:
        assert conn.execute(select(cached_input.c.node_name, cached_input.c.content_key)).all() == [
            ("node-a", key)
        ]
        assert conn.execute(select(shared_input.c.reads)).scalar() == 2


def test_tiny_budget_evicts_the_least_recently_used_and_a_damaged_entry_is_copied_again(
    airflow_home: Path, tmp_path: Path, engine: Any, staging: None
) -> None:
    old, new = source(tmp_path, "old.idx", 3000), source(tmp_path, "new.idx", 3000)
    cache = tmp_path / "nodes/node-a" / CACHE_ROOT.strip("/")
    with FakeKubernetesApi(tmp_path, lambda pod: 10 * 2**20) as api:
        assert run(airflow_home, api, "loc_old", [old]).state == "success"
        assert run(airflow_home, api, "loc_new", [new]).state == "success"  # 6000 > 5000: old goes
        evicted = report_of(api, 1)
        assert evicted.evicted == (content_key(old, 3000),) and evicted.copied == (content_key(new, 3000),)
        assert not (cache / content_key(old, 3000) / "data").exists()
        (cache / content_key(new, 3000) / "data").write_bytes(b"truncated")  # damaged
        assert run(airflow_home, api, "loc_again", [new]).state == "success"
        assert report_of(api, 2).copied == (content_key(new, 3000),)
        (cache / content_key(new, 3000)).joinpath("data").unlink()  # gone behind our back
        assert run(airflow_home, api, "loc_gone", [new]).state == "success"
        assert report_of(api, 3).copied == (content_key(new, 3000),)
    with engine.connect() as conn:
        assert conn.execute(select(cached_input.c.content_key)).scalars().all() == [content_key(new, 3000)]


def test_bad_inputs_never_fail_the_task(airflow_home: Path, tmp_path: Path, staging: None) -> None:
    with FakeKubernetesApi(tmp_path, lambda pod: 10 * 2**20) as api:
        unknown = run(airflow_home, api, "loc_bad", ["nosuch://bucket/x", f"file://{tmp_path}/missing"])
        assert unknown.state == "success"
        note = validate_pod(api.created[0])["metadata"]["annotations"][LOCALITY_ANNOTATION]
        assert note.count("size unknown") == 2 and not api.created[0]["spec"].get("initContainers")
        sized = [("nosuch://bucket/y", {"size_bytes": 2000}), ("http://127.0.0.1:9/z", {"size_bytes": 2000})]
        assert run(airflow_home, api, "loc_unreachable", ["nosuch://bucket/y", "http://127.0.0.1:9/z"],
                   sized).state == "success"  # fmt: skip
        failed = report_of(api, 1).failed
        assert (
            "nosuch" in failed[content_key("nosuch://bucket/y", 2000)]
        )  # no fsspec: "no reader", with: "not known"
        assert "URLError" in failed[content_key("http://127.0.0.1:9/z", 2000)]
        node_cache = tmp_path / "nodes/node-a" / CACHE_ROOT.strip("/")
        for child in node_cache.iterdir():
            os.remove(child) if child.is_file() else os.rename(child, tmp_path / child.name)
        node_cache.rmdir()
        node_cache.symlink_to("/proc/1")  # a cache root nothing can write into, not even root
        genome = source(tmp_path, "genome.fa", 2000)
        assert run(airflow_home, api, "loc_readonly", [genome]).state == "success"
        assert content_key(genome, 2000) in report_of(api, 2).failed


def test_staging_off_still_tells_the_task_where_its_inputs_are(
    airflow_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    genome = source(tmp_path, "genome.fa", 2000)
    with FakeKubernetesApi(tmp_path, lambda pod: 10 * 2**20) as api:
        assert run(airflow_home, api, "loc_off", [genome]).state == "success"
    pod = validate_pod(api.created[0])
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["ADAPTIVE_INPUT_GENOME_FA"] == genome == env["ADAPTIVE_INPUT_GENOME_FA_URI"]
    assert "staging is off" in pod["metadata"]["annotations"][LOCALITY_ANNOTATION]
