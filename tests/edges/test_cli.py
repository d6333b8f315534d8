"""``airflow-adaptive`` commands, in process against the session database."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.core.units import format_bytes
from tests.conftest import EXAMPLES, validate_pod

CHIPSEQ = EXAMPLES / "nextflow" / "chipseq_trace.txt"  # as Nextflow writes it by default: "72 GB", "15m 21s"
BWA = "NFCORE_CHIPSEQ:CHIPSEQ:ALIGN_BWA_MEM:BWA_MEM"

HEADER = "task_id,hash,process,name,status,exit,attempt,memory,peak_rss,realtime,%cpu,rchar,wchar,complete,hostname\n"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_chipseq_bwa_mem_decision(capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    assert main(["history", "import", "--format", "nextflow", str(CHIPSEQ)]) == 0
    assert "328 attempts imported (328 new, 0 already there), 0 rows skipped" in capsys.readouterr().out
    trace = pd.read_csv(CHIPSEQ.with_name("chipseq_trace_raw.csv"), na_values="-")  # its raw twin, in bytes
    bwa = trace[trace.process == BWA]
    decision = run_json(capsys, "decide", "--task-family", BWA)
    assert bwa.peak_rss.median() < decision["memory_request_bytes"] < 0.75 * bwa["memory"].median()
    assert decision["strategy"] == "adaptive" and decision["observations"] == len(bwa) == 48
    assert "of peaks" in decision["explanation"] and re.search(r"\b48 (\w+ )?peaks", decision["explanation"])
    assert "GiB" in decision["explanation"]
    details = decision["details"]  # the OOM budget, its target, the rule allowed and its replayed kill rate
    assert details["max_oom_rate"] == 0.02 and details["oom_target"] == 0.01
    assert details["rule"] in decision["explanation"]
    assert details["within_oom_target"] is (details["rule_oom_rate"] <= 0.01)  # a JSON boolean
    assert f"{details['rule_oom_rate']:.1%} OOM-killed" in decision["explanation"]
    after_oom = run_json(capsys, "decide", "--task-family", BWA, "--previous-oom", "--try-number", "2")
    assert after_oom["memory_request_bytes"] > decision["memory_request_bytes"]
    assert "OOM-killed" in after_oom["explanation"]
    implied = run_json(capsys, "decide", "--task-family", BWA, "--previous-oom")  # the retry: try 2
    assert implied == after_oom and "try 1 was OOM-killed" in implied["explanation"]


def test_history_families_lists_the_names_show_and_decide_take(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "families"]) == 0
    assert "no task families in the history store yet" in capsys.readouterr().out
    assert main(["history", "import", str(CHIPSEQ)]) == 0
    capsys.readouterr()
    listed = run_json(capsys, "history", "families")
    counts = [row["attempts"] for row in listed]
    assert len(listed) == 14 and counts == sorted(counts, reverse=True)  # most attempts first
    (bwa,) = [row for row in listed if row["task_family"] == BWA]
    assert (bwa["attempts"], bwa["completed"], bwa["oom_killed"]) == (48, 48, 0)
    assert bwa["last_finished_at"].startswith("2024-03-04T")  # ISO 8601, as history show --json says it
    shown = run_json(capsys, "history", "show", "--task-family", BWA, "--limit", "100")
    peaks = sorted(r["usage"]["peak_memory_bytes"] for r in shown)
    assert bwa["median_peak_bytes"] == pytest.approx((peaks[23] + peaks[24]) / 2, rel=0.02)
    assert main(["history", "families", "--limit", "3"]) == 0
    table = capsys.readouterr().out
    assert "the 3 with most attempts of 14" in table and "BWA_MEM " in table and "PRESEQ" not in table
    # counts and sizes right-aligned: a cell's number ends where its column does
    assert main(["history", "show", "--task-family", BWA, "--limit", "1"]) == 0
    assert re.search(rf"{re.escape(BWA)}: last 1 attempt *$", capsys.readouterr().out, re.MULTILINE)
    first = next(line for line in table.splitlines() if line.startswith("│"))  # most attempts
    assert (
        f" {listed[0]['attempts']} │" in first
        and f"{format_bytes(listed[0]['median_peak_bytes'])} │" in first
    )


def test_a_trace_with_many_bad_rows_names_the_first_twenty_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.csv"
    good = "1,h1,ALIGN,ALIGN (1),COMPLETED,0,1,8589934592,1073741824,60000,150,1,1,1700000000001,n1"
    bad = [f"{i},h{i},ALIGN,ALIGN ({i}),COMPLETED,0,1,8589934592,lots,60000,150,1,1,1700000000001,n1"
           for i in range(2, 27)]  # fmt: skip
    trace.write_text(HEADER + "\n".join([good, *bad]) + "\n")
    assert main(["history", "import", str(trace)]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("not a number from 0 to 2^62: peak_rss=lots") == 20
    assert (
        "1 attempt imported (1 new, 0 already there), 25 rows skipped (the first 20 named above)"
        in captured.out
    )


def test_import_reports_malformed_rows_and_decides_from_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.csv"
    rows = [f"{i},h{i},ALIGN,ALIGN ({i}),COMPLETED,0,1,8589934592,{(1 + i) * 2**30},60000,150,1,1,{1700000000000 + i},n1"
            for i in range(1, 6)]  # fmt: skip
    rows.append("6,h6,ALIGN,ALIGN (6),COMPLETED,0,1,8589934592,lots,60000,150,1,1,1700000000006,n1")
    rows.append("7,h7,ALIGN,ALIGN (7),FAILED,137,1,2147483648,-,1000,100,1,1,1700000000007,n1")
    trace.write_text(HEADER + "\n".join(rows) + "\n")
    assert main(["history", "import", str(trace)]) == 0
    captured = capsys.readouterr()
    assert f"{trace}:7: not a number from 0 to 2^62: peak_rss=lots" in captured.err
    assert "6 attempts imported (6 new, 0 already there), 1 row skipped" in captured.out
    assert main(["history", "import", str(trace)]) == 0
    assert "6 attempts imported (0 new, 6 already there)" in capsys.readouterr().out
    shown = run_json(capsys, "history", "show", "--task-family", "ALIGN")
    assert [r["exit_reason"] for r in shown].count("OOMKilled") == 1
    assert all(r["usage"]["peak_memory_bytes"] != 0 for r in shown)
    assert main(["history", "show", "--task-family", "ALIGN"]) == 0  # the kill's peak: at least its limit
    assert ">= 2 GiB (OOM-killed)" in capsys.readouterr().out.replace("\n", " ")
    decision = run_json(capsys, "decide", "--task-family", "ALIGN", "--request", "64Gi")
    assert decision["observations"] == 6 and decision["memory_request_bytes"] < 64 * 2**30
    replayed = run_json(capsys, "replay", str(trace), "--strategy", "pc95", "--workers", "1")
    (entry,) = replayed["traces"]  # 5 completed rows replayed; the malformed one and the kill said why
    assert entry["instances"] == 5
    assert entry["skipped"] == {
        "rows": 2,
        "reasons": {"not a number from 0 to 2^62": 1, "OOM-killed (true peak unknown)": 1},
        "first_line": {"not a number from 0 to 2^62": 7},  # a row the reader skipped: where, as import says
    }
    assert main(["replay", str(trace), "--strategy", "pc95", "--workers", "1"]) == 0
    shown_table = capsys.readouterr().out
    assert "2 rows not replayed" in shown_table and "1 OOM-killed (true peak unknown)" in shown_table
    assert "1 not a number from 0 to 2^62 (first on line 7)" in shown_table


def test_a_file_with_no_usable_rows_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text(HEADER + "1,h,P,P (1),ABORTED,-,1,-,-,-,-,-,-,-,-\n")
    assert main(["history", "import", str(empty)]) == 2
    assert "no usable rows" in capsys.readouterr().err
    not_a_trace = tmp_path / "other.csv"
    not_a_trace.write_text("a,b\n1,2\n")
    assert main(["history", "import", str(not_a_trace)]) == 2
    assert "unknown trace format" in capsys.readouterr().err
    assert main(["history", "import", "--format", "nextflow", str(not_a_trace)]) == 2
    assert "missing columns process, status" in capsys.readouterr().err


def test_bad_request_quantity_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decide", "--task-family", "x", "--request", "1.5GB-nonsense"]) == 2
    assert "--request" in capsys.readouterr().err


def test_demo_shows_a_valid_adaptive_pod_for_every_task(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "demo")
    tasks = {t["task_id"]: t for t in result["tasks"]}
    assert len(tasks) == 11 and result["dag_id"] == "adaptive_genomics"
    for task in tasks.values():
        validate_pod(task["pod"])
        assert task["strategy"] == "adaptive"
        assert task["memory_request_bytes"] < task["user_request_bytes"]  # align too, with a kill in its past
    assert "OOM-killed" in tasks["align_HG002"]["explanation"]


def test_demo_says_what_it_recorded_and_a_trace_that_sizes_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["demo", "--json"]) == 0
    err = capsys.readouterr().err
    assert (
        "demo: 61 attempts from generated history (seed 7) recorded in the history store (61 new, 0 already"
        in err
    )
    assert main(["demo", "--json"]) == 0
    assert "(0 new, 61 already there)" in capsys.readouterr().err
    assert "sizes none" not in err
    assert main(["demo", "--trace", str(CHIPSEQ), "--json"]) == 0  # nf-core chipseq families, a genomics DAG
    captured = capsys.readouterr()
    assert f"demo: 328 attempts from trace {CHIPSEQ} recorded" in captured.err
    assert f"demo: {CHIPSEQ} sizes none of the DAG's tasks" in captured.err
    assert json.loads(captured.out)["source"] == "the history store"  # not the trace, which sized none
    with CHIPSEQ.open("rb") as piped:  # ... | airflow-adaptive demo --trace -
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(piped))
        assert main(["demo", "--trace", "-", "--json"]) == 0
    assert "demo: 328 attempts from trace stdin recorded in the history store" in capsys.readouterr().err


def test_the_demos_stderr_says_what_it_recorded_and_not_each_pods_log_line() -> None:
    """The operators' INFO lines repeat the table's decisions: a new process keeps them out."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "airflow_adaptive.cli", "demo"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "align_HG002" in done.stdout
    # the four align tasks share their family's explanation: said once, under the table, by number
    assert done.stdout.count("(user asked 16 GiB)") == 1 and "\n[1] " in done.stdout
    assert "demo: 61 attempts from generated history (seed 7) recorded" in done.stderr
    assert "[info" not in done.stderr and "Building pod" not in done.stderr, done.stderr


def test_config_reference_lists_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_adaptive.options import OPTIONS

    assert main(["config-reference"]) == 0
    out = capsys.readouterr().out
    assert all(f"`{name}`" in out for name in OPTIONS)


def test_same_named_traces_in_two_folders_are_two_runs_and_a_copy_is_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for folder, peak in (("a", 2**30), ("b", 2**31), ("copy", 2**30)):
        rows = [f"{i},h{i},TWIN,TWIN ({i}),COMPLETED,0,1,8589934592,{peak},60000,150,1,1,{1700000000000 + i},n1"
                for i in range(1, 101)]  # fmt: skip
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "trace.csv").write_text(HEADER + "\n".join(rows) + "\n")
    assert (
        main(["history", "import", str(tmp_path / "a" / "trace.csv"), str(tmp_path / "b" / "trace.csv")]) == 0
    )
    assert capsys.readouterr().out.count("100 attempts imported (100 new, 0 already there)") == 2
    assert main(["history", "import", str(tmp_path / "copy" / "trace.csv")]) == 0  # the same file as a/
    assert "100 attempts imported (0 new, 100 already there)" in capsys.readouterr().out
    shown = run_json(capsys, "history", "show", "--task-family", "TWIN", "--limit", "500")
    assert len(shown) == 200 and {r["usage"]["peak_memory_bytes"] for r in shown} == {2**30, 2**31}


def test_a_file_is_imported_whole_or_not_at_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also when the file streams in chunks: the refused row is in the third of 500 rows, and
    repeated keys span chunks (chunks of 2 rows)."""
    from sqlalchemy import text

    from airflow_adaptive.history_cli import open_cli_store
    from airflow_adaptive.traces import nextflow

    monkeypatch.setattr(nextflow, "CHUNK_ROWS", 500)

    rows = [f"{i},h{i},ATOMIC,ATOMIC ({i}),COMPLETED,0,1,8589934592,{2**30},60000,150,1,1,{1700000000000 + i},n1"
            for i in range(1, 1201)]  # fmt: skip
    trace = tmp_path / "atomic.csv"
    trace.write_text(HEADER + "\n".join(rows) + "\n")
    with _poison_row_1101(engine):  # the database refuses the 1,101st row
        assert main(["history", "import", str(trace)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("airflow-adaptive: error: ") and "poison" in err[-1]
    assert open_cli_store().progress("ATOMIC") is None  # nothing of the file was kept
    with engine.connect() as conn:
        assert conn.execute(text("select count(*) from adaptive_task_attempt")).scalar() == 0
    monkeypatch.setattr(nextflow, "CHUNK_ROWS", 2)
    repeated = tmp_path / "repeated.csv"
    repeated.write_text(HEADER + "\n".join(rows[:3] + rows[:2]) + "\n")
    assert main(["history", "import", str(repeated)]) == 0
    assert (
        "5 attempts imported (3 new, 0 already there), 0 rows skipped, 2 repeated keys"
        in capsys.readouterr().out
    )


@contextlib.contextmanager
def _poison_row_1101(engine: Any) -> Iterator[None]:
    from sqlalchemy import text

    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.execute(text("create trigger poison before insert on adaptive_task_attempt "
                              "when new.map_index = 1101 begin select raise(abort, 'poison row'); end"))  # fmt: skip
        else:
            conn.execute(text("create function poison() returns trigger as $$ begin "
                              "if new.map_index = 1101 then raise exception 'poison row'; end if; return new; end "
                              "$$ language plpgsql"))  # fmt: skip
            conn.execute(text("create trigger poison before insert on adaptive_task_attempt "
                              "for each row execute function poison()"))  # fmt: skip
    try:
        yield
    finally:
        with engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                conn.execute(text("drop trigger poison"))
            else:
                conn.execute(text("drop trigger poison on adaptive_task_attempt"))
                conn.execute(text("drop function poison()"))


def test_replay_takes_a_comma_list_and_keeps_stdout_to_the_result(tmp_path: Path) -> None:
    """As ``simulate --sizing a,b``: ``replay --strategy a,b``; replayed in worker processes, the
    JSON on stdout parses whole, and a misspelt name is one line on stderr before any replay."""
    import subprocess
    import sys

    trace = str(CHIPSEQ)
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    command = [sys.executable, "-m", "airflow_adaptive.cli", "replay", trace, "--workers", "2"]
    done = subprocess.run(
        [*command, "--strategy", "adaptive,vpa", "--strategy", "pc95", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)["traces"]
    assert sorted(entry["strategies"]) == ["adaptive", "pc95", "vpa"]
    wrong = subprocess.run(
        [*command, "--strategy", "adaptive,vpx", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert (
        wrong.stderr.strip()
        .splitlines()[-1]
        .startswith("airflow-adaptive: error: unknown sizing strategy 'vpx'")
    )


def test_the_command_line_is_built_without_the_heavy_libraries() -> None:
    # `airflow-adaptive --help` and a mistyped option answer at once: building the parser imports
    # neither Airflow nor the numeric stack (they took 9 s here when it did)
    import subprocess
    import sys

    probe = (
        "import sys; from airflow_adaptive.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('airflow', 'scipy', 'pandas', 'numpy', 'sqlalchemy', 'kubernetes') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_version_names_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_adaptive.version import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"airflow-adaptive {__version__}"


def test_rebuild_without_models_says_what_decisions_do_until_they_are_fitted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["history", "import", str(CHIPSEQ)]) == 0
    assert main(["history", "rebuild", "--without-models"]) == 0
    said = capsys.readouterr().out
    assert "rebuilt the rollups of 14 task families" in said and "uncalibrated level" in said
    refitted = run_json(capsys, "decide", "--task-family", BWA)
    assert "refitted now: no stored model" in refitted["explanation"]
    assert main(["history", "rebuild"]) == 0
    assert "rebuilt the rollups and models of 14" in capsys.readouterr().out
    assert "refitted now" not in run_json(capsys, "decide", "--task-family", BWA)["explanation"]


def test_demo_says_when_its_generated_history_sizes_none_of_the_dags_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dag_file = tmp_path / "billing.py"
    dag_file.write_text(
        "from datetime import datetime\n\nfrom airflow.sdk import DAG\n\n"
        "from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator as Pod\n\n"
        'with DAG(dag_id="billing", schedule=None, start_date=datetime(2026, 1, 1)):\n'
        '    Pod(task_id="reconcile", task_family="billing.reconcile", image="busybox")\n'
    )
    assert main(["demo", "--dag-file", str(dag_file), "--json"]) == 0
    captured = capsys.readouterr()
    assert "demo: the generated history sizes none of the DAG's tasks" in captured.err
    assert json.loads(captured.out)["source"] == "the history store"  # not "generated history (seed 7)"


@pytest.mark.parametrize(
    ("image", "cmds", "sized"),
    [
        ("biocontainers/bwa:v0.7.18", ["bwa", "mem", "ref.fa"], True),  # genomics.align's image and program
        ("python:3.12-slim", ["python", "-c", "print(1)"], False),  # inline code names no tool
    ],
)
def test_demo_counts_a_donor_by_image_and_program_as_sizing_the_dags_task(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    image: str,
    cmds: list[str],
    sized: bool,
) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MODE", "enforce")  # a plain KubernetesPodOperator is sized
    dag_file = tmp_path / "mapping.py"
    dag_file.write_text(
        "from datetime import datetime\n\nfrom airflow.sdk import DAG\n"
        "from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator as Pod\n\n"
        'with DAG(dag_id="mapping", schedule=None, start_date=datetime(2026, 1, 1)):\n'
        f'    Pod(task_id="map_reads", image="{image}", cmds={cmds!r})\n'
    )
    assert main(["demo", "--dag-file", str(dag_file), "--json"]) == 0
    captured = capsys.readouterr()
    assert ("sizes none of the DAG's tasks" not in captured.err) == sized, captured.err
    row = json.loads(captured.out)["tasks"][0]
    assert ("similar family 'genomics.align'" in json.dumps(row)) == sized
