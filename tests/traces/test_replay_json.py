"""``replay --json --budget-sweep --plot``: the report's keys and values as docs/sizing.md documents
them, deterministic, and what ``--min-observations`` and the quick default say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.cli import main
from tests.traces.test_traces import write


def adaptive_point(entry: dict[str, Any]) -> tuple[float, float]:
    return entry["strategies"]["adaptive"]["waste_gb_h"], entry["strategies"]["adaptive"]["retries_per_100"]


def check_the_documented_report(report: dict[str, Any], tmp_path: Path) -> None:
    """The keys and values docs/sizing.md documents for ``replay --json --budget-sweep --plot``."""
    assert {
        "history",
        "time_to_failure",
        "max_oom_rate",
        "default_strategy",
        "anchor_strategies",
        "traces",
    } <= set(report)
    assert report["max_oom_rate"] == 0.02  # [adaptive] max_oom_rate's default
    assert report["min_observations"] == 1  # [adaptive] min_observations's default
    assert report["min_memory_bytes"] == 64 * 2**20  # [adaptive] min_memory's default
    assert report["default_strategy"] == "adaptive" and "user" not in report["anchor_strategies"]
    (entry,) = report["traces"]
    assert entry["instances"] == 60 and entry["history"] == "sequential"
    assert entry["skipped"] == {"rows": 0, "reasons": {}, "first_line": {}}
    assert entry["cap_bytes"] == 512 * 2**20  # no --cap-bytes: the largest peak, 499 MB, up to a power of two
    assert "user" not in entry["strategies"]  # no requests in a CCTools table
    for metrics in entry["strategies"].values():
        assert set(metrics) == {"waste_gb_h", "maq", "wrr", "ate", "retries_per_100", "failed"}
    assert entry["strategies"]["whole-node"]["wrr"] == 0.0
    sweep = [0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]  # a 1-2-5 series
    assert [p["max_oom_rate"] for p in entry["budget_sweep"]] == sweep
    # every anchor replayed is a point, beside the default and its sweep
    assert sorted(entry["pareto"]) == sorted(set(report["anchor_strategies"]) & set(entry["strategies"]))
    for name, p in entry["pareto"].items():
        ours, theirs = adaptive_point(entry), entry["strategies"][name]
        assert p["default_beats"] == (
            ours[0] <= theirs["waste_gb_h"] and ours[1] <= theirs["retries_per_100"]
        )
        assert set(p) == {
            "waste_gb_h",
            "retries_per_100",
            "failed",
            "default_beats",
            "beats_default",
            "tie",
            "sweep_beats",
            "sweep_budgets",
        }
    (at_default,) = [p for p in entry["budget_sweep"] if p["max_oom_rate"] == report["max_oom_rate"]]
    adaptive = entry["strategies"]["adaptive"]  # the same replay: the curve passes through it
    assert at_default == {"max_oom_rate": 0.02, "waste_gb_h": adaptive["waste_gb_h"],
                          "retries_per_100": adaptive["retries_per_100"]}  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        f"{tmp_path.name}-t-predicted-vs-actual.png",
        f"{tmp_path.name}-t-waste-vs-kills.png",
        f"{tmp_path.name}-t-waste.png",
    ]


def test_replay_cli_prints_the_documented_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = "\n".join(
        f"{i} -- 1 -- {100 + (i * 53) % 400} -- 0 -- 0 -- {10 + i % 5} -- 1 -- {i % 2}" for i in range(60)
    )
    trace = write(
        tmp_path / "t.txt", "task_id -- core -- memory -- v -- d -- time -- a -- tag\n" + rows + "\n"
    )
    argv = [
        "replay",
        str(trace),
        "--strategy",
        "all",
        "--json",
        "--workers",
        "1",
        "--budget-sweep",
        "--plot",
        str(tmp_path / "plots"),
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    check_the_documented_report(report, tmp_path)
    (entry,) = report["traces"]
    assert main([*argv[:-2]]) == 0
    assert json.loads(capsys.readouterr().out)["traces"] == report["traces"]  # deterministic
    assert (
        main(["replay", str(trace), "--strategy", "adaptive", "--workers", "1", "--min-observations", "5"])
        == 0
    )
    table = " ".join(capsys.readouterr().out.split())  # the title may wrap
    assert "the request until 5 tasks finished" in table  # the table says so
    # Without --strategy: every strategy but the slow ones, and the report says which were left out
    assert main(["replay", str(trace), "--json", "--workers", "1"]) == 0
    (quick,) = json.loads(capsys.readouterr().out)["traces"]
    assert sorted(quick["strategies"]) == sorted(set(entry["strategies"]) - {"sizey"})
    assert quick["left_out"] == {"sizey": "each of its decisions takes seconds (--strategy all replays it)"}
    assert quick["strategies"]["adaptive"] == entry["strategies"]["adaptive"]
