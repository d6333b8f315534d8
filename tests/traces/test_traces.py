"""Trace importers: small files written here, malformed input, the example traces shipped in docs/examples,
and the published traces of ../shared/data when present."""

from __future__ import annotations

import json
import runpy
import warnings
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.core.model import ExitReason
from airflow_adaptive.core.units import MIB
from airflow_adaptive.evaluation.replay import ReplayConfig, replay_cap_bytes
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.simulation.params import SimParams
from airflow_adaptive.simulation.sources import load_workload
from airflow_adaptive.traces.load import detect_format, expand_paths, read_trace, replay_input, task_runs
from tests.conftest import EXAMPLES, SHARED_DATA

LOTARU_HEADER = (
    "Label,Machine,Workflow,NumberSequences,Task,WorkflowInputSize,Realtime,%cpu,rss,rchar,wchar,cpus,"
    "read_bytes,write_bytes,vmem,memory,peak_rss,TaskInputSize,TaskInputSizeUncompressed,WorkflowInputUncompressed"
)


def lotaru_row(label: str, task: str, realtime: str, peak: str, size: str) -> str:
    return (
        f"{label},local,bacass,100,{task},1000,{realtime},150.0,1,1,1,2,10,20,1,8589934592,{peak},{size},1,1"
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_lotaru_report(tmp_path: Path) -> None:
    trace = write(tmp_path / "bacass.csv", "\n".join([
        LOTARU_HEADER,
        lotaru_row("train-1", "FASTQC", "60000", "1073741824", "5000000"),
        lotaru_row("train-2", "FASTQC", "oops", "1073741824", "5000000"),
        lotaru_row("train-3", "UNICYCLER", "120000", "-7", "9000000"),
        lotaru_row("train-4", "UNICYCLER", "120000", "2147483648", "9000000"),
        lotaru_row("train-5", "UNICYCLER", "120000", "1e300", "9000000"),
    ]) + "\n")  # fmt: skip
    assert detect_format(str(trace)) == "lotaru"
    result = read_trace(trace)
    assert [str(s) for s in result.skipped] == [
        f"{trace}:3: not a number from 0 to 2^62: Realtime=oops",
        f"{trace}:4: not a number from 0 to 2^62: peak_rss=-7",
        f"{trace}:6: not a number from 0 to 2^62: peak_rss=1e300",
    ]
    first, second = result.observations
    assert (first.task_family, first.input_size_bytes, first.usage.wall_seconds) == (
        "bacass:FASTQC",
        5000000,
        60.0,
    )
    assert first.usage.cpu_core_seconds == pytest.approx(90.0) and first.memory_request_bytes == 8589934592
    assert second.usage.peak_memory_bytes == 2 * 1024**3 and second.node_name == "local"


def test_a_lotaru_report_whose_rows_are_all_longer_than_its_header_is_read_quietly(tmp_path: Path) -> None:
    """pandas read the extra fields as an index (a TypeError later) and warned on stderr."""
    rows = [lotaru_row(f"train-{i}", "FASTQC", "60000", "1073741824", "5000000") + ",x,y" for i in (1, 2)]
    trace = write(tmp_path / "bacass.csv", "\n".join([LOTARU_HEADER, *rows]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would be a second line under the command's own
        result = read_trace(trace)
    assert len(result.observations) == 2 and not result.skipped


def test_nextflow_container_is_the_attempts_image(tmp_path: Path) -> None:
    trace = write(tmp_path / "trace.csv", "\n".join([
        "task_id,process,status,exit,peak_rss,realtime,container",
        "1,SORT,COMPLETED,0,1000,60000,quay.io/biocontainers/samtools:1.15.1--h1170115_0",
        "2,SORT,COMPLETED,0,1000,60000,-",
    ]) + "\n")  # fmt: skip
    observations = read_trace(trace).observations
    assert [o.image for o in observations] == ["quay.io/biocontainers/samtools:1.15.1--h1170115_0", None]
    assert [r.image for r in task_runs(observations)] == [observations[0].image, None]


def test_cctools_table(tmp_path: Path) -> None:
    trace = write(tmp_path / "colmena.txt", "\n".join([
        "taskid -- core -- memory -- virtual_memory -- disk -- time -- average_cores -- 1",
        "28 -- 2 -- 6202 -- 358792 -- 5 -- 256.5 -- 1.5 -- 1",
        "29 -- 2 -- lots -- 358792 -- 5 -- 276.7 -- 1.5 -- 1",
        "30 -- 2 -- 100",
        "31 -- 1 -- 300 -- 0 -- 5 -- 10.0 -- 0.5 -- 2",
    ]) + "\n")  # fmt: skip
    assert detect_format(str(trace)) == "cctools"
    result = read_trace(trace)
    assert [s.line for s in result.skipped] == [3, 4]
    assert "memory=lots" in result.skipped[0].reason and "3 fields" in result.skipped[1].reason
    a, b = result.observations
    assert (a.task_family, a.usage.peak_memory_bytes, a.usage.wall_seconds) == (
        "colmena:category-1",  # each workflow numbers its own categories: named by its file
        6202 * MIB,
        256.5,
    )
    assert a.usage.cpu_core_seconds == pytest.approx(1.5 * 256.5)
    assert b.task_family == "colmena:category-2" and a.exit_reason is ExitReason.COMPLETED


def wf(tasks: list[dict], executions: list[dict]) -> dict:
    return {
        "name": "t", "schemaVersion": "1.5",
        "workflow": {
            "specification": {"tasks": tasks, "files": [{"id": "in1", "sizeInBytes": 300}, {"id": "in2", "sizeInBytes": 700}]},
            "execution": {"makespanInSeconds": 1, "executedAt": "x", "tasks": executions, "machines": []},
        },
    }  # fmt: skip


def test_wfformat_instance(tmp_path: Path) -> None:
    tasks = [
        {
            "name": "ALIGN",
            "id": "ALIGN_1",
            "children": [],
            "parents": [],
            "inputFiles": ["in1", "in2"],
            "outputFiles": [],
        },
        {
            "name": "ALIGN",
            "id": "ALIGN_2",
            "children": [],
            "parents": [],
            "inputFiles": ["in1"],
            "outputFiles": [],
        },
        {"name": "QC", "id": "QC_3", "children": [], "parents": [], "inputFiles": [], "outputFiles": []},
    ]
    executions = [
        {"id": "ALIGN_1", "runtimeInSeconds": 10.0, "avgCPU": 200.0, "memoryInBytes": 5000},
        {"id": "ALIGN_2", "runtimeInSeconds": 10.0, "memoryInBytes": "big"},
        {"id": "QC_3", "runtimeInSeconds": 1.0},
        {"id": "QC_3", "runtimeInSeconds": 1.0, "memoryInBytes": 1e300},  # beyond any machine: skipped
    ]
    trace = tmp_path / "wf.json"
    trace.write_text(json.dumps(wf(tasks, executions)))
    assert detect_format(str(trace)) == "wfformat"
    result = read_trace(trace)
    assert len(result.skipped) == 3 and "memoryInBytes='big'" in result.skipped[0].reason
    # a task's place in the instance, not a line of the JSON file: no "wf.json:2:" as if it were one
    assert str(result.skipped[0]).startswith(f"{trace}: task #1 (ALIGN_2): ")
    assert result.skipped[2].reason.endswith("not a number from 0 to 2^62: memoryInBytes=1e+300")
    (obs,) = result.observations
    assert (obs.task_family, obs.input_size_bytes, obs.usage.cpu_core_seconds) == ("ALIGN", 1000, 20.0)
    first: dict[str, int] = {}
    runs, left_out = replay_input(str(trace), first_lines=first)  # counted by reason, not one reason per task
    assert first == {}  # a task's place in the instance is no file line for replay to name
    assert len(runs) == 1 and left_out == {"not a number from 0 to 2^62": 2, "no memoryInBytes": 1}
    # a trace of tasks far below min_memory assumes a node of at least that much, not of 8 KiB
    assert replay_cap_bytes(ReplayConfig(), runs) == ReplayConfig().floor_bytes == 64 * MIB


def test_unknown_and_unusable_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="unknown trace format"):
        read_trace(write(tmp_path / "x.csv", "a,b\n1,2\n"))
    with pytest.raises(TraceFormatError, match="not a WfFormat"):
        read_trace(write(tmp_path / "broken.json", "{not json"), "wfformat")
    with pytest.raises(TraceFormatError, match="no usable rows"):
        read_trace(
            write(
                tmp_path / "c.txt",
                "task_id -- core -- memory -- v -- d -- time -- a -- tag\n1 -- 1 -- x -- 0 -- 0 -- 1 -- 0 -- 1\n",
            )
        )
    with pytest.raises(TraceFormatError, match="unknown trace format 'yaml'"):
        read_trace(tmp_path / "c.txt", "yaml")


def test_folders_expand_to_the_traces_inside(tmp_path: Path) -> None:
    write(tmp_path / "notes.md", "# not a trace\n")
    (tmp_path / "sub").mkdir()
    trace = write(
        tmp_path / "sub" / "c.txt",
        "t -- c -- memory -- v -- d -- time -- a -- tag\n1 -- 1 -- 10 -- 0 -- 0 -- 1 -- 0 -- 1\n",
    )
    stray = write(tmp_path / "a-settings.json", '{"theme": "dark"}\n')  # JSON, but no WfFormat instance
    instance = write(tmp_path / "sub" / "wf.json", json.dumps(wf([], [])))
    broken = write(
        tmp_path / "sub" / "x-truncated.json", json.dumps(wf([], []))[:40]
    )  # a trace: its error is said
    template = write(tmp_path / "sub" / "pod.j2", "{{ name }}\n")  # starts as JSON would: not a trace
    latin1 = tmp_path / "sub" / "pod2.j2"
    latin1.write_bytes(b"{{ caf\xe9 }}\n")  # nor one that is not even UTF-8
    lines = write(tmp_path / "sub" / "events.json", '{"a": 1}\n{"a": 2}\n')  # JSON Lines: no instance
    header_only = write(tmp_path / "sub" / "empty-run.csv", "task_id,hash,name,status\n\n")  # no rows
    (tmp_path / ".venv").mkdir()  # hidden folders are never searched (.git, .venv)
    write(tmp_path / ".venv" / "c.txt", (tmp_path / "sub" / "c.txt").read_text())
    found, ignored = expand_paths([str(tmp_path)])
    assert found == [str(trace), str(instance), str(broken)] and ignored == [
        str(stray),
        str(tmp_path / "notes.md"),
        str(header_only),
        str(lines),
        str(template),
        str(latin1),
    ]
    with pytest.raises(
        TraceFormatError, match=r"a-settings\.json: not a WfFormat 1\.5 instance \(no top-level 'workflow"
    ):
        read_trace(stray)  # named, it is an error


@pytest.mark.parametrize("option", [["--min-memory", "1m"], ["--cap-bytes", "72Gx"]])
def test_replay_refuses_bad_settings_in_one_line(
    option: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """(Options argparse checks itself, --max-oom-rate say, are in tests/edges/test_cli_input.py.)"""
    trace = write(
        tmp_path / "t.txt",
        "task_id -- core -- memory -- v -- d -- time -- a -- tag\n1 -- 1 -- 100 -- 0 -- 0 -- 10 -- 1 -- 0\n",
    )
    assert main(["replay", str(trace), "--workers", "1", *option]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("airflow-adaptive: error: replay: ") and "Traceback" not in "".join(err)


def test_a_strategy_asked_for_that_a_trace_cannot_replay_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = "\n".join(f"{i} -- 1 -- {100 + i} -- 0 -- 0 -- 10 -- 1 -- 0" for i in range(5))
    trace = write(
        tmp_path / "t.txt", "task_id -- core -- memory -- v -- d -- time -- a -- tag\n" + rows + "\n"
    )
    argv = ["replay", str(trace), "--strategy", "adaptive,user", "--workers", "1"]
    assert main([*argv, "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["traces"]
    assert list(entry["strategies"]) == ["adaptive"]
    assert entry["left_out"] == {"user": "the trace records no memory requests"}
    assert main(argv) == 0
    assert "user left out: the trace records no memory requests" in capsys.readouterr().out
    assert main([*argv[:3], "user"]) == 0  # nothing left to replay: one line, not an empty table
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.endswith("): no strategy replayed (user left out: the trace records no memory requests)")


def test_replay_floors_allocations_at_the_deployments_min_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a deployment does: no decision below ``min_memory`` (64Mi unless configured), so a family
    whose peaks (13-36 MiB) outgrow its first ones is not killed; with ``--min-memory 1Mi`` it is."""
    peaks_mb = [20, 22, 13, 20, 19, 22, 17, 17, 20, 21, 30, 36]
    rows = "\n".join(f"{i} -- 1 -- {peaks_mb[i % 12]} -- 0 -- 0 -- 10 -- 1 -- 0" for i in range(48))
    trace = write(
        tmp_path / "t.txt", "task_id -- core -- memory -- v -- d -- time -- a -- tag\n" + rows + "\n"
    )
    argv = ["replay", str(trace), "--strategy", "adaptive", "--workers", "1", "--json"]
    points = []
    for floor in ([], ["--min-memory", "1Mi"]):
        assert main([*argv, *floor]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["min_memory_bytes"] == (2**20 if floor else 64 * 2**20)  # the report says which
        points.append(report["traces"][0]["strategies"]["adaptive"])
    floored, unfloored = points
    assert floored["retries_per_100"] == 0 < unfloored["retries_per_100"]
    # every task held at least 64 MiB for its 10 s: waste at least (64 MiB - peak) * 10 s each
    least = sum(64 - peaks_mb[i % 12] for i in range(48)) * 2**20 * 10 / 3600 / 1e9
    assert floored["waste_gb_h"] >= least * (1 - 1e-9) and floored["waste_gb_h"] > unfloored["waste_gb_h"]


@pytest.mark.parametrize(
    ("relative", "fmt", "instances"),
    [
        ("nextflow/chipseq_trace.txt", "nextflow", 326),  # 328 attempts, 2 of them OOM-killed
        ("nextflow/chipseq_trace_raw.csv", "nextflow", 326),
        ("lotaru/n1/bacass.csv", "lotaru", 50),
        ("cctools/workqueue_tasks.txt", "cctools", 160),
        ("wfformat/chipseq_instance.json", "wfformat", 31),
    ],
)
def test_shipped_example_traces(relative: str, fmt: str, instances: int) -> None:
    path = str(EXAMPLES / relative)
    assert detect_format(path) == fmt
    result = read_trace(path)
    assert not result.skipped and len(task_runs(result.observations)) == instances


def test_the_example_traces_are_what_their_script_writes(tmp_path: Path) -> None:
    """The shipped files are generated, never edited by hand: the seeded script writes them again."""
    runpy.run_path(str(EXAMPLES / "make_traces.py"))["main"](tmp_path)  # run_path leaves no __pycache__
    traces = (".txt", ".csv", ".json")
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.suffix in traces)
    shipped = sorted(p.relative_to(EXAMPLES) for p in EXAMPLES.rglob("*") if p.suffix in traces)
    assert written == shipped and len(written) == 11
    assert all((tmp_path / p).read_bytes() == (EXAMPLES / p).read_bytes() for p in written)


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="the real traces of ../shared/data are not present")
def test_real_published_traces() -> None:
    """The importers on the published traces the examples imitate, when they are beside the checkout."""
    for relative, fmt, instances in [
        ("nextflow-traces/eager.csv", "nextflow", 1576),
        ("lotaru/local/bacass.csv", "lotaru", 110),
        ("cctools/colmena.txt", "cctools", 228),
        ("wfinstances/sarek-dirt02-001.json", "wfformat", 24),
    ]:
        path = str(SHARED_DATA / relative)
        assert detect_format(path) == fmt
        assert len(task_runs(read_trace(path).observations)) == instances


def test_wfformat_makeflow_and_pegasus_tasks_are_one_family_per_kind(tmp_path: Path) -> None:
    """WfCommons' Makeflow and Pegasus instances name each task ``<kind>_ID<n>``: every ``bwa``
    task is one family (a family per task would leave every one of them cold)."""
    tasks: list[dict[str, Any]] = [
        {"name": n, "id": n, "children": [], "parents": [], "inputFiles": [], "outputFiles": []}
        for n in ("bwa_ID000003", "bwa_ID000004", "bwa_index_ID000002", "_ID0000009")
    ]
    executions = [{"id": t["id"], "runtimeInSeconds": 1.0, "memoryInBytes": 5000} for t in tasks]
    trace = tmp_path / "bwa.json"
    trace.write_text(json.dumps(wf(tasks, executions)))
    families = [o.task_family for o in read_trace(trace).observations]
    assert families == ["bwa", "bwa", "bwa_index", "_ID0000009"]  # never an empty family
    simulated = load_workload(f"wfformat:{trace}", SimParams())  # the simulator's tasks alike
    assert [t.family for t in simulated.tasks] == families
