"""Nextflow traces as Nextflow writes them by default (``1.2 GB``, ``4m 3s``, ``98.3%``, dates) import to
the same attempts as their raw twins (``trace.raw = true``)."""

from __future__ import annotations

import runpy
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from airflow_adaptive.cli import main
from airflow_adaptive.traces.load import detect_format, read_trace
from airflow_adaptive.traces.readable import duration_ms, epoch_ms, memory_bytes, percent
from tests.conftest import EXAMPLES

UNITS = ("B", "KB", "MB", "GB", "TB", "PB", "EB")
MEM = ("memory", "peak_rss", "rchar", "wchar", "read_bytes", "write_bytes")


# The writer of the shipped examples, written from Nextflow's formatting rules (MemoryUnit.toString,
# Duration.toString, TraceRecord), not from our parser, so that each checks the other.
_WRITER = runpy.run_path(str(EXAMPLES / "make_traces.py"))  # run_path leaves no __pycache__
nf_memory, nf_duration, nf_date = _WRITER["nf_memory"], _WRITER["nf_duration"], _WRITER["nf_date"]


def raw_rows(count: int) -> pd.DataFrame:
    """Rows whose values Nextflow's readable form keeps exactly (sizes at a tenth of their unit,
    durations at its precision), a few OOM kills and missing values among them."""
    rng = np.random.default_rng(7)
    tenths = rng.integers(5, 300, count)
    unit = 1024.0 ** rng.integers(1, 4, count)  # KB to GB
    realtime = np.select(
        [np.arange(count) % 3 == 0, np.arange(count) % 3 == 1],
        [rng.integers(1, 999, count), rng.integers(10, 599, count) * 100],
        rng.integers(60, 200_000, count) * 1000,
    )
    oom = np.arange(count) % 9 == 4
    frame = pd.DataFrame({
        "task_id": np.arange(1, count + 1), "hash": [f"ab/{i:06x}" for i in range(count)],
        "process": [f"NFCORE_DEMO:DEMO:STEP_{i % 4}" for i in range(count)],
        "name": [f"NFCORE_DEMO:DEMO:STEP_{i % 4} (sample_{i})" for i in range(count)],
        "status": np.where(oom, "FAILED", "COMPLETED"), "exit": np.where(oom, 137, 0),
        "attempt": 1, "memory": np.where(oom, 2 * 1024.0**3, 8 * 1024.0**3),
        "peak_rss": np.where(oom, np.nan, np.floor(tenths / 10 * unit + 0.5)),
        "realtime": realtime.astype(float), "%cpu": rng.integers(10, 4000, count) / 10,
        "rchar": np.floor(rng.integers(1, 999, count) / 10 * 1024.0**2 + 0.5),
        "wchar": np.floor(rng.integers(1, 999, count) / 10 * 1024.0**2 + 0.5),
        "complete": 1_704_067_200_000 + np.cumsum(rng.integers(1, 5_000_000, count)),
        "hostname": [f"node{i % 3}" for i in range(count)],
    })  # fmt: skip
    frame.loc[5, "wchar"] = np.nan  # "-" in both forms
    return frame


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    text = frame.astype(object)
    for column in MEM:
        if column in frame:
            text[column] = frame[column].map(nf_memory)
    text["realtime"] = frame["realtime"].map(nf_duration)
    text["%cpu"] = frame["%cpu"].map(lambda v: f"{v:.1f}%")
    text["complete"] = frame["complete"].map(nf_date)
    return text


def attempts(path: Path) -> list[tuple]:
    result = read_trace(path)
    assert not result.skipped
    return [(o.key.task_id, o.task_family, o.usage, o.exit_reason, o.memory_request_bytes, o.finished_at,
             o.node_name) for o in result.observations]  # fmt: skip


@pytest.mark.parametrize(("suffix", "sep"), [(".csv", ","), (".txt", "\t")])
def test_a_default_format_trace_imports_to_the_same_attempts_as_its_raw_twin(
    tmp_path: Path, suffix: str, sep: str
) -> None:
    rows = raw_rows(200)
    raw, human = tmp_path / f"raw{suffix}", tmp_path / f"readable{suffix}"
    rows.to_csv(raw, sep=sep, index=False, na_rep="-")
    readable(rows).to_csv(human, sep=sep, index=False, na_rep="-")
    text = human.read_text()
    assert "GB" in text and "MB" in text and "%" in text and "m " in text and "ms" in text  # the forms
    assert detect_format(str(human)) == "nextflow"
    got, want = attempts(human), attempts(raw)
    assert len(got) == 200 and got == want
    assert sum(a[3].value == "OOMKilled" for a in got) == 22


def test_a_trace_with_nextflows_default_fields_only(tmp_path: Path) -> None:
    """`-with-trace` with no `trace.fields`: no process, memory or complete columns; the family is the
    name without its tag, the finish its start + realtime (or submit + duration)."""
    rows = raw_rows(20)
    default = readable(rows)[["task_id", "hash", "name", "status", "exit", "realtime", "%cpu", "peak_rss",
                              "rchar", "wchar"]]  # fmt: skip
    default.insert(5, "submit", rows["complete"].sub(rows["realtime"] + 2000).map(nf_date))
    default.insert(6, "duration", (rows["realtime"] + 2000).map(nf_duration))
    trace = tmp_path / "execution_trace_2024-01-01_00-00-00.txt"
    default.to_csv(trace, sep="\t", index=False)
    assert detect_format(str(trace)) == "nextflow"
    observations = read_trace(trace).observations
    assert [o.task_family for o in observations[:5]] == [f"NFCORE_DEMO:DEMO:STEP_{i}" for i in range(4)] + [
        "NFCORE_DEMO:DEMO:STEP_0"
    ]
    third = observations[2]  # its duration is whole seconds: exact in the readable form
    assert third.finished_at == datetime.fromtimestamp(rows["complete"][2] / 1000, timezone.utc)
    assert third.usage.peak_memory_bytes == rows["peak_rss"][2] and third.memory_request_bytes is None


@pytest.mark.database  # imports through the CLI, into the store
def test_a_value_that_is_neither_raw_nor_readable_is_reported_on_its_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = readable(raw_rows(6))
    text.loc[2, "peak_rss"] = "lots"
    text.loc[3, "realtime"] = "4 fortnights"
    trace = tmp_path / "trace.txt"
    text.to_csv(trace, sep="\t", index=False)
    assert main(["history", "import", str(trace)]) == 0
    captured = capsys.readouterr()
    assert f"{trace}:4: not a number from 0 to 2^62: peak_rss=lots" in captured.err
    assert f"{trace}:5: not a number from 0 to 2^62: realtime=4 fortnights" in captured.err
    assert "4 attempts imported" in captured.out and "2 rows skipped" in captured.out


def test_each_readable_form_nextflow_writes() -> None:
    def read(parse, *cells: str) -> list[float | None]:  # type: ignore[no-untyped-def]
        return [None if v != v else v for v in parse(pd.Series(cells)).tolist()]

    assert read(memory_bytes, "1.2 GB", "512 B", "12 KB", "3.5 TB", "1 PB", "2 EB", "7.1GB", "4 XB", "lots") == [
        1288490189, 512, 12288, 3848290697216, 1024**5, 2 * 1024**6, 7623566950, None, None,
    ]  # fmt: skip
    assert read(duration_ms, "4m 3s", "5s", "4.5s", "12ms", "1d 2h", "1h 2m 3s", "3x", "5s lots") == [
        243_000, 5_000, 4_500, 12, 93_600_000, 3_723_000, None, None,
    ]  # fmt: skip
    assert read(percent, "98.3%", "1200.5 %", "98.3") == [98.3, 1200.5, None]
    assert read(epoch_ms, "2024-01-01 00:00:01.234", "2024-13-01 00:00:00.000") == [1704067201234, None]
