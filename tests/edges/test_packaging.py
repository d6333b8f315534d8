"""Registration with Airflow: provider, plugin (with auth), policy entry point, example DAG; the lean
install: SimPy and matplotlib only with the ``research`` extra, and the CLI without them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

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
    assert conf.get("adaptive", "mode") == "off"


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


# -- the lean install: the research extra ------------------------------------------------------
RESEARCH = {"simpy", "matplotlib"}


@pytest.fixture(scope="module")
def requires_dist(tmp_path_factory: pytest.TempPathFactory) -> list[Requirement]:
    """The Requires-Dist of a wheel built from a copy of the sources (a build in the checkout would
    leave build/ and egg-info behind): what pip reads, unlike pyproject.toml's intent."""
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(
        ROOT / "airflow_adaptive", src / "airflow_adaptive", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("airflow_adaptive-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    return [Requirement(line) for line in metadata.get_all("Requires-Dist", [])]


def _needed_with(requires: list[Requirement], extra: str) -> set[str]:
    """The distributions pip installs for ``airflow-adaptive[extra]`` ("": the base install), one level."""
    return {r.name.lower() for r in requires if r.marker is None or r.marker.evaluate({"extra": extra})}


def test_simpy_and_matplotlib_come_only_with_the_research_extra(requires_dist: list[Requirement]) -> None:
    base = _needed_with(requires_dist, "")
    assert "apache-airflow" in base and not RESEARCH & base  # scheduler, workers, api-server
    for extra in ("postgres", "test"):
        assert not RESEARCH & _needed_with(requires_dist, extra), extra
    assert _needed_with(requires_dist, "research") >= RESEARCH
    (dev,) = [
        r
        for r in requires_dist
        if r.name == "airflow-adaptive" and r.marker is not None and r.marker.evaluate({"extra": "dev"})
    ]
    assert {"research", "test", "postgres"} <= dev.extras  # ./dev.sh installs .[dev]


LEAN = """
import sys
from importlib.abc import MetaPathFinder

MISSING = set(sys.argv.pop(1).split(","))

class Lean(MetaPathFinder):  # as if pip had not installed these distributions
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Lean())
"""


def lean(missing: str, code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter where the comma-separated ``missing`` modules cannot be imported."""
    return subprocess.run(
        [sys.executable, "-c", LEAN + code, missing, *argv], capture_output=True, text=True, timeout=300
    )


def test_without_the_extra_the_components_and_the_cli_still_import() -> None:
    code = (
        "import airflow_adaptive.cli, airflow_adaptive.policy, airflow_adaptive.operators.pod\n"
        "import airflow_adaptive.plugin\n"
        "from airflow_adaptive.cli import main\n"
        "main(['--help'])\n"
    )
    done = lean("simpy,matplotlib", code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "simulate" in done.stdout


SIMULATE = ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:ligo:20"]


@pytest.mark.parametrize(
    ("missing", "argv", "names"),
    [
        ("simpy,matplotlib", SIMULATE, "the simulator needs the research extra (No module named 'simpy')"),
        ("matplotlib", [*SIMULATE, "--plot", "PLOTS"], "simulate --plot needs the research extra"),
        ("matplotlib", ["replay", "NO_TRACE", "--plot", "PLOTS"], "replay --plot needs the research extra"),
    ],
    ids=["simulate", "simulate --plot", "replay --plot"],
)
def test_a_command_that_needs_the_extra_is_one_line_without_it(
    missing: str, argv: list[str], names: str, tmp_path: Path
) -> None:
    argv = [a.replace("PLOTS", str(tmp_path / "plots")).replace("NO_TRACE", str(tmp_path)) for a in argv]
    done = lean(missing, "from airflow_adaptive.cli import main\nraise SystemExit(main())", *argv)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"airflow-adaptive: error: {names}")
    assert line.endswith(": pip install 'airflow-adaptive[research]'")
    assert not (tmp_path / "plots").exists()  # stopped before any work
