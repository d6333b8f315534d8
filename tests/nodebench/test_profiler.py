"""The node profiler, run for real (CI installs sysbench and fio), and its clear errors."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.core.grouping import BENCHMARK_FEATURES
from airflow_adaptive.nodebench.files import ProfileFormatError, load_profiles
from airflow_adaptive.nodebench.profiler import ProfilerError, ProfilerSettings, profile_node

HAVE_TOOLS = bool(shutil.which("sysbench") and shutil.which("fio"))
REQUIRED = os.environ.get("ADAPTIVE_REQUIRE_PROFILER") == "1"


@pytest.mark.skipif(not HAVE_TOOLS and not REQUIRED, reason="sysbench and fio are not installed")
def test_profile_node_runs_the_benchmarks_and_groups_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "profile-node",
        "--json",
        "--repeats",
        "2",
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
    assert profile["repeats"] == 2 and set(profile["benchmark_cv"]) == set(BENCHMARK_FEATURES)
    assert all(
        math.isfinite(cv) and cv >= 0 for cv in profile["benchmark_cv"].values()
    )  # a busy machine's runs vary
    assert list(tmp_path.iterdir()) == []  # the fio file is cleaned up
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps([profile, {**profile, "node": "n2"}]))
    (loaded, _) = load_profiles(path)
    assert loaded.node == "n1" and loaded.benchmarks == pytest.approx(profile["benchmarks"])
    assert loaded.noise == pytest.approx({f: cv / 2**0.5 for f, cv in profile["benchmark_cv"].items()})
    assert main([*argv[:2], "--repeats", "0"]) == 2  # one line, no traceback


def test_missing_tools_name_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ProfilerError, match="install the package 'sysbench'"):
        profile_node("n", ProfilerSettings(seconds_per_benchmark=1))


def test_profile_noise_is_read_as_the_standard_error_of_the_mean(tmp_path: Path) -> None:
    profile = {"node": "n1", "benchmarks": {"cpu_events_per_s": 400.0}, "repeats": 4,
               "benchmark_cv": {"cpu_events_per_s": 0.06}}  # fmt: skip
    path = tmp_path / "p.json"
    path.write_text(json.dumps([profile]))
    assert load_profiles(path)[0].noise == {"cpu_events_per_s": pytest.approx(0.03)}  # 0.06 / sqrt(4)
    for bad, says in (
        ({"repeats": 0}, "'repeats' must be a positive whole number"),
        ({"benchmark_cv": {"io_score": 0.1}}, "'benchmark_cv' names no benchmark 'io_score'"),
        ({"benchmark_cv": {"cpu_events_per_s": -1}}, "benchmark_cv 'cpu_events_per_s' = -1 is not a number"),
        ({"benchmark_cv": [0.1]}, "'benchmark_cv' must be an object"),
        # JSON's integers have no bound: one past any float is no benchmark, shown cut short
        (
            {"benchmarks": {"cpu_events_per_s": 10**400}},
            "'cpu_events_per_s' = 1000000000000000000000000000000000000...",
        ),
        ({"cores": 10**400}, "'cores' must be a positive whole number (at most 2^62)"),
    ):
        path.write_text(json.dumps([{**profile, **bad}]))
        with pytest.raises(ProfileFormatError, match=re.escape(says)):
            load_profiles(path)
    # a CSV of benchmark results (Lotaru's bio-bench files look like profiles) or binary: one line
    # that says what is expected
    for text in (b"machine,cpu,mem\nn1,1.0,2.0\n", b"\xff\xfe\x00\x01", b"[" + b"9" * 5000 + b"]"):
        path.write_bytes(text)
        with pytest.raises(
            ProfileFormatError, match=r"not JSON node profiles .* 'airflow-adaptive profile-node --json'"
        ):
            load_profiles(path)
