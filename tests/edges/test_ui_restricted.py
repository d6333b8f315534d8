"""A user who may read one DAG, through Airflow's real api-server app and a small auth manager: no
number, input or count of another DAG reaches them from any endpoint, and a family the two DAGs
share shows the readable part and says that the rest is hidden."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import quote

import pytest

from airflow_adaptive.core.grouping import NodeProfile, group_nodes
from airflow_adaptive.core.locality import InputUse, content_key
from airflow_adaptive.core.model import TaskKey
from airflow_adaptive.core.units import GIB, MIB
from tests.conftest import sql_store
from tests.factories import attempt
from tests.scheduling import load_dag, mark_scheduled, new_run, serialise_dag_folder

READABLE = frozenset({"dag_a"})
SECRET_PEAK = 37 * GIB + 123 * MIB  # dag_b's peaks: no trace of them may reach the restricted user
SECRET_URI = "s3://secret-bucket/patient-42.bam"


def restricted_manager() -> Any:
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    class OneDagAuthManager(SimpleAuthManager):
        """The simple auth manager, but user 'restricted' reads only the DAGs in READABLE."""

        def is_authorized_dag(
            self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None
        ) -> bool:
            if user.get_name() != "restricted":
                return bool(super().is_authorized_dag(method=method, user=user, details=details))
            return details is not None and details.id in READABLE and method == "GET"

        def get_authorized_dag_ids(self, *, user: Any, method: Any = "GET", session: Any = None) -> set[str]:
            return set(READABLE) if user.get_name() == "restricted" else {"dag_a", "dag_b"}

    return OneDagAuthManager()


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from airflow.api_fastapi import app as airflow_app
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    manager = restricted_manager()
    monkeypatch.setattr(airflow_app._AuthManagerState, "instance", manager)
    client = TestClient(airflow_app.create_app("core"))  # keeps our manager: it is a SimpleAuthManager
    assert airflow_app.get_auth_manager() is manager
    token = manager.generate_jwt(SimpleAuthManagerUser(username="restricted", role="VIEWER"))
    client.headers["Authorization"] = f"Bearer {token}"
    yield client


def record_dags(engine: Any, dags: tuple[str, ...]) -> None:
    """'shared' run by both DAGs (small peaks in dag_a, SECRET_PEAK in dag_b), 'b_only' by dag_b
    alone, and an input staged by each."""
    store = sql_store(engine)

    def ran(dag: str, task: str, n: int, family: str, peak: int, request: int) -> Any:
        return replace(attempt(n, family=family, peak=peak), key=TaskKey(dag, task, f"{dag}{n}", -1, 1),
                       memory_request_bytes=request, memory_limit_bytes=request, user_request_bytes=request,
                       explanation="P95 of the family's peaks 37.1 GiB +15%")  # as if decided over both DAGs  # fmt: skip

    if "dag_a" in dags:
        store.record([ran("dag_a", "t", n, "shared", GIB + n * MIB, 4 * GIB) for n in range(12)])
        store.record([ran("dag_a", "v", n, "a_only", 2 * GIB + n * MIB, 4 * GIB) for n in range(12)])
        ref = InputUse("s3://refs/genome.fa", 3 * GIB, content_key("s3://refs/genome.fa", 3 * GIB), True)
        store.record_inputs("node-1", [ref], [], "dag_a")
        profiles = [
            NodeProfile(f"node-{i}", {"cpu_events_per_s": 300.0 + 200 * i}, 8, 32 * GIB) for i in range(3)
        ]
        store.save_nodes(profiles, group_nodes(profiles))
    if "dag_b" in dags:
        store.record([ran("dag_b", "t", n, "shared", SECRET_PEAK, 48 * GIB) for n in range(12)])
        store.record([ran("dag_b", "u", n, "b_only", SECRET_PEAK, 48 * GIB) for n in range(12)])
        secret = InputUse(SECRET_URI, 5 * GIB, content_key(SECRET_URI, 5 * GIB), True)
        store.record_inputs("node-1", [secret], [], "dag_b")


@pytest.fixture
def two_dags(engine: Any) -> None:
    record_dags(engine, ("dag_a", "dag_b"))


def endpoints() -> list[str]:
    name = quote("shared")
    return ["/adaptive/api/overview", "/adaptive/api/families", f"/adaptive/api/family?name={name}",
            f"/adaptive/api/family/whatif?name={name}", "/adaptive/api/nodes", "/adaptive/api/queue",
            "/adaptive/health", "/adaptive/families"]  # fmt: skip


def secrets_in(text: str) -> list[str]:
    """Whatever of dag_b could show: its name, its family, its input, its peak in any unit."""
    marks = ["dag_b", "b_only", "secret-bucket", str(SECRET_PEAK), "37.1 GiB", "37.12", "39.9", "48 GiB"]
    return [m for m in marks if m in text]


def test_nothing_of_an_unreadable_dag_reaches_a_restricted_user(client: Any, two_dags: None) -> None:
    for path in endpoints():
        response = client.get(path)
        assert response.status_code == 200, (path, response.text)
        assert not secrets_in(response.text), (path, secrets_in(response.text), response.text[:2000])


def test_a_shared_family_shows_the_readable_part_and_says_the_rest_is_hidden(
    client: Any, two_dags: None
) -> None:
    overview = client.get("/adaptive/api/overview").json()
    assert overview["attempts"] == 24 and overview["families"] == 2 and overview["oom_killed"] == 0
    rows = {r["task_family"]: r for r in client.get("/adaptive/api/families").json()["families"]}
    assert set(rows) == {"shared", "a_only"} and not rows["a_only"]["history_hidden"]
    row = rows["shared"]
    assert row["attempts"] == 12 and row["history_hidden"]
    assert row["decision"]["memory_request_bytes"] < 2 * GIB  # dag_a's peaks alone, not dag_b's 37 GiB
    detail = client.get("/adaptive/api/family", params={"name": "shared"}).json()
    assert detail["history_hidden"] and "may not read" in detail["hidden_note"]
    assert detail["dags"] == ["dag_a"] and len(detail["attempts"]) == 12
    assert detail["decision"]["memory_request_bytes"] < 2 * GIB
    assert detail["labels"] is None and "not shown" in detail["placement"]  # hidden, not "none"
    assert all(a["explanation"].startswith("not shown") for a in detail["attempts"] if a["explanation"])
    assert client.get("/adaptive/api/family", params={"name": "b_only"}).status_code == 404
    nodes = client.get("/adaptive/api/nodes").json()
    assert [i["uri"] for n in nodes["cached_inputs"] for i in n["inputs"]] == ["s3://refs/genome.fa"]
    assert client.get("/adaptive/health").json()["task_families"] == 2


def test_a_user_who_reads_every_dag_sees_both(client: Any, two_dags: None) -> None:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="ADMIN"))
    client.headers["Authorization"] = f"Bearer {token}"
    text = json.dumps([client.get(path).json() for path in endpoints()])
    assert {"dag_b", "b_only", "secret-bucket"} <= set(secrets_in(text))  # the marks can be seen
    (shared,) = [
        r for r in client.get("/adaptive/api/families").json()["families"] if r["task_family"] == "shared"
    ]
    assert not shared["history_hidden"] and shared["decision"]["memory_request_bytes"] > SECRET_PEAK


# What the restricted user is told about hiding, and what only a user who reads all may see.
SAYS_HIDDEN = {"history_hidden", "hidden_note", "note"}


def _without_hiding(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_hiding(v) for k, v in value.items() if k not in SAYS_HIDDEN}
    if isinstance(value, list):
        return [_without_hiding(v) for v in value]
    return value


def queue_dag_a(airflow_home: Path, tmp_path: Path) -> None:
    """dag_a's two tasks scheduled, so that the queue has rows (and ranks) to show."""
    load_dag(airflow_home, cast(Any, SimpleNamespace(kubeconfig=tmp_path / "kubeconfig")), "dag_a")
    serialise_dag_folder()
    mark_scheduled(new_run("dag_a", "nightly"))


def test_what_a_restricted_user_sees_is_what_they_would_see_if_the_other_dag_never_ran(
    client: Any, engine: Any, airflow_home: Path, tmp_path: Path
) -> None:
    """The strongest form: every endpoint answers as if dag_b had never run, but for saying so."""
    queue_dag_a(airflow_home, tmp_path)
    record_dags(engine, ("dag_a",))
    queue = client.get("/adaptive/api/queue").json()["tasks"]  # no rank: Airflow's weights saw every DAG
    assert len(queue) == 2 and all(t["lff_rank"] is None and t["lff_weight_now"] is None for t in queue)
    assert client.get("/adaptive/api/nodes").json()["groups"]
    alone = [_without_hiding(client.get(path).json()) for path in endpoints()]
    record_dags(engine, ("dag_b",))
    beside = [_without_hiding(client.get(path).json()) for path in endpoints()]
    for path, before, after in zip(endpoints(), alone, beside, strict=True):
        assert after == before, path
