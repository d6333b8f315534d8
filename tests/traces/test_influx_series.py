"""The k-Segments traces as published (InfluxDB exports per task) read as the converted format."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.series import is_series_folder, read_series, series_folders
from tests.conftest import sql_store

MEMORY_HEAD = (
    "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,double,string,string,string\n"
    "#group,false,false,true,true,false,false,true,true,true\n"
    "#default,_result,,,,,,,,\n"
    ",result,table,_start,_stop,_time,_value,_field,_measurement,name\n"
)
META_HEAD = (
    "#datatype,string,long,string,string,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,long,string\n"
    ",result,table,_field,_measurement,_start,_stop,_time,_value,name\n"
)
T0 = "2023-06-02T00:29:3"  # seconds 4, 6, 8 (and the output event at 9.5) follow


def _stamp(seconds: int) -> str:
    """``T0``'s minute plus ``seconds`` past 00:29:30, as the exports write it."""
    return (datetime(2023, 6, 2, 0, 29, 30) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")


def write_task(process_dir: Path, name: str, mb: list[float], *, metadata: bool = True) -> None:
    process_dir.mkdir(parents=True, exist_ok=True)
    rows = [
        f",,0,s,e,{_stamp(4 + 2 * k)}.641383723Z,{v},docker_used_memory_mb,{name},{name}\n"
        for k, v in enumerate(mb)
    ]
    (process_dir / f"{name}_memory.csv").write_text(MEMORY_HEAD + "".join(rows))
    if metadata:
        meta = [
            f",,0,files_input_total_size,{name},s,e,{T0}1.0Z,3732192122,{name}\n",
            f",,1,max_mem,{name},s,e,{T0}4.0Z,17179869184,{name}\n",
            f",,2,files_output_total_size,{name},s,e,{T0}9.641383723Z,6,{name}\n",
        ]
        (process_dir / f"{name}_metadata.csv").write_text(META_HEAD + "".join(meta))


def test_a_published_folder_reads_as_the_converted_format(tmp_path: Path) -> None:
    folder = tmp_path / "eager"
    write_task(folder / "adapter_removal", "adapter_removal (DA100_L1) (36)", [44.74, 52.16, 47.05])
    write_task(folder / "bwa", "bwa (DA38) (919)", [10.0], metadata=False)
    assert is_series_folder(folder)
    trace = read_series(folder)
    by_family = {s.run.family: s for s in trace.runs}
    s = by_family["eager:adapter_removal"]
    # samples at 4, 6 and 8 s past the minute; the output event at 9.64 ends the task
    assert list(s.times_s[:3]) == pytest.approx([0.0, 2.0, 4.0]) and s.run.wall_seconds == pytest.approx(5.0)
    assert s.run.peak_bytes == 52_160_000 and s.run.input_size_bytes == 3_732_192_122
    assert s.run.user_request_bytes == 17_179_869_184
    # without metadata: no input size or request, and the task ends at its only sample
    bwa = by_family["eager:bwa"].run
    assert bwa.input_size_bytes is None and bwa.user_request_bytes is None and bwa.wall_seconds == 0.0


def test_a_folder_of_series_folders_is_searched_as_a_plain_replay_searches(tmp_path: Path) -> None:
    for workflow in ("sarek", "eager"):
        write_task(tmp_path / "traces" / workflow / "bwa", "bwa (DA38) (919)", [10.0], metadata=False)
    (tmp_path / "traces" / "notes").mkdir()
    found = [str(tmp_path / "traces" / name) for name in ("eager", "sarek")]
    assert series_folders(str(tmp_path / "traces")) == found  # not the process folders inside them
    assert series_folders(found[0]) == found[:1] and series_folders(str(tmp_path / "traces" / "notes")) == []
    assert series_folders(str(tmp_path / "missing")) == []
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "eager").symlink_to(tmp_path / "traces" / "eager")  # followed, once
    (tmp_path / "linked" / "loop").symlink_to(tmp_path / "linked")
    assert series_folders(str(tmp_path / "linked")) == [str(tmp_path / "linked" / "eager")]


def test_replay_time_series_takes_a_folder_of_them_and_each_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for workflow in ("sarek", "eager"):
        write_task(tmp_path / workflow / "bwa", "bwa (DA38) (919)", [10.0, 30.0, 20.0])
    argv = ["replay", "--time-series", "--strategy", "user", "--json", str(tmp_path), str(tmp_path / "eager")]
    assert main(argv) == 0
    replayed = [trace["trace"] for trace in json.loads(capsys.readouterr().out)["traces"]]
    assert sorted(replayed) == [str(tmp_path / "eager"), str(tmp_path / "sarek")]


def test_a_broken_export_is_one_typed_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "wf"
    (folder / "p").mkdir(parents=True)
    (folder / "p" / "t_memory.csv").write_text(
        ",result,table,_time,_value,_field\n,,0,yesterday,1,docker_used_memory_mb\n"
    )
    with pytest.raises(TraceFormatError, match="not an InfluxDB memory export"):
        read_series(folder)
    assert main(["replay", "--time-series", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not an InfluxDB memory export" in err[0]


def test_history_import_records_a_published_folder_once_with_its_profiles(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs" / "eager"  # found under a parent folder, as a plain trace is
    write_task(folder / "adapter_removal", "adapter_removal (DA100_L1) (36)", [44.74, 52.16, 47.05])
    write_task(folder / "bwa", "bwa (DA38) (919)", [10.0, 30.0])
    for _ in range(2):
        assert main(["history", "import", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "2 attempts imported (2 new, 0 already there)" in out  # the folder is one trace
    assert "2 attempts imported (0 new, 2 already there)" in out  # its content names it
    shown = sql_store(engine).history("eager:adapter_removal", limit=5)
    assert len(shown) == 1 and shown[0].usage.peak_memory_bytes == 52_160_000 and shown[0].memory_profile_s


def test_decide_says_what_growth_in_place_does_to_the_familys_pods(
    tmp_path: Path, engine: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_adaptive.config import get_settings

    climb = [10.0 + 10.0 * k for k in range(100)]  # 200 s up to 1 GB: it starts low
    for n in range(3):  # three profiles: a plan learnt by level
        write_task(tmp_path / "eager" / "bwa", f"bwa (DA{n}) ({n})", climb, metadata=False)
    assert main(["history", "import", str(tmp_path / "eager")]) == 0
    capsys.readouterr()
    decide = ["decide", "--task-family", "eager:bwa", "--request", "4Gi"]
    assert main([*decide, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["growth"] is None  # off by default
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__GROW_IN_PLACE", "True")
    get_settings.cache_clear()
    assert main(decide) == 0 and main([*decide, "--previous-oom"]) == 0
    first, retry = [line for line in capsys.readouterr().out.splitlines() if line.startswith("growth")]
    assert "starts at" in first and "above usage" in first, first
    assert retry.endswith("only as a rescue (the retry of an OOM-killed try)"), retry
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__FAMILY_MODES", "eager:*=observe")  # no pod of it is enforced
    get_settings.cache_clear()
    assert main(decide) == 0
    assert (
        "growth in place (enforced pods): none: the family's pods are not enforced" in capsys.readouterr().out
    )


def test_an_exports_folder_is_named_by_the_files_it_is_read_from_and_its_neighbours_still_found(
    tmp_path: Path, engine: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    from airflow_adaptive.traces.load import expand_paths

    folder = tmp_path / "eager"
    write_task(folder / "bwa", "bwa (DA38) (919)", [10.0, 30.0])
    (folder / "other").mkdir()
    (folder / "other" / "lotaru.csv").write_text("Task,peak_rss,Realtime\nqc,1,1\n")  # another trace beside
    assert expand_paths([str(tmp_path)])[0] == [str(folder), str(folder / "other" / "lotaru.csv")]
    (folder / "other" / "lotaru.csv").unlink()
    monkeypatch.chdir(folder)  # "." is named by the folder it stands for
    assert main(["history", "import", "."]) == 0
    (folder / "bwa" / "notes.txt").write_text("stray")  # neither read nor hashed, nor a pipe
    os.mkfifo(folder / "bwa" / "pipe_memory.csv")  # a pipe would block: never opened
    assert main(["history", "import", "."]) == 0
    out = capsys.readouterr().out
    assert "1 attempt imported (1 new" in out and "1 attempt imported (0 new, 1 already there)" in out
    assert [f.task_family for f in sql_store(engine).families(limit=10)] == ["eager:bwa"]
