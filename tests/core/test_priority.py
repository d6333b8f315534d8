"""Least-finished-first: the pure ordering, the store's counts, the Airflow strategy, PriorityClasses,
the CLI and the simulator's queue orders."""

from __future__ import annotations

import io
import json
import logging
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes.client import models as k8s

from airflow_adaptive import weight_rule as lff
from airflow_adaptive.core.lff import (
    LFF_SPAN,
    PRIORITY_CLASSES,
    FamilyProgress,
    choose_priority,
    lff_key,
    lff_weight,
)
from airflow_adaptive.core.model import ExitReason
from airflow_adaptive.core.sketch import LogHistogram
from airflow_adaptive.core.units import GIB
from airflow_adaptive.kubernetes import priority_classes as classes
from airflow_adaptive.simulation.cluster import Cluster
from airflow_adaptive.simulation.engine import Simulation
from airflow_adaptive.simulation.queues import path_to_end
from airflow_adaptive.simulation.workload import Workload
from tests.conftest import sql_store
from tests.factories import PLAIN, attempt, node, task
from tests.fake_kubernetes import FakeKubernetesApi
from tests.memory_store import InMemoryHistoryStore


# --- the pure ordering ------------------------------------------------------------------------
def test_fewer_successes_weigh_more_then_failures_by_mode() -> None:
    def w(s: int, f: int, mode: str = "persevere") -> int:
        return lff_weight(FamilyProgress(s, f), mode, 1)

    assert w(0, 0) > w(1, 0) > w(50, 0) > w(9_999, 0) == w(20_000, 0)
    assert w(3, 5) > w(3, 1) > w(2, 0) - 10**3  # persevere: more failures first, within one success count
    assert w(3, 1, "postpone") > w(3, 5, "postpone")
    assert w(2, 99) < w(1, 0)  # successes first, whatever the failures
    assert all(lff_weight(FamilyProgress(s, f)) < LFF_SPAN for s in (0, 5) for f in (0, 500))
    # Hand-computed: (9999 - 3) * 100 + 5 + own weight 7.
    assert lff_weight(FamilyProgress(3, 5), "persevere", 7) == 999_612
    assert lff_weight(FamilyProgress(0, 0), "persevere", 2**31) == 2**31 - 1  # int32 column
    assert sorted([(5, 0), (1, 2), (1, 7)], key=lambda p: lff_key(FamilyProgress(*p))) == [
        (1, 7),
        (1, 2),
        (5, 0),
    ]


def test_priority_class_tiers_by_the_share_of_families_behind() -> None:
    successes = LogHistogram()
    for count in (0, 2, 10, 25, 25, 40):
        successes.add(count)
    high = choose_priority(FamilyProgress(0, 0), successes)
    assert (high.class_name, high.share_ahead, high.families) == ("adaptive-lff-high", 0.0, 6)
    medium = choose_priority(FamilyProgress(10, 1), successes)  # 2 of 6 have fewer: a third
    assert medium.class_name == "adaptive-lff-medium" and medium.share_ahead == pytest.approx(2 / 6)
    low = choose_priority(FamilyProgress(40, 0), successes)  # 5 of 6 have fewer
    assert low.class_name == "adaptive-lff-low"
    text = medium.explain()
    assert text.startswith("10 successful attempts (1 failed) of 6 families' median 18, 33% have fewer")
    assert "priority class adaptive-lff-medium" in text
    assert (
        choose_priority(FamilyProgress(0, 0), LogHistogram())
        .explain()
        .startswith("0 successful attempts (0 failed), no family has history yet: priority weight")
    )
    one = LogHistogram()
    one.add(1)
    assert (
        choose_priority(FamilyProgress(1, 0), one)
        .explain()
        .startswith("1 successful attempt (0 failed) of 1 family's median 1,")
    )


# --- the store ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["memory", "sql"])
def test_store_counts_successes_per_family_and_their_distribution(kind: str, engine: Any) -> None:
    store = InMemoryHistoryStore() if kind == "memory" else sql_store(engine)
    store.record([attempt(i, family="a", run=f"a{i}") for i in range(3)])
    oom = attempt(9, family="a", run="a9")
    store.record([_oom(oom)])
    store.record([attempt(i, family="b", run=f"b{i}") for i in range(7)])
    assert store.progress("a") == FamilyProgress(3, 1)
    assert store.progress("b") == FamilyProgress(7, 0)
    assert store.progress("never") is None
    successes = store.distributions().successes
    assert successes.total == 2 and successes.share_below(7) == 0.5
    store.record([attempt(0, family="b", run="b0")])  # the same attempt again: nothing moves
    assert store.distributions().successes == successes
    if kind == "sql":
        store.rebuild(fit_models=False)
        assert store.distributions().successes == successes


def _oom(obs: Any) -> Any:
    return replace(obs, exit_reason=ExitReason.OOM_KILLED)


def test_a_borrowed_connection_reads_and_never_writes(engine: Any) -> None:
    from airflow_adaptive.exceptions import HistoryUnavailableError
    from airflow_adaptive.store.sql import SqlHistoryStore

    sql_store(engine).record([attempt(i, family="a", run=f"r{i}") for i in range(2)])
    with engine.begin() as conn:
        borrowed = SqlHistoryStore.reading_through(conn)
        assert borrowed.progress("a") == FamilyProgress(2, 0)
        with pytest.raises(HistoryUnavailableError, match="only reads"):
            borrowed.record([attempt(5, family="a", run="r5")])


# --- the Airflow strategy -------------------------------------------------------------------
def _ti(family: str | None = None, weight: int = 1) -> Any:
    task = SimpleNamespace(task_family=family, priority_weight=weight)
    return SimpleNamespace(task=task, dag_id="etl", task_id="load")


def test_strategy_reads_each_family_once_per_interval(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sql_store(engine).record([attempt(i, family="etl.load", run=f"r{i}") for i in range(4)])
    reads: list[str] = []
    real = lff._read

    def counted(family: str) -> Any:
        reads.append(family)
        return real(family)

    monkeypatch.setattr(lff, "_read", counted)
    strategy = lff.LeastFinishedFirst()
    first = strategy.get_weight(_ti())
    assert first == lff_weight(FamilyProgress(4, 0), "persevere", 1)
    assert strategy.get_weight(_ti()) == first and reads == ["etl.load"]
    assert strategy.get_weight(_ti("fresh.family", 3)) == lff_weight(FamilyProgress(0, 0), "persevere", 3)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__LFF_FAILURES", "postpone")
    from airflow_adaptive.config import get_settings

    get_settings.cache_clear()
    assert strategy.get_weight(_ti()) == lff_weight(FamilyProgress(4, 0), "postpone", 1)


def test_strategy_falls_back_to_the_own_weight_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = []

    def broken(family: str) -> None:
        calls.append(family)
        raise RuntimeError("Direct database access via the ORM is not allowed in Airflow 3.0")

    monkeypatch.setattr(lff, "_read", broken)
    strategy = lff.LeastFinishedFirst()
    assert [strategy.get_weight(_ti(weight=w)) for w in (4, 4, 9)] == [4, 4, 9]
    assert len(calls) == 1  # after a failure the store is left alone for a while
    warnings = [r for r in caplog.records if "least-finished-first unavailable" in r.getMessage()]
    assert len(warnings) == 1 and "tasks keep their own priority weight" in warnings[0].getMessage()


def test_a_dag_using_the_strategy_serialises_and_the_operator_defaults_to_it() -> None:
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization

    from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator

    with DAG("lff_ser", schedule=None, start_date=datetime(2026, 1, 1), default_args={"weight_rule": "upstream"}) as other:  # fmt: skip
        AdaptiveKubernetesPodOperator(task_id="kept", image="x")
    with DAG("lff_ser2", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        AdaptiveKubernetesPodOperator(task_id="a", image="x", task_family="shared.f", priority_weight=3)
        AdaptiveKubernetesPodOperator(task_id="b", image="x", weight_rule="absolute")
    assert other.get_task("kept").weight_rule == "upstream"
    restored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    a: Any = restored.get_task("a")  # our operator's attribute task_family is read below
    assert type(a.weight_rule).__name__ == "LeastFinishedFirst" and a.task_family == "shared.f"
    assert type(restored.get_task("b").weight_rule).__name__ != "LeastFinishedFirst"
    assert lff.task_family_of(a, "lff_ser2", "a") == "shared.f"


# --- PriorityClasses ------------------------------------------------------------------------
def test_priority_class_manifests_are_valid_and_never_preempt(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from airflow_adaptive.cli import main

    assert main(["priority-classes"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["metadata"]["name"] for d in docs] == [
        "adaptive-lff-high",
        "adaptive-lff-medium",
        "adaptive-lff-low",
    ]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.33", strict=True)
        assert doc["preemptionPolicy"] == "Never" and doc["globalDefault"] is False
    assert main(["priority-classes", "--create", "--kubeconfig", "/no/such/kubeconfig"]) == 2
    assert capsys.readouterr().err.strip().endswith("--kubeconfig /no/such/kubeconfig: not a file")
    assert main(["priority-classes", "--kubeconfig", "/no/such/kubeconfig"]) == 2
    assert "--kubeconfig is for --create" in capsys.readouterr().err
    with pytest.MonkeyPatch.context() as patch:  # no kubeconfig and not in a pod: one line, nothing else
        from kubernetes import config

        patch.setattr(config, "KUBE_CONFIG_DEFAULT_LOCATION", "/no/such/default/kubeconfig")
        patch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        assert main(["priority-classes", "--create"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.strip().splitlines() == [
            "airflow-adaptive: error: cannot create PriorityClasses: no kubeconfig (--kubeconfig, $KUBECONFIG, "
            "~/.kube/config) and not in a cluster (Service host/port is not set.)"
        ]
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\n")  # no contexts: there, but not a usable one
    assert main(["priority-classes", "--create", "--kubeconfig", str(broken)]) == 2
    assert f"kubeconfig {broken} unusable (Invalid kube-config file" in capsys.readouterr().err
    broken.write_text("just text\n")  # YAML, but no mapping: the client raises a TypeError on it
    assert main(["priority-classes", "--create", "--kubeconfig", str(broken)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"kubeconfig {broken} unusable (not a kubeconfig)")
    broken.write_text("garbage: [\n")  # no YAML at all: yaml's parser error, in one line
    assert main(["priority-classes", "--create", "--kubeconfig", str(broken)]) == 2
    assert capsys.readouterr().err.strip().endswith("unusable (not YAML: while parsing a flow node)")
    broken.write_bytes(bytes(range(128, 256)) * 8)  # binary
    assert main(["priority-classes", "--create", "--kubeconfig", str(broken)]) == 2
    assert capsys.readouterr().err.strip().endswith("unusable (not YAML: not UTF-8 text)")
    assert docs[0]["value"] > docs[1]["value"] > docs[2]["value"] >= 0


def test_a_cluster_that_does_not_answer_is_one_line_without_urllib3s_retries(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from airflow_adaptive.cli import main

    refused = tmp_path / "kubeconfig"  # port 1: nothing listens, every connection is refused
    refused.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    retries = logging.getLogger("urllib3.connectionpool")
    monkeypatch.setattr(retries, "level", logging.NOTSET)  # as before any command quieted it, and after
    with caplog.at_level(logging.WARNING):
        assert main(["priority-classes", "--create", "--kubeconfig", str(refused)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot create PriorityClasses: MaxRetryError" in err[0], err
    assert not [r for r in caplog.records if r.name.startswith("urllib3")]


def test_class_is_set_only_when_present_and_the_pod_has_none(tmp_path: Path) -> None:
    from kubernetes.config import new_client_from_config

    choice = choose_priority(FamilyProgress(0, 0), LogHistogram())
    pod = k8s.V1Pod(spec=k8s.V1PodSpec(containers=[]))
    with FakeKubernetesApi(tmp_path, lambda pod: 1) as api:
        client = new_client_from_config(str(api.kubeconfig))
        assert classes.priority_class_for(choice, pod, lambda: client, enabled=True) == (
            None,
            " (not set: missing in the cluster)",
        )
        assert classes.create_missing(client) == [name for name, _ in PRIORITY_CLASSES]
        assert classes.create_missing(client) == []  # idempotent
        assert classes.priority_class_for(choice, pod, lambda: client, enabled=True)[0] == "adaptive-lff-high"
        listed = sum(path.endswith("/priorityclasses") for method, path in api.requests if method == "GET")
        assert classes.priority_class_for(choice, pod, lambda: client, enabled=True)[0] == "adaptive-lff-high"
        assert (
            sum(path.endswith("/priorityclasses") for method, path in api.requests if method == "GET")
            == listed
        )
        own = k8s.V1Pod(spec=k8s.V1PodSpec(containers=[], priority_class_name="batch"))
        assert classes.priority_class_for(choice, own, lambda: client, enabled=True)[0] is None
        assert classes.priority_class_for(choice, pod, lambda: client, enabled=False)[0] is None


def test_unreachable_api_means_no_class_and_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    choice = choose_priority(FamilyProgress(0, 0), LogHistogram())
    pod = k8s.V1Pod(spec=k8s.V1PodSpec(containers=[]))

    def broken() -> Any:
        raise OSError("connection refused")

    for _ in range(3):
        assert classes.priority_class_for(choice, pod, broken, enabled=True)[0] is None
    assert sum("cannot be listed" in r.getMessage() for r in caplog.records) == 1


# --- CLI ------------------------------------------------------------------------------------
def test_decide_json_explains_the_priority(engine: Any) -> None:
    from airflow_adaptive.cli import main

    sql_store(engine).record([attempt(i, family="f", peak=GIB, run=f"r{i}") for i in range(3)])
    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out):
        assert main(["decide", "--task-family", "f", "--json"]) == 0
    priority = json.loads(out.getvalue())["priority"]
    assert priority["successes"] == 3 and priority["failures"] == 0
    assert priority["weight"] == lff_weight(FamilyProgress(3, 0), "persevere", 1)
    assert priority["priority_class"] == "adaptive-lff-high"
    assert priority["explanation"].startswith("3 successful attempts (0 failed) of 1 family's median 3")
    assert priority["median_successes"] == 3  # whole, as the text says (a bucket's edge is not)


# --- the simulator --------------------------------------------------------------------------
def test_path_to_end_counts_tasks_on_the_longest_path() -> None:
    w = Workload("w", (task("a", 1), task("b", 1, "a"), task("c", 1, "b"), task("d", 1, "a"), task("e", 1)))
    assert path_to_end(w) == [3, 2, 1, 1, 1]


ONLINE = replace(PLAIN, history="online")  # successes counted from this run only


def _one_node_run(queue: str, tasks: list[Any]) -> Any:
    sim = Simulation(
        Cluster("one", (node("only"),)), Workload("w", tuple(tasks)), "fair", "user", ONLINE,
        queue=queue, record_timeline=True,
    )  # fmt: skip
    return sim.run()


def test_lff_runs_the_family_with_fewest_successes_first() -> None:
    # One 2-core node, one task at a time. Family x's first task finishes at 10 s; then y (0
    # successes) goes before x's second task under LFF, after it under FIFO (arrival order).
    tasks = [task("x1", 10, family="x"), task("x2", 10, family="x"), task("y1", 10, family="y")]
    fifo = {s.task: s.start_s for s in _one_node_run("fifo", tasks).timeline}
    lff_order = {s.task: s.start_s for s in _one_node_run("lff-persevere", tasks).timeline}
    assert fifo == {"x1": 0.0, "x2": 10.0, "y1": 20.0}
    assert lff_order == {"x1": 0.0, "y1": 10.0, "x2": 20.0}


def test_critical_path_runs_the_longest_chain_first() -> None:
    tasks = [task("lone", 10), task("head", 10), task("tail", 10, "head")]
    order = {s.task: s.start_s for s in _one_node_run("critical-path", tasks).timeline}
    assert order["head"] == 0.0 and order["lone"] == 10.0


def test_maq_is_used_over_used_plus_wasted() -> None:
    # 1 GiB used of a 2 GiB request for 10 s: U = W, MAQ 0.5.
    result = _one_node_run("fifo", [task("a", 10, peak_gib=1, request_gib=2)])
    assert result.maq == pytest.approx(0.5) and result.summary()["maq"] == 0.5


def test_simulate_keys_results_by_placement_and_queue(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_adaptive.cli import main

    argv = ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:60", "--placement", "tarema,fair"]
    assert main([*argv, "--queue", "fifo,lff-persevere", "--history", "online", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert set(results) == {"tarema/fifo", "tarema/lff-persevere", "fair/fifo", "fair/lff-persevere"}
    assert all(r["makespan_s"] > 0 and 0 < r["maq"] <= 1 for r in results.values())
    assert main([*argv, "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["results"]) == {"tarema", "fair"}
    assert main([*argv, "--queue", "lifo"]) == 2
    assert "unknown queue order lifo" in capsys.readouterr().err


def test_the_shipped_manifest_is_the_generated_one() -> None:
    shipped = Path(__file__).resolve().parents[2] / "deploy" / "priority-classes.yaml"
    assert list(yaml.safe_load_all(shipped.read_text())) == classes.manifests()


def test_lff_classes_fix_the_class_when_the_pod_is_created() -> None:
    from airflow_adaptive.simulation.queues import PendingQueue

    w = Workload("w", (task("x1", 1, family="x"), task("y1", 1, family="y")))
    tiers = {"x": 2, "y": 0}
    queue = PendingQueue("lff-classes", w, lambda f: 0, lambda f: tiers[f])
    queue.push(0, 0, 0, 0.0)  # x1 arrives first, in the lowest class
    queue.push(1, 1, 0, 0.0)
    assert [shape[0] for _, shape in sorted(queue.heads())] == ["y", "x"]
    tiers["y"] = 2  # classes move later; the pods keep the one they were created with
    assert sorted(queue.heads())[0][1][0] == "y"
