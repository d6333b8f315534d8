"""The node profiler, run for real (CI installs sysbench and fio), and its clear errors."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.core.grouping import BENCHMARK_FEATURES
from airflow_adaptive.profiling.files import load_profiles
from airflow_adaptive.profiling.profiler import ProfilerError, ProfilerSettings, profile_node

HAVE_TOOLS = bool(shutil.which("sysbench") and shutil.which("fio"))
REQUIRED = os.environ.get("ADAPTIVE_REQUIRE_PROFILER") == "1"


@pytest.mark.skipif(not HAVE_TOOLS and not REQUIRED, reason="sysbench and fio are not installed")
def test_profile_node_runs_the_benchmarks_and_groups_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "profile-node",
        "--json",
        "--seconds",
        "1",
        "--fio-size",
        "8M",
        "--fio-dir",
        str(tmp_path),
        "--node",
        "n1",
    ]
    assert main(argv) == 0
    profile = json.loads(capsys.readouterr().out)
    assert profile["node"] == "n1" and profile["cores"] >= 1 and profile["memory_bytes"] > 0
    assert set(profile["benchmarks"]) == set(BENCHMARK_FEATURES)
    assert all(value > 0 for value in profile["benchmarks"].values())
    assert profile["benchmarks"]["cpu_multi_events_per_s"] >= 0.8 * profile["benchmarks"]["cpu_events_per_s"]
    assert list(tmp_path.iterdir()) == []  # the fio file is cleaned up
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps([profile, {**profile, "node": "n2"}]))
    (loaded, _) = load_profiles(path)
    assert loaded.node == "n1" and loaded.benchmarks == pytest.approx(profile["benchmarks"])


def test_missing_tools_name_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ProfilerError, match="install the package 'sysbench'"):
        profile_node("n", ProfilerSettings(seconds_per_benchmark=1))
