"""The UI's queue, modes and runtime endpoints in Airflow's real api-server app: what they list,
and only for the DAGs the user may read."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.config import get_settings
from airflow_adaptive.core.units import GIB
from airflow_adaptive.plugin import views
from tests.conftest import sql_store
from tests.factories import attempt
from tests.memory_store import InMemoryHistoryStore


def test_queue_lists_pending_tasks_least_finished_first(
    client: Any, auth: dict[str, str], engine: Any, airflow_home: Any, tmp_path: Any
) -> None:
    from tests.fake_kubernetes import FakeKubernetesApi
    from tests.scheduling import load_dag, mark_scheduled, new_run, seed_history, serialise_dag_folder

    seed_history(engine)
    with FakeKubernetesApi(tmp_path, lambda pod: 1) as api:
        load_dag(airflow_home, api, "lff_ui")
    serialise_dag_folder()
    mark_scheduled(new_run("lff_ui", "lff_ui_run"))
    body = client.get("/adaptive/api/queue", headers=auth).json()
    mine = [t for t in body["tasks"] if t["dag_id"] == "lff_ui"]
    assert [(t["task_id"], t["successes"]) for t in mine] == [("new", 0), ("old", 50)]
    new, old = mine
    assert new["lff_rank"] < old["lff_rank"]  # other tests' pending tasks may rank in between
    assert new["airflow_weight"] == new["lff_weight_now"] > old["airflow_weight"] == old["lff_weight_now"]
    assert new["priority_class"] == "adaptive-lff-high" and old["priority_class"] == "adaptive-lff-low"
    assert new["state"] == "scheduled" and "0 successful attempts" in new["why"]
    assert client.get("/adaptive/api/queue?limit=0", headers=auth).status_code == 422


def test_queue_without_the_store_still_lists_tasks_and_says_why(
    client: Any, auth: dict[str, str], engine: Any, airflow_home: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    from airflow_adaptive.exceptions import HistoryUnavailableError
    from airflow_adaptive.plugin import app
    from tests.fake_kubernetes import FakeKubernetesApi
    from tests.scheduling import load_dag, mark_scheduled, new_run, serialise_dag_folder

    with FakeKubernetesApi(tmp_path, lambda pod: 1) as api:
        load_dag(airflow_home, api, "lff_ui_down")
    serialise_dag_folder()
    mark_scheduled(new_run("lff_ui_down", "down_run"))

    def down() -> Any:
        raise HistoryUnavailableError("history store unavailable: connection refused")

    monkeypatch.setattr(app, "_store", down)
    body = client.get("/adaptive/api/queue", headers=auth).json()
    mine = [t for t in body["tasks"] if t["dag_id"] == "lff_ui_down"]
    assert len(mine) == 2 and all(t["lff_weight_now"] is None and t["airflow_weight"] for t in mine)
    assert all(t["lff_rank"] is None for t in mine)  # ranks unknown: Airflow's weights are shown, not ranked
    assert body["note"].startswith("history store unavailable: connection refused")


MODES_DAGS = """
from datetime import datetime
from airflow.sdk import DAG
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
for dag_id, tag in (("modes_tagged", "Adaptive:Recommend"), ("modes_badtag", "adaptive:sometimes")):
    with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2026, 1, 1), tags=[tag, "other"]):
        KubernetesPodOperator(task_id="work", image="busybox")
"""


def test_modes_per_dag_and_per_family(
    client: Any, auth: dict[str, str], engine: Any, airflow_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.scheduling import serialise_dag_folder

    path = airflow_home / "dags" / "modes_dags.py"
    path.write_text(MODES_DAGS)
    try:
        serialise_dag_folder()
    finally:
        path.unlink()
    work = [attempt(i, family="modes.work", run=f"m{i}", peak=GIB) for i in range(3)]
    sql_store(engine).record([replace(a, key=replace(a.key, dag_id="modes_tagged")) for a in work])
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MODE", "observe")
    get_settings.cache_clear()
    dags = {d["dag_id"]: d for d in client.get("/adaptive/api/modes", headers=auth).json()["dags"]}
    assert dags["modes_tagged"] == {"dag_id": "modes_tagged", "tag": "recommend", "tag_problem": None,
                                    "pods": "recommend (DAG tag)", "operator_pods": "recommend (DAG tag)"}  # fmt: skip
    assert (
        dags["modes_badtag"]["tag"] is None
        and "'sometimes' is not a mode" in dags["modes_badtag"]["tag_problem"]
    )
    assert dags["modes_badtag"]["pods"] == "observe ([adaptive] mode)"  # a bad tag is ignored, and said
    family = client.get("/adaptive/api/family", params={"name": "modes.work"}, headers=auth).json()["modes"]
    assert family["dags"][0]["pods"] == "recommend (DAG tag)" and family["recommending"] is True
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__FAMILY_MODES", "modes.*=enforce")
    get_settings.cache_clear()
    family = client.get("/adaptive/api/family", params={"name": "modes.work"}, headers=auth).json()["modes"]
    assert family["dags"][0]["operator_pods"] == "enforce ([adaptive] family_modes)"
    assert family["recommending"] is False
    whatif = client.get("/adaptive/api/family/whatif", params={"name": "modes.work"}, headers=auth).json()
    assert whatif["configured"] == "adaptive"  # what the page compares with the users' requests


def test_the_runtime_per_group_comes_from_the_attempts_the_user_may_read() -> None:
    """The slow group's runs (100 s, on the readable DAG) give it 100 s and the fast group, scaled by
    the CPU scores, 50 s; the secret DAG's runs on the fast group (10 s) count only for who may read
    every DAG."""
    from airflow_adaptive.core.grouping import NodeProfile, group_nodes

    store = InMemoryHistoryStore()
    profiles = [
        NodeProfile(name, {"cpu_events_per_s": cpu + i}, 8, 32 * GIB)
        for cpu, prefix in ((200.0, "slow"), (400.0, "fast"))
        for i, name in enumerate((f"{prefix}-1", f"{prefix}-2"))
    ]
    store.save_nodes(profiles, group_nodes(profiles))
    runs = [
        replace(
            attempt(n, family="align"),
            usage=replace(attempt(n).usage, wall_seconds=100.0),
            node_name="slow-1",
        )
        for n in range(4)
    ]
    secret = [
        replace(
            o,
            key=replace(o.key, dag_id="secret"),
            usage=replace(o.usage, wall_seconds=10.0),
            node_name="fast-1",
        )
        for o in runs
    ]
    store.record([*runs, *secret])
    settings = get_settings()
    mine = views.family_detail(store, settings, frozenset({"dag"}), "align", 100)
    assert mine is not None
    slow, fast = mine["runtime_by_group"]
    assert (slow["seconds"], slow["runs"]) == (pytest.approx(100.0), 4)
    assert (fast["seconds"], fast["runs"]) == (pytest.approx(100.0 * 200.5 / 400.5), 0)
    everyone = views.family_detail(store, settings, None, "align", 100)
    assert everyone is not None and [g["runs"] for g in everyone["runtime_by_group"]] == [4, 4]
    assert everyone["runtime_by_group"][1]["seconds"] == pytest.approx(10.0)
    # The Nodes page reads the runs the family's stored model kept, learnt when they were recorded.
    (row,) = views.nodes(store, settings, None)["runtimes"]
    assert row["task_family"] == "align" and row["seconds_by_group"] == pytest.approx({"1": 100.0, "2": 10.0})
    assert views.nodes(store, settings, frozenset({"dag"}))["runtimes"] == []  # ranks every DAG's families
