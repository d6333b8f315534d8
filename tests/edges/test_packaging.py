"""Registration with Airflow: provider, plugin (with auth), policy entry point, example DAG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def airflow(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "airflow", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_provider_and_plugin_are_listed() -> None:
    assert "airflow-adaptive" in airflow("providers", "list")
    assert "/adaptive" in airflow("plugins")


def test_provider_config_defaults_reach_airflow_conf() -> None:
    from airflow.configuration import conf

    assert conf.get("adaptive", "history_conn_id") == "adaptive_history_default"
    assert conf.getboolean("adaptive", "mutate_all_pods") is False


def test_policy_entry_point_is_loaded() -> None:
    from airflow.settings import get_policy_plugin_manager

    names = [name for name, _ in get_policy_plugin_manager().list_name_plugin()]
    assert any(
        "airflow_adaptive.policy" in str(plugin)
        for _, plugin in get_policy_plugin_manager().list_name_plugin()
    ), names


@pytest.fixture(scope="module")
def client() -> Any:
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    return TestClient(create_app("core"))


def test_plugin_endpoints_need_a_logged_in_user(client: Any) -> None:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    for path in ("/adaptive/health", "/adaptive/families"):
        assert client.get(path).status_code == 401
        assert client.post(path).status_code in (401, 405)
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="viewer", role="VIEWER"))
    response = client.get("/adaptive/health", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200 and response.json()["store"] == "ok"
    assert client.post("/adaptive/health", headers={"Authorization": f"Bearer {token}"}).status_code == 405


def test_example_dags_parse_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    assert "adaptive_genomics" in bag.dag_ids
    dag = bag.get_dag("adaptive_genomics")
    assert len(dag.tasks) == 11
    aligns = [t for t in dag.tasks if t.task_id.startswith("align_")]
    assert {t.task_family for t in aligns} == {"genomics.align"}
    # what the operators record as image and program is what the demo history says they ran
    from airflow_adaptive.demo import EXAMPLE_TOOLS
    from airflow_adaptive.kubernetes.pods import tool_of

    assert {t.task_family: tool_of(t.image, t.cmds, t.arguments) for t in dag.tasks} == EXAMPLE_TOOLS


def test_plugins_folder_shim_imports() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "plugins" / "adaptive_plugin.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_readme_configuration_reference_is_the_generated_one(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_adaptive.cli import main

    assert main(["config-reference"]) == 0
    assert capsys.readouterr().out.strip() in (ROOT / "README.md").read_text()
