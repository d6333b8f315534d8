"""How the CLI's tables say their figures: GB·h in plain decimals from milliseconds-long tasks to
whole pipelines, and the policy ``simulate --placement default`` ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.console import significant
from airflow_adaptive.core.placement import DEFAULT_PLACEMENT
from airflow_adaptive.simulate_cli import shown_placement

EXAMPLE = str(Path(__file__).parents[2] / "docs" / "examples" / "nextflow" / "chipseq_trace.txt")


def test_gb_hours_are_plain_decimals_to_three_significant_digits() -> None:
    shown = [significant(v) for v in (0.000609, 0.0009701, 2.907, 541.03, 29069.4, 99.96, 0.0009996)]
    assert shown == ["0.000609", "0.000970", "2.91", "541", "29,069", "100", "0.00100"]
    assert [significant(v) for v in (0.0, -0.0, float("nan"), -3.14159)] == ["0", "0", "nan", "-3.14"]


def test_replay_shows_each_strategys_waste_and_its_budget_sweep_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "replay",
        EXAMPLE,
        "--strategy",
        "pc95",
        "--history",
        "sequential",
        "--workers",
        "1",
        "--budget-sweep",
    ]
    assert main([*argv, "--json"]) == 0
    (trace,) = json.loads(capsys.readouterr().out)["traces"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    (row,) = [line for line in table.splitlines() if "│ pc95 " in line]
    assert f" {significant(trace['strategies']['pc95']['waste_gb_h'])} │" in row
    first = trace["budget_sweep"][0]
    assert f"0: {significant(first['waste_gb_h'])} GB·h, {first['retries_per_100']:.2f} kills/100" in table
    assert "e+" not in table


def test_the_simulate_table_says_which_policy_default_ran(capsys: pytest.CaptureFixture[str]) -> None:
    assert [shown_placement(n) for n in ("default", "default+locality/lff-persevere", "tarema/fifo")] == [
        f"default ({DEFAULT_PLACEMENT})", f"default ({DEFAULT_PLACEMENT})+locality/lff-persevere", "tarema/fifo"
    ]  # fmt: skip
    assert (
        main(
            ["simulate", "--cluster", "5,5,5", "--workload", "synthetic:montage:60", "--placement", "default"]
        )
        == 0
    )
    assert f"│ default ({DEFAULT_PLACEMENT}) " in capsys.readouterr().out
    assert main(["simulate", "--cluster", "5,5,5", "--workload", "synthetic:montage:60", "--placement", "default",
                 "--json"]) == 0  # fmt: skip
    assert "default" in json.loads(capsys.readouterr().out)["results"]  # the name it was asked by
