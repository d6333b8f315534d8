"""The UI's JSON endpoints in Airflow's real api-server app: login, read-only, numbers, bad input,
and DAG-level access through the views."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.config import get_settings
from airflow_adaptive.core.model import IMPORTED_DAG_ID, ExitReason, TaskKey
from airflow_adaptive.core.sizing import predictor_names, quick_predictor_names
from airflow_adaptive.core.units import GIB
from airflow_adaptive.demo import generated_history
from airflow_adaptive.plugin import views
from airflow_adaptive.plugin.sources import chosen_source
from airflow_adaptive.store.api import Source, TotalsQuery
from tests.conftest import EXAMPLES, sql_store
from tests.factories import attempt
from tests.memory_store import InMemoryHistoryStore

CHIPSEQ = EXAMPLES / "nextflow" / "chipseq_trace.txt"  # 328 attempts, as Nextflow writes them
BWA = "NFCORE_CHIPSEQ:CHIPSEQ:ALIGN_BWA_MEM:BWA_MEM"
PAGES = ("/adaptive/ui", "/adaptive/static/app.js", "/adaptive/api/overview", "/adaptive/api/families",
         "/adaptive/api/family?name=genomics.align", "/adaptive/api/family/whatif?name=genomics.align",
         "/adaptive/api/nodes", "/adaptive/api/task/adaptive_genomics/align", "/adaptive/health",
         "/adaptive/api/queue", "/adaptive/api/modes")  # fmt: skip


@pytest.fixture
def demo(engine: Any) -> list[Any]:
    history = generated_history()
    sql_store(engine).record(history)
    return history


def test_every_page_and_endpoint_needs_login_and_only_reads(
    client: Any, auth: dict[str, str], demo: Any
) -> None:
    for path in PAGES:
        if path != "/adaptive/ui":  # the page redirects to the login page instead (below)
            assert client.get(path).status_code == 401, path
        assert client.get(path, headers=auth).status_code == 200, path
        for method in ("post", "put", "delete", "patch"):
            assert getattr(client, method)(path, headers=auth).status_code == 405, (method, path)
    for docs in ("/adaptive/docs", "/adaptive/redoc", "/adaptive/openapi.json"):
        assert client.get(docs).status_code != 200 and client.get(docs, headers=auth).status_code == 404
    assert client.get("/adaptive/static/../store/tables.py", headers=auth).status_code == 404


def test_the_page_without_login_sends_the_browser_to_airflows_login_and_back(client: Any) -> None:
    from urllib.parse import parse_qs, urlsplit

    for path, back in (("/adaptive/ui", "/adaptive/ui"), ("/adaptive/ui?x=1", "/adaptive/ui?x=1")):
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 303, response.text
        login = urlsplit(response.headers["location"])
        assert login.path == "/auth/login" and parse_qs(login.query)["next"] == [back]
    expired = client.get("/adaptive/ui", headers={"Cookie": "_token=expired"}, follow_redirects=False)
    assert expired.status_code == 303
    api = client.get("/adaptive/api/overview")  # data keeps answering scripts in JSON
    assert api.status_code == 401 and api.json() == {"detail": "Not authenticated"}


def test_a_tasks_tab_opens_the_family_its_operator_names(
    client: Any, auth: dict[str, str], demo: Any, airflow_home: Any
) -> None:
    from tests.scheduling import serialise_dag_folder

    (airflow_home / "dags" / "adaptive_genomics.py").write_text(
        "from airflow_adaptive.example_dags.adaptive_genomics import dag  # noqa: F401\n"
    )
    serialise_dag_folder()
    for task, family in (("align_NA12878", "genomics.align"), ("call_HG002", "genomics.call_variants"),
                         ("report", "genomics.report")):  # fmt: skip
        found = client.get(f"/adaptive/api/task/adaptive_genomics/{task}", headers=auth).json()
        assert found == {"task_family": family, "source": "dag"}
        assert client.get(f"/adaptive/api/family?name={family}", headers=auth).status_code == 200
    # a task no DAG declares: the family its recorded attempts carry, else dag_id.task_id
    recorded = client.get("/adaptive/api/task/other_dag/align", headers=auth).json()
    assert recorded == {"task_family": "other_dag.align", "source": "default"}
    sql_store_attempts = client.get("/adaptive/api/task/adaptive_genomics/align", headers=auth).json()
    assert sql_store_attempts == {"task_family": "genomics.align", "source": "attempts"}
    nul = client.get("/adaptive/api/task/a%00b/align", headers=auth)  # PostgreSQL refuses NUL in text
    assert nul.status_code == 200 and nul.json() == {"task_family": "a\ufffdb.align", "source": "default"}


def test_numbers_are_the_stores(client: Any, auth: dict[str, str], demo: Any) -> None:
    overview = client.get("/adaptive/api/overview", headers=auth).json()
    assert overview["attempts"] == len(demo) and overview["families"] == 5
    assert overview["oom_killed"] == sum(o.oom_killed for o in demo) == 1
    assert overview["retries"] == 1  # the killed try's retry
    assert len(overview["days"]) == 12 and 0.1 < overview["saving_fraction"] < 0.5
    table = client.get("/adaptive/api/families?sort=task_family&order=asc&page_size=2", headers=auth).json()
    assert table["total"] == 5 and [f["task_family"] for f in table["families"]] == [
        "genomics.align",
        "genomics.call_variants",
    ]
    align = table["families"][0]
    assert (align["attempts"], align["oom_killed"]) == (13, 1)
    assert align["decision"]["strategy"] == "adaptive" and align["p50_peak_bytes"] > 8 * GIB
    second = client.get("/adaptive/api/families?sort=task_family&order=asc&page_size=2&page=2", headers=auth)
    assert second.json()["families"][0]["task_family"] == "genomics.index_reference"
    detail = client.get("/adaptive/api/family?name=genomics.align", headers=auth).json()
    assert len(detail["attempts"]) == 13 and sum(a["oom_killed"] for a in detail["attempts"]) == 1
    assert (detail["image"], detail["program"]) == ("biocontainers/bwa:v0.7.17_cv1", "bwa mem")
    whatif = client.get("/adaptive/api/family/whatif?name=genomics.align", headers=auth).json()
    assert sorted(s["strategy"] for s in whatif["strategies"]) == quick_predictor_names()
    assert whatif["left_out"] == ["sizey"] == sorted(set(predictor_names()) - set(quick_predictor_names()))
    assert whatif["tasks"] == 12  # the OOM-killed attempt has no measured peak; its retry has
    assert whatif["max_oom_rate"] == detail["decision"]["max_oom_rate"] == 0.02  # the configured budget
    assert whatif["min_observations"] == 1
    assert detail["decision"]["rule"] in detail["decision"]["explanation"]
    assert 0.0 <= detail["decision"]["rule_oom_rate"] <= 1.0
    # the list decides for the request its family's page does (the newest attempt's)
    assert align["decision"]["memory_request_bytes"] == detail["decision"]["memory_request_bytes"]


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ("/api/family?name=no-such-family", 404, "unknown task family"),
        ("/api/families?page=-1", 422, "greater than or equal to 1"),
        ("/api/families?page_size=1000000", 422, "less than or equal to 200"),
        ("/api/families?sort=memory", 400, "sort must be one of"),
        ("/api/families?order=sideways", 422, "pattern"),
        ("/api/overview?start=2026-13-01", 422, "month value is outside"),
        ("/api/overview?start=86400", 422, "a day is written YYYY-MM-DD"),  # not a Unix time
        ("/api/families?end=-1", 422, "a day is written YYYY-MM-DD"),
        ("/api/overview?start=2026-11-05&end=2026-11-01", 400, "is after end"),
        ("/api/family?name=genomics.align&limit=0", 422, "greater than or equal to 1"),
        ("/api/overview?source=both", 400, "source must be one of live, imported, all"),
        ("/api/families?source=LIVE", 400, "source must be one of live, imported, all"),
    ],
)
def test_bad_parameters_are_a_clear_4xx(
    client: Any, auth: dict[str, str], demo: Any, query: str, status: int, says: str
) -> None:
    response = client.get(f"/adaptive{query}", headers=auth)
    assert response.status_code == status and says in response.text


def test_a_family_is_found_by_its_exact_name_whatever_it_holds(
    client: Any, auth: dict[str, str], engine: Any, demo: Any
) -> None:
    """Names are arbitrary text: one ending in '/whatif' is not the what-if of another family, and a
    newline (which Starlette's path pattern never matched) is found like any other character."""
    odd = ("genomics.align/whatif", "NFCORE:ALIGN (sample 1)\nretry", "a/b%2Fc?d=e&f#g +h")
    for n, name in enumerate(odd):
        sql_store(engine).record([attempt(i, family=name, run=f"odd{n}-{i}") for i in range(3)])
    for name in (*odd, "genomics.align"):
        detail = client.get("/adaptive/api/family", params={"name": name}, headers=auth)
        whatif = client.get("/adaptive/api/family/whatif", params={"name": name}, headers=auth)
        assert detail.status_code == whatif.status_code == 200, (name, detail.text, whatif.text)
        assert detail.json()["task_family"] == whatif.json()["task_family"] == name
        assert len(detail.json()["attempts"]) == (13 if name == "genomics.align" else 3)
        assert sorted(s["strategy"] for s in whatif.json()["strategies"]) == quick_predictor_names()
    # the old path form read "a%2Fwhatif" as the what-if of "a": it now says where families are
    for old in ("/adaptive/api/families/genomics.align%2Fwhatif", "/adaptive/api/families/genomics.align"):
        moved = client.get(old, headers=auth)
        assert moved.status_code == 404 and "/adaptive/api/family?name=" in moved.json()["detail"], old
    unknown = client.get("/adaptive/api/family", params={"name": "genomics.align\n"}, headers=auth)
    assert unknown.status_code == 404 and "unknown task family" in unknown.text


def test_a_time_range_and_a_search_narrow_the_totals(client: Any, auth: dict[str, str], demo: Any) -> None:
    first_week = client.get("/adaptive/api/overview?start=2026-11-01&end=2026-11-07", headers=auth).json()
    assert first_week["attempts"] == 36 and len(first_week["days"]) == 7
    found = client.get("/adaptive/api/families?search=CALL_", headers=auth).json()
    assert [f["task_family"] for f in found["families"]] == ["genomics.call_variants"]
    assert client.get("/adaptive/api/families?search=%25", headers=auth).json()["total"] == 0  # % is literal


def test_the_what_if_replay_sizes_with_the_configured_settings() -> None:
    store = InMemoryHistoryStore()
    asked = [
        replace(attempt(n, family="f", peak=(1 + n % 3) * GIB), user_request_bytes=16 * GIB)
        for n in range(30)
    ]
    store.record(asked)
    settings = get_settings()
    warm_up = replace(settings, sizing=replace(settings.sizing, min_observations=10))
    floored = replace(settings, sizing=replace(settings.sizing, floor_bytes=6 * GIB))  # min_memory
    waste = {}
    for label, configured in (("default", settings), ("warm-up", warm_up), ("floor", floored)):
        found = views.whatif(store, configured, None, "f")
        assert found is not None and found["min_observations"] == configured.sizing.min_observations
        waste[label] = {s["strategy"]: s["waste_gb_h"] for s in found["strategies"]}
    assert waste["warm-up"]["adaptive"] > waste["default"]["adaptive"]  # 16 GiB for the first ten
    # the what-if sizes with every configured setting, as pods are: here the floor (peaks 1-3 GiB)
    assert waste["floor"]["adaptive"] > waste["default"]["adaptive"]


def test_a_user_sees_only_the_attempts_of_dags_they_may_read() -> None:
    store = InMemoryHistoryStore()
    shared = [attempt(n, family="shared", peak=GIB) for n in range(4)]
    store.record([*shared, *(replace(o, key=replace(o.key, dag_id="secret")) for o in shared)])
    store.record([replace(attempt(9, family="hidden"), key=TaskKey("secret", "t", "r9"))])
    settings = get_settings()
    readable = frozenset({"dag"})
    page = views.families_page(store, settings, readable, TotalsQuery(readable))
    assert [(f["task_family"], f["attempts"]) for f in page["families"]] == [("shared", 4)]
    assert page["families"][0]["p50_peak_bytes"] is None  # family-wide figures would include "secret"
    detail = views.family_detail(store, settings, readable, "shared", 100)
    assert (
        detail is not None
        and {a["dag_id"] for a in detail["attempts"]} == {"dag"}
        and detail["dags"] == ["dag"]
    )
    assert views.family_detail(store, settings, readable, "hidden", 100) is None
    assert views.overview(store, readable, None, None, Source.LIVE)["attempts"] == 4
    assert views.overview(store, None, None, None, Source.LIVE)["attempts"] == 9
    killed = replace(attempt(20, family="shared"), exit_reason=ExitReason.OOM_KILLED)
    store.record([killed])
    assert views.overview(store, readable, None, None, Source.LIVE)["oom_killed"] == 1
    # an imported trace is no DAG the user may read: every source shows them only their DAG's attempts
    store.record(
        [
            replace(o, key=replace(o.key, dag_id=IMPORTED_DAG_ID, run_id=f"trace:{o.key.run_id}"))
            for o in shared
        ]
    )
    assert chosen_source(store, readable, None) is Source.LIVE
    assert [views.overview(store, readable, None, None, s)["attempts"] for s in (*Source, None)] == [5, 0, 5]
    assert views.overview(store, None, None, None, Source.IMPORTED)["attempts"] == 4
    mine = views.families_page(store, settings, readable, TotalsQuery(readable, source=Source.IMPORTED))
    assert mine["total"] == 0 and mine["families"] == []


def _import(*traces: Path) -> None:
    from airflow_adaptive.cli import main

    assert main(["history", "import", *map(str, traces)]) == 0


def _overview(client: Any, auth: dict[str, str], source: str | None = None) -> dict[str, Any]:
    params = {"source": source} if source else {}
    response = client.get("/adaptive/api/overview", params=params, headers=auth)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_an_import_leaves_the_live_saving_alone_and_savings_never_mix(
    client: Any, auth: dict[str, str], demo: Any
) -> None:
    """Imported attempts ran at their own requests: mixed in, they pulled "Saved vs users' requests"
    towards 0. Each importer (Nextflow's, and the one WfFormat shares with CCTools and Lotaru)."""
    before = _overview(client, auth)
    assert before["source"] == "live" and before["attempts"] == len(demo)
    _import(CHIPSEQ, EXAMPLES / "wfformat" / "chipseq_instance.json")
    live, imported, both = (_overview(client, auth, s) for s in ("live", "imported", "all"))
    assert _overview(client, auth) == live == before  # still live by default, and unchanged
    assert imported["source"] == "imported" and imported["attempts"] > 328  # chipseq's and the instance's
    assert imported["saving_fraction"] is not None and imported["saving_fraction"] < 0.05, imported
    assert live["saving_fraction"] > 0.1 and live["saving_fraction"] - imported["saving_fraction"] > 0.1
    assert both["attempts"] == live["attempts"] + imported["attempts"]
    assert both["saving_fraction"] is None and both["saving_gb_h"] is None  # no saving over both
    assert all(d["saving_fraction"] is None for d in both["days"])
    for name, one in (("live", live), ("imported", imported)):
        apart = both["saving_by_source"][name]
        assert (apart["attempts"], apart["saving_fraction"]) == (one["attempts"], one["saving_fraction"])
    assert [d["day"] for d in both["days"]] == sorted({d["day"] for d in live["days"] + imported["days"]})
    tables = {
        s: client.get("/adaptive/api/families", params={"source": s, "page_size": 200}, headers=auth).json()
        for s in ("live", "imported", "all")
    }
    assert tables["live"]["total"] == live["families"] == 5 and tables["live"]["source"] == "live"
    assert {f["task_family"] for f in tables["imported"]["families"]} >= {BWA}
    assert all(f["saving_fraction"] is None for f in tables["all"]["families"])
    assert any(f["saving_fraction"] is not None for f in tables["imported"]["families"])


def test_a_store_only_imported_into_shows_imported_attempts_by_default(
    client: Any, auth: dict[str, str]
) -> None:
    assert _overview(client, auth)["source"] == "imported"  # nothing at all yet: nothing live either
    _import(CHIPSEQ)
    shown = _overview(client, auth)
    assert shown["source"] == "imported" and shown["attempts"] == 328 and shown["families"] > 1
    assert client.get("/adaptive/api/families", headers=auth).json()["source"] == "imported"


def test_the_simple_auth_managers_viewer_reads_every_dag() -> None:
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    from airflow_adaptive.plugin.app import readable_dags

    assert readable_dags(SimpleAuthManagerUser(username="viewer", role="VIEWER")) is None
