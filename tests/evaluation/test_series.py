"""Replay over memory time series: the k-Segments folder format, static tries over time, growth in
place, and ``replay --time-series``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.evaluation.replay import ReplayConfig
from airflow_adaptive.evaluation.series import replay_series, static_outcome
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.runs import TaskRun
from airflow_adaptive.traces.series import SeriesRun, read_series

TASKS_HEADER = (
    "workflow,process,task,input_files,input_bytes,requested_bytes,start_s,duration_s,peak_mb,samples\n"
)


def plateau_then_rise(scale: float) -> list[float]:
    """MB every 2 s: 30 % of the peak for 100 s, then up to the peak over 120 s (bwa's shape)."""
    peak = 1000.0 * scale
    return [0.3 * peak] * 50 + [peak * (0.3 + 0.7 * k / 60) for k in range(1, 61)] + [peak] * 5


def write_folder(
    folder: Path, tasks: dict[str, list[float]], *, extra_rows: str = "", gz: bool = True
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [TASKS_HEADER]
    samples = ["task,t_s,memory_mb\n"]
    for i, (name, series) in enumerate(tasks.items()):
        process = name.split("-")[0]
        duration = 2.0 * (len(series) - 1)
        rows.append(
            f"wf,{process},{name},1,{1000 + i},4000000000,{1000.0 * i},{duration},{max(series)},{len(series)}\n"
        )
        samples += [f"{name},{2.0 * k},{mb}\n" for k, mb in enumerate(series)]
    (folder / "tasks.csv").write_text("".join(rows) + extra_rows)
    if gz:
        with gzip.open(folder / "memory.csv.gz", "wt") as out:
            out.write("".join(samples))
    else:
        (folder / "memory.csv").write_text("".join(samples))
    return folder


def family(n: int = 12) -> dict[str, list[float]]:
    return {f"align-{i}": plateau_then_rise(1.0 + 0.02 * (i % 5)) for i in range(n)}


def test_a_folder_reads_as_runs_with_their_samples_in_bytes(tmp_path: Path) -> None:
    bad = "wf,align,broken,1,5,5,-1,10,1,1\nwf,align,silent,1,5,5,50,10,1,1\n"
    trace = read_series(write_folder(tmp_path / "t", {"align-0": [100.0, 300.0, 200.0]}, extra_rows=bad))
    assert [s.run.family for s in trace.runs] == ["wf:align"]
    s = trace.runs[0]
    assert s.run.peak_bytes == 300_000_000 and s.run.wall_seconds == 4.0 and s.run.input_size_bytes == 1000
    assert list(s.times_s) == [0.0, 2.0, 4.0] and list(s.usage_bytes) == [1e8, 3e8, 2e8]
    assert trace.skipped == {"no start or duration": 1, "no memory samples": 1}
    plain = read_series(write_folder(tmp_path / "p", {"align-0": [100.0, 300.0]}, gz=False))
    assert plain.runs[0].run.peak_bytes == 300_000_000


def test_bad_folders_are_one_typed_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=r"no tasks\.csv"):
        read_series(tmp_path)
    folder = write_folder(tmp_path / "t", {"align-0": [1.0]})
    (folder / "tasks.csv").write_text("workflow,process\nwf,align\n")
    with pytest.raises(TraceFormatError, match="missing columns task, input_bytes"):
        read_series(folder)


def test_a_static_limit_is_charged_over_time(tmp_path: Path) -> None:
    s = read_series(write_folder(tmp_path / "t", {"align-0": [100.0, 300.0, 200.0, 200.0]})).runs[0]
    fits = static_outcome(s, 400_000_000)  # held 4e8 x 6 s, used (1 + 3 + 2) e8 x 2 s
    assert fits.fitted and fits.held_byte_s == 24e8 and fits.used_byte_s == 12e8
    killed = static_outcome(s, 250_000_000)  # above it at t=2: held until then
    assert not killed.fitted and killed.seconds == 2.0 and killed.held_byte_s == 5e8


def test_growth_wastes_less_than_the_static_decision_at_no_more_kills(tmp_path: Path) -> None:
    runs = read_series(write_folder(tmp_path / "t", family())).runs
    config = ReplayConfig(history="sequential")
    static = replay_series(runs, "adaptive", config).metrics()
    for latency_s in (2.0, 5.0):
        grown = replay_series(runs, "grow", config, GrowthRule(latency_s=latency_s))
        m = grown.metrics()
        assert m["retries_per_100"] <= static["retries_per_100"] and m["failed"] == 0
        assert m["waste_gb_h"] < 0.8 * static["waste_gb_h"]
        assert grown.resizes >= len(runs) - 4  # learnt tasks start below their plateau's end and grow


def test_every_strategy_over_time_is_floored_at_min_memory(tmp_path: Path) -> None:
    """KS+'s segments, growth's learnt start and the static decisions alike: none below the floor."""
    runs = read_series(write_folder(tmp_path / "t", family())).runs
    seconds = sum(float(s.times_s[-1]) for s in runs)
    floor = 2 * 1024**3  # above every task's peak (about 1 GB)
    for strategy in ("adaptive", "ks+", "grow"):
        unfloored = replay_series(runs, strategy, ReplayConfig(history="sequential"))
        floored = replay_series(runs, strategy, ReplayConfig(history="sequential", floor_bytes=floor))
        held = floored.waste_byte_s + floored.used_byte_s  # nothing is killed above every peak
        assert floored.retries == 0 and held >= floor * seconds * (1 - 1e-9), strategy
        assert unfloored.waste_byte_s + unfloored.used_byte_s < held, strategy


def test_use_and_the_whole_node_are_counted_over_time_not_at_the_peak(tmp_path: Path) -> None:
    """A task that sits at 30 % of its peak for half its run used that, not its peak, all along:
    what it held is what it wasted plus what it used, and a node held as long wastes no less."""
    runs = read_series(write_folder(tmp_path / "t", family())).runs
    used = sum(float(np.sum(s.usage_bytes[:-1] * np.diff(s.times_s))) for s in runs)
    assert used < 0.8 * sum(s.run.peak_bytes * float(s.times_s[-1]) for s in runs)
    for strategy in ("adaptive", "whole-node", "ks+", "grow"):
        result = replay_series(runs, strategy, ReplayConfig(history="sequential"))
        assert result.retries == 0 and result.used_byte_s == pytest.approx(used), strategy
        assert 0.0 <= result.metrics()["wrr"] <= 1.0 and result.metrics()["maq"] < 0.9, strategy


def test_growth_slower_than_the_rise_is_killed_and_retried_as_today(tmp_path: Path) -> None:
    # every task jumps from 10 % to its peak within one sample: no latency saves a small start
    jumpy = {f"align-{i}": [100.0] * 20 + [1000.0] * 3 for i in range(8)}
    runs = read_series(write_folder(tmp_path / "t", jumpy)).runs
    grown = replay_series(
        runs, "grow", ReplayConfig(history="sequential"), GrowthRule(latency_s=2.0)
    ).metrics()
    assert grown["failed"] == 0  # the retries end every task
    # the learnt start covers the jump: after three tasks nothing is killed any more
    assert grown["retries_per_100"] <= 100 * 3 / 8


def test_replay_time_series_json_has_the_shape_of_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_folder(tmp_path / "t", family(8))
    argv = [
        "replay",
        "--time-series",
        str(folder),
        "--strategy",
        "adaptive,pc95,ks+,grow",
        "--resize-latency",
        "2,15",
    ]
    assert main([*argv, "--json", "--workers", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    (trace,) = report["traces"]
    assert set(trace["strategies"]) == {"adaptive", "pc95", "ks+", "grow-2s", "grow-15s"}
    for metrics in trace["strategies"].values():
        assert {"waste_gb_h", "retries_per_100", "resizes_per_task", "failed"} <= set(metrics)
    assert trace["strategies"]["adaptive"]["resizes_per_task"] == 0
    assert set(trace["growth"]) == {"grow-2s", "grow-15s"}
    assert np.isfinite(trace["strategies"]["ks+"]["waste_gb_h"])
    assert main([*argv, "--workers", "1"]) == 0
    assert "grow-2s:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--resize-latency", "soon"], "--resize-latency takes seconds"),
        (["--budget-sweep"], "replay --time-series: --budget-sweep is for peak traces"),
        (["--plot", "plots"], "replay --time-series: --plot is for peak traces"),
        (["--strategy", "nope"], "unknown sizing strategy 'nope'"),
        (["--strategy", "grow-5"], "over time series also grow (at every --resize-latency), grow-<L>s, ks+"),
        (["--strategy", "grow-3600s"], "grow-<L>s takes L in seconds in [0, 3600)"),
        (["--strategy", "adaptive", "--resize-latency", "0"], "--resize-latency is growth's"),
    ],
)
def test_replay_time_series_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    folder = write_folder(tmp_path / "t", family(3))
    assert main(["replay", "--time-series", str(folder), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert main(["replay", "--time-series", str(tmp_path / "none")]) == 2
    assert "cannot read (No such file or directory)" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["replay", "--time-series", str(tmp_path / "empty")]) == 2  # a folder holding none
    assert "not a time-series folder" in capsys.readouterr().err
    # tasks without a memory sample: nothing to replay, not a table of zeros
    silent = write_folder(tmp_path / "s", {}, extra_rows="wf,align,silent,1,5,5,50,10,1,1\n")
    assert main(["replay", "--time-series", str(silent)]) == 2
    assert "nothing to replay" in capsys.readouterr().err


def test_replay_time_series_reads_growths_report_names_as_strategies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the report names growth grow-<L>s: the same name asks for it at L, beside --resize-latency's
    folder = write_folder(tmp_path / "t", family(3))
    for strategies, extra, replayed in [
        ("grow-5s,ks+", [], {"grow-5s", "ks+"}),
        ("grow-2.5s", ["--resize-latency", "15"], {"grow-2.5s", "grow-15s"}),
        ("grow,grow-7s", ["--resize-latency", "2"], {"grow-2s", "grow-7s"}),
        ("grow-2s,grow-2.0000001s", [], {"grow-2s"}),  # one latency per name the report gives
    ]:
        argv = ["replay", "--time-series", str(folder), "--strategy", strategies, *extra, "--json"]
        assert main([*argv, "--workers", "1"]) == 0
        (trace,) = json.loads(capsys.readouterr().out)["traces"]
        assert set(trace["strategies"]) - {"adaptive"} == replayed  # growth is measured against the default
        assert set(trace["growth"]) == {n for n in replayed if n.startswith("grow")}


def test_the_replays_agent_samples_no_more_often_than_the_series() -> None:
    from airflow_adaptive.evaluation.series import sampling_interval_s

    def run(times: list[float]) -> SeriesRun:
        return SeriesRun(TaskRun("f", 1, 1.0), np.array(times), np.ones(len(times)))

    # 99 gaps of 2 s and 1 of 10 s: the 0.99 quantile lies between them
    series = [run([2.0 * k for k in range(100)]), run([0.0, 10.0]), run([5.0])]
    assert sampling_interval_s(series) == pytest.approx(2.0 + 0.01 * 8.0)
    assert sampling_interval_s([run([5.0])]) == 0.0
