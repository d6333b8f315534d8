"""``./dev.sh test``: every step reports, whichever failed, and the exit code says if any did."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Stands in for the venv's python: records which database pytest ran on and fails on one of them.
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = "pytest" ]; then
  echo "pytest on $ADAPTIVE_TEST_DB" >>"$STEPS"
  [ "$ADAPTIVE_TEST_DB" != "$FAIL_DB" ]
  exit $?
fi
cat >/dev/null  # postgres_up's script on stdin: the database is up
"""


def run_dev_test(tmp_path: Path, fail_db: str) -> tuple[int, str, str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for tool, script in {"python": FAKE_PYTHON, "ruff": "#!/bin/sh\n", "mypy": "#!/bin/sh\n"}.items():
        path = venv / "bin" / tool
        path.write_text(script)
        path.chmod(0o755)
    (venv / ".installed").touch()  # newer than pyproject.toml: no install
    steps = tmp_path / "steps.log"
    env = {**os.environ, "VENV": str(venv), "STEPS": str(steps), "FAIL_DB": fail_db}
    done = subprocess.run(
        ["bash", str(ROOT / "dev.sh"), "test"], env=env, capture_output=True, text=True, timeout=60
    )
    return done.returncode, steps.read_text() if steps.exists() else "", done.stdout + done.stderr


@pytest.mark.parametrize("fail_db", ["sqlite", "postgres"])
def test_a_failing_database_still_lets_the_other_run_and_fails_the_command(
    tmp_path: Path, fail_db: str
) -> None:
    code, steps, output = run_dev_test(tmp_path, fail_db)
    assert sorted(steps.splitlines()) == ["pytest on postgres", "pytest on sqlite"]  # side by side
    assert code != 0
    name = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[fail_db]
    assert f"FAILED: tests on {name}" in output


def test_all_steps_passing_exits_zero(tmp_path: Path) -> None:
    code, steps, output = run_dev_test(tmp_path, "none")
    assert code == 0 and steps.count("pytest on") == 2
    assert "all passed" in output


def test_the_demo_writes_to_its_own_store_whatever_the_shell_points_at(tmp_path: Path) -> None:
    """A user's exported AIRFLOW_HOME or database URL is a deployment: the generated history must
    not go there."""
    venv, seen = tmp_path / "venv", tmp_path / "seen.log"
    (venv / "bin").mkdir(parents=True)
    record = '#!/bin/sh\necho "$(basename "$0") $AIRFLOW_HOME ${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-unset}" >>"$SEEN"\n'
    for tool in ("python", "airflow", "airflow-adaptive"):
        (venv / "bin" / tool).write_text(record)
        (venv / "bin" / tool).chmod(0o755)
    (venv / ".installed").touch()
    theirs = tmp_path / "their-airflow"
    env = {**os.environ, "VENV": str(venv), "SEEN": str(seen), "AIRFLOW_HOME": str(theirs),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://prod/airflow"}  # fmt: skip
    done = subprocess.run(
        ["bash", str(ROOT / "dev.sh"), "demo", "--no-serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"not AIRFLOW_HOME={theirs}" in done.stderr
    assert "the demo ignores AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in done.stderr
    calls = seen.read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["airflow", "airflow-adaptive"]  # migrate, then the demo
    assert all(c.split()[1:] == [str(ROOT / ".airflow-home"), "unset"] for c in calls), calls


def test_the_demos_paths_are_read_from_where_the_user_ran_it(tmp_path: Path) -> None:
    """dev.sh runs from the checkout: a relative --trace or --dag-file is the user's, not the checkout's."""
    venv, seen = tmp_path / "venv", tmp_path / "seen.log"
    (venv / "bin").mkdir(parents=True)
    for tool, script in {"python": "#!/bin/sh\n", "airflow": "#!/bin/sh\n",
                         "airflow-adaptive": '#!/bin/sh\necho "$@" >>"$SEEN"\n'}.items():  # fmt: skip
        (venv / "bin" / tool).write_text(script)
        (venv / "bin" / tool).chmod(0o755)
    (venv / ".installed").touch()
    argv = ["demo", "--trace", "mine.csv", "--dag-file=dags/d.py", "--no-serve"]
    env = {**os.environ, "VENV": str(venv), "SEEN": str(seen)}
    done = subprocess.run(
        ["bash", str(ROOT / "dev.sh"), *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert seen.read_text().split() == [
        "demo",
        "--trace",
        f"{tmp_path}/mine.csv",
        f"--dag-file={tmp_path}/dags/d.py",
    ]
    typo = subprocess.run(["bash", str(ROOT / "dev.sh"), "demo", "--no-serv"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert typo.returncode == 2 and "\ndev.sh demo: unknown option --no-serv (it takes" in typo.stderr
    dashed = subprocess.run(["bash", str(ROOT / "dev.sh"), "demo", "--trace", "-odd.csv", "--no-serve"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert dashed.returncode == 0 and seen.read_text().split()[-2:] == ["--trace", f"{tmp_path}/-odd.csv"]
    short = subprocess.run(["bash", str(ROOT / "dev.sh"), "demo", "--dag", "d.py", "--no-serve"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert short.returncode == 0 and seen.read_text().split()[-2:] == [
        "--dag",
        f"{tmp_path}/d.py",
    ]  # a prefix
    done = subprocess.run(["bash", str(ROOT / "dev.sh"), "demo", "--trace", "/abs/t.csv", "--no-serve"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert seen.read_text().splitlines()[-1] == "demo --trace /abs/t.csv"
