"""What a careless user gives ``history import`` and ``replay``: bad rows mixed into one chunk, keys
out of range, very long names, pipes, gzip, duplicated columns, huge first lines, deep JSON."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_adaptive.cli import main
from airflow_adaptive.core.model import ExitReason
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces import nextflow
from airflow_adaptive.traces.load import detect_format, read_trace
from tests.conftest import sql_store

pytestmark = pytest.mark.database  # the import command writes to the store

HEADER = "task_id,hash,process,name,status,exit,attempt,memory,peak_rss,realtime,%cpu,rchar,wchar,complete,hostname"
FIELDS = HEADER.count(",") + 1


def good(n: int, process: str = "ALIGN") -> str:
    return f"{n},h{n},{process},{process} ({n}),COMPLETED,0,1,8589934592,{2**30 + n},60000,150,1,1,{1700000000000 + n},n1"


BAD: dict[str, Any] = {  # a bad row of each kind, from its task number
    "short": lambda n, cut: ",".join(good(n).split(",")[:cut]),
    "bad-number": lambda n, cut: good(n).replace(f",{2**30 + n},", ",lots,"),
    "task-id": lambda n, cut: good(n).replace(f"{n},h{n},", f"{3_000_000_000 + n},h{n},", 1),
    "attempt": lambda n, cut: good(n).replace(",COMPLETED,0,1,", ",COMPLETED,0,2147483648,"),
    "status": lambda n, cut: good(n).replace("COMPLETED", "ABORTED"),
}


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    rows=st.lists(
        # a short row ends before its last number: one without only its last (text) field is a whole
        # row with an empty last cell, which pandas cannot tell apart, and is imported
        st.tuples(st.sampled_from(["good", "good", *BAD]), st.integers(1, FIELDS - 2)),
        min_size=1,
        max_size=40,
    ),
    chunk_rows=st.integers(1, 50),
)
def test_random_bad_rows_in_one_chunk_are_each_named_and_every_good_row_kept(
    rows: list[tuple[str, int]], chunk_rows: int
) -> None:
    lines = [good(n) if kind == "good" else BAD[kind](n, cut) for n, (kind, cut) in enumerate(rows, start=1)]
    bad_lines = [n + 1 for n, (kind, _) in enumerate(rows, start=1) if kind != "good"]  # the header is line 1
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "t.csv")
        Path(path).write_text("\n".join([HEADER, *lines]) + "\n")
        parts = nextflow.iter_nextflow(path, chunk_rows=chunk_rows)
        kept, skipped = [], []
        with pytest.raises(TraceFormatError) if len(bad_lines) == len(rows) else _nothing():
            for part in parts:
                kept += part.observations
                skipped += part.skipped
    assert [row.line for row in skipped] == bad_lines
    assert len(kept) == len(rows) - len(bad_lines)
    assert all(isinstance(o.exit_reason, ExitReason) for o in kept)
    assert {o.key.map_index for o in kept} == {
        n for n, (kind, _) in enumerate(rows, start=1) if kind == "good"
    }


class _nothing:  # a stand-in for pytest.raises
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_thirty_thousand_rows_over_two_chunks_keep_every_good_row_and_name_three_bad_lines(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The short row and the bad number share the first chunk of 25,000 rows, the key out of range
    is in the second."""
    lines = [good(n, f"P{n % 7}") for n in range(1, 30_001)]
    lines[99] = "100,ab/cd,MAL01,MAL01 (100)"  # line 101
    lines[20_000] = BAD["bad-number"](20_001, 0)  # line 20,002
    lines[27_000] = BAD["task-id"](27_001, 0)  # line 27,002
    trace = tmp_path / "big.csv"
    trace.write_text("\n".join([HEADER, *lines]) + "\n")
    assert main(["history", "import", str(trace)]) == 0
    captured = capsys.readouterr()
    assert "29997 attempts imported (29997 new, 0 already there), 3 rows skipped" in captured.out
    named = [int(n) for n in re.findall(r"big\.csv:(\d+): ", captured.err)]
    assert named == [101, 20_002, 27_002]
    assert "short row" in captured.err and "peak_rss=lots" in captured.err
    assert "task_id=3000027001 is out of range" in captured.err
    assert sum(f.attempts for f in sql_store(engine).families(limit=100)) == 29_997


def test_a_huge_first_line_fails_before_pandas_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of one long line and no header: a bounded read of its first line refuses it (pandas
    would hold the whole line, gigabytes, in memory)."""
    import pandas as pd

    def no_pandas(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("pandas was asked to read a file that is no trace")

    monkeypatch.setattr(pd, "read_csv", no_pandas)
    huge = tmp_path / "huge.csv"
    huge.write_bytes(b"1,2,3," * 1_000_000)  # 6 MB, no line end
    for argv in (["history", "import", "--format", "nextflow", str(huge)], ["history", "import", str(huge)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            f"airflow-adaptive: error: {huge}: first line longer than 65536 bytes: not a trace header"
        ]
    small = tmp_path / "headerless.csv"
    small.write_text("1,2,3\n" * 10)
    assert main(["history", "import", "--format", "nextflow", str(small)]) == 2
    assert "not a Nextflow trace (missing columns process, status)" in capsys.readouterr().err


def test_names_longer_than_the_store_keys_stay_apart_and_are_found_by_their_full_name(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    long_a, long_b = "P" * 10_000 + "a", "P" * 10_000 + "b"
    trace = tmp_path / "long.csv"
    trace.write_text("\n".join([HEADER, good(1, long_a), good(2, long_b), good(3, long_b)]) + "\n")
    assert {o.task_family for o in read_trace(trace).observations} == {long_a, long_b}  # never cut
    assert main(["history", "import", str(trace)]) == 0
    store = sql_store(engine)
    assert store.family(long_a).rollup.attempts == 1
    assert store.family(long_b).rollup.attempts == 2
    capsys.readouterr()
    assert main(["history", "show", "--task-family", long_b, "--json"]) == 0  # found by its full name
    assert len(json.loads(capsys.readouterr().out)) == 2


def test_piped_input_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``history import <(cat t.csv)``, ``… /dev/stdin`` from a pipe and ``-``: the trace is read
    once into a temporary file (detection, header and rows each read it)."""
    text = "\n".join([HEADER, good(1), good(2), BAD["bad-number"](3, 0)]) + "\n"
    read_end, write_end = os.pipe()

    def write() -> None:
        os.write(write_end, text.encode())
        os.close(write_end)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert main(["history", "import", f"/dev/fd/{read_end}"]) == 0
    finally:
        writer.join()
        os.close(read_end)
    captured = capsys.readouterr()
    assert f"/dev/fd/{read_end}: 2 attempts imported (2 new" in captured.out
    assert f"skipped /dev/fd/{read_end}:4: not a number from 0 to 2^62: peak_rss=lots" in captured.err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(text.encode()))))
    assert main(["history", "import", "-"]) == 0  # same content under another name: new attempts
    assert "-: 2 attempts imported (2 new" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"")))
    assert main(["history", "import", "-"]) == 2
    assert capsys.readouterr().err.strip() == "airflow-adaptive: error: -: empty file"


@pytest.mark.parametrize("suffix", [".csv.gz", ".txt.gz", ".tsv.gz"])
def test_gzip_traces_are_detected_and_imported(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sep = "," if suffix == ".csv.gz" else "\t"
    trace = tmp_path / f"trace{suffix}"
    trace.write_bytes(
        gzip.compress(("\n".join([HEADER, good(1), good(2)]) + "\n").replace(",", sep).encode())
    )
    assert detect_format(str(trace)) == "nextflow"
    assert main(["history", "import", str(trace)]) == 0
    assert "2 attempts imported" in capsys.readouterr().out


def test_a_column_named_twice_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "twice.csv"
    trace.write_text(f"{HEADER},peak_rss\n{good(1)},5\n")
    assert main(["history", "import", str(trace)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"airflow-adaptive: error: {trace}: column peak_rss named twice in the header"
    )
    lotaru = tmp_path / "lotaru.csv"
    lotaru.write_text("Task,peak_rss,Realtime,Realtime\nt,1,2,3\n")
    assert main(["history", "import", str(lotaru)]) == 2
    assert "column Realtime named twice" in capsys.readouterr().err


def test_deeply_nested_wfformat_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_bytes(b'{"workflow":' + b'{"a":' * 200_000 + b"1" + b"}" * 200_001)
    assert main(["history", "import", "--format", "wfformat", str(deep)]) == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == f"airflow-adaptive: error: {deep}: not a WfFormat 1.5 instance (JSON nested too deeply)"
    )


def test_replay_of_a_folder_of_empty_files_names_twenty_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(150):
        (tmp_path / f"empty-{n:03d}.csv").write_bytes(b"")
    assert main(["replay", str(tmp_path), "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 22 and err[0] == f"not a trace, ignored: {tmp_path / 'empty-000.csv'}"
    assert err[20] == "and 130 more files ignored (not traces)"
    assert err[21] == f"airflow-adaptive: error: no trace files found in {tmp_path}"


def test_a_cctools_task_id_out_of_range_is_skipped_by_line(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "cct.txt"
    trace.write_text(
        "taskid -- core -- memory -- virtual_memory -- disk -- time -- average_cores -- 1\n"
        "28 -- 2 -- 6202 -- 0 -- 5 -- 256.5 -- 1.5 -- 1\n"
        "3000000000 -- 2 -- 6202 -- 0 -- 5 -- 256.5 -- 1.5 -- 1\n"
    )
    assert main(["history", "import", str(trace)]) == 0
    captured = capsys.readouterr()
    assert f"skipped {trace}:3: task_id=3000000000 is out of range (at most 2147483647)" in captured.err
    assert "1 attempt imported" in captured.out
    assert sql_store(engine).family("cct:category-1").rollup.attempts == 1


def test_a_whole_row_with_an_empty_last_cell_is_kept_a_short_row_is_not(tmp_path: Path) -> None:
    """pandas reads a missing field and an empty one alike: a row whose numbers are all there and
    only its last cell (hostname) is empty is an edited trace's whole row, imported without a node."""
    header = "task_id,hash,process,name,status,exit,attempt,memory,peak_rss,realtime,%cpu,rchar,wchar,complete,hostname\n"
    whole = "2,h2,ALIGN,ALIGN (2),COMPLETED,0,1,8589934592,1073741824,60000,150,1,1,1700000000002,\n"
    trace = tmp_path / "trace.csv"
    trace.write_text(header + whole + "3,ab/cd,MAL01,MAL01 (3)\n")
    result = read_trace(str(trace))
    (kept,) = result.observations
    assert kept.node_name is None and kept.usage.peak_memory_bytes == 1073741824
    assert [s.line for s in result.skipped] == [3] and "short row" in result.skipped[0].reason
    assert result.skipped[0].reason == "short row: fewer fields than the header's 15"


def test_an_unclosed_quote_names_the_row_it_opens_in(tmp_path: Path) -> None:
    """It makes the rest of the file one cell, so the file is refused, naming its row as a user
    counts them (pandas counts from 0), not by pandas' tokenizer message."""
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join([HEADER, good(1), good(2), '3,"ab/cd,MAL01', good(4)]) + "\n")
    with pytest.raises(
        TraceFormatError, match=r"\(a quote opened in row 4 \(the header is row 1\) is never closed\)$"
    ):
        read_trace(str(trace))


def test_a_gzip_trace_cut_short_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A download that stopped halfway: its first lines read, its end is missing."""
    whole = gzip.compress(("\n".join([HEADER, *(good(n) for n in range(1, 3000))]) + "\n").encode())
    cut = tmp_path / "trace.csv.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    for command in (["history", "import", str(cut)], ["replay", str(cut)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert (
            err
            == f"airflow-adaptive: error: {cut}: cannot read (Compressed file ended before the end-of-stream marker was reached)"
        )


def test_a_corrupt_gzip_wfformat_trace_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    instance = (
        Path(__file__).resolve().parents[2] / "docs" / "examples" / "wfformat" / "chipseq_instance.json"
    )
    packed = bytearray(gzip.compress(instance.read_bytes()))
    packed[len(packed) // 2 : len(packed) // 2 + 64] = bytes(64)  # a damaged block mid-stream
    corrupt = tmp_path / "instance.json.gz"
    corrupt.write_bytes(bytes(packed))
    for command in (["history", "import", "--format", "wfformat", str(corrupt)], ["replay", str(corrupt)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"airflow-adaptive: error: {corrupt}") and len(err.splitlines()) == 1


def test_every_format_the_command_line_offers_has_its_reader() -> None:
    from airflow_adaptive.traces.formats import TRACE_FORMATS
    from airflow_adaptive.traces.load import READERS

    assert tuple(READERS) == TRACE_FORMATS


def test_history_import_takes_a_k_segments_folder_and_says_a_missing_path_first(
    tmp_path: Path, engine: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.evaluation.test_series import family, write_folder

    folder = write_folder(tmp_path / "series", family(3))
    assert main(["history", "import", str(folder)]) == 0  # its tasks.csv, with the samples beside it
    assert f"{folder / 'tasks.csv'}: 3 attempts imported (3 new" in capsys.readouterr().out
    assert sql_store(engine).family("wf:align").rollup.attempts == 3
    missing = tmp_path / "nope.csv"
    for command in (["history", "import", str(folder), str(missing)], ["replay", str(missing)]):
        assert main(command) == 2
        assert (
            capsys.readouterr().err
            == f"airflow-adaptive: error: {missing}: cannot read (No such file or directory)\n"
        )
    (tmp_path / "empty").mkdir()
    assert main(["history", "import", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err.endswith(f"no trace files found in {tmp_path / 'empty'}\n")
    assert sql_store(engine).family("wf:align").rollup.attempts == 3  # nothing imported twice or lost
    other = folder / "notes.csv"  # beside a tasks.csv, but not it: named, not its folder (nor read as it)
    other.write_text((folder / "tasks.csv").read_text())
    assert main(["history", "import", "--format", "series", str(other)]) == 2
    assert capsys.readouterr().err.startswith(f"airflow-adaptive: error: {other}: not a time-series trace")


def test_replay_says_when_a_trace_cannot_be_replayed_in_the_history_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "cct.txt"  # CCTools: no start times, so no "completed" history
    rows = "".join(f"{n} -- 2 -- {6000 + n} -- 0 -- 5 -- 256.5 -- 1.5 -- 1\n" for n in range(1, 6))
    trace.write_text(
        "taskid -- core -- memory -- virtual_memory -- disk -- time -- average_cores -- 1\n" + rows
    )
    assert main(["replay", str(trace), "--strategy", "adaptive", "--history", "completed"]) == 0
    err = capsys.readouterr().err
    assert f"note: {trace} has no task start times: replayed with history sequential, not completed" in err
    assert main(["replay", str(trace), "--strategy", "adaptive", "--history", "sequential"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_a_trace_with_no_task_to_replay_is_named_not_a_table_of_zeros(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "failed.csv"  # every row read, none with a peak a strategy can replay
    failed = [good(n).replace(",COMPLETED,0,", ",FAILED,1,") for n in range(1, 4)]
    empty.write_text(HEADER + "\n" + "\n".join(failed) + "\n")
    assert main(["replay", str(empty), "--strategy", "vpa"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"airflow-adaptive: error: nothing to replay: {empty} has no task to replay (3 ")
    fine = tmp_path / "fine.csv"
    fine.write_text(HEADER + "\n" + "\n".join(good(n) for n in range(1, 4)) + "\n")
    assert main(["replay", str(empty), str(fine), "--strategy", "vpa", "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert [t["trace"] for t in report["traces"]] == [str(fine)]
    assert report["left_out_traces"][str(empty)].startswith("3 ")
    assert f"note: {empty} has no task to replay (3 " in err and err.rstrip().endswith("left out")


def test_a_trace_whose_path_reads_as_markup_is_shown_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """rich styles ``[bold]``, refuses ``[/]`` with an error and prints ``:smile:`` as an emoji: a
    table shows a path as written."""
    (tmp_path / "runs[").mkdir()
    trace = tmp_path / "runs[" / "]chip[bold]:smile:.csv"
    trace.write_text(HEADER + "\n" + "\n".join(good(n) for n in range(1, 4)) + "\n")
    assert main(["replay", str(trace), "--strategy", "vpa"]) == 0
    assert f"{trace} (3 tasks" in capsys.readouterr().out
