"""Nextflow trace files (``-with-trace``): one row per task attempt, ``process`` is the task family.
Values raw (``trace.raw = true``) or as Nextflow shows them by default (``1.2 GB``, ``4m 3s``, ``98.3%``,
dates), see :mod:`airflow_adaptive.traces.readable`.

Read in chunks of rows, each turned into attempts column by column, so a trace of millions of rows
is imported in bounded memory (see ``benchmarks/trace_import.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timezone

import pandas as pd

from airflow_adaptive.core.model import IMPORTED_DAG_ID, ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.normalise import INT32
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.common import (
    MISSING,
    NOT_A_NUMBER,
    ImportResult,
    SkippedRow,
    numeric_columns,
    read_table_chunks,
    trace_name,
)
from airflow_adaptive.traces.readable import READERS
from airflow_adaptive.traces.source import check_unique, first_line, header_fields

REQUIRED = ("process", "status")
NUMERIC = (
    "task_id", "attempt", "exit", "memory", "peak_rss", "realtime", "%cpu",
    "read_bytes", "write_bytes", "rchar", "wchar", "complete",
)  # fmt: skip
# Each numeric field's type in Nextflow's TraceRecord.FIELDS: how a trace written without
# ``trace.raw = true`` shows it (the others are plain numbers either way).
READABLE = {
    column: READERS[kind]
    for kind, columns in {
        "mem": ("memory", "peak_rss", "read_bytes", "write_bytes", "rchar", "wchar"),
        "time": ("realtime", "duration"), "perc": ("%cpu",), "date": ("complete", "submit", "start"),
    }.items()
    for column in columns
}  # fmt: skip
# Nextflow's default ``trace.fields`` have no process, memory or complete: the family is then the task
# name without its tag (``FASTQC (sample_1)``), the finish start + realtime or submit + duration.
FINISH_PARTS = ("start", "submit", "duration")
NAME_TAG = r"\s*\(.*\)\s*$"
LAST_MS = 253_402_300_799_999.0  # the end of year 9999, the last time Python represents
OOM_EXIT_CODES = (137,)  # SIGKILL: Nextflow reports OOM kills this way
CHUNK_ROWS = 25_000


def read_nextflow(path: str | os.PathLike[str], sep: str | None = None) -> ImportResult:
    """Observations of a Nextflow trace (CSV or TSV); malformed rows are reported and skipped."""
    result = ImportResult()
    for chunk in iter_nextflow(path, sep):
        result.observations.extend(chunk.observations)
        result.skipped.extend(chunk.skipped)
    return result


def iter_nextflow(
    path: str | os.PathLike[str], sep: str | None = None, chunk_rows: int | None = None
) -> Iterator[ImportResult]:
    """:func:`read_nextflow`, ``chunk_rows`` rows at a time; raises at the end when no row was usable."""
    name = os.fspath(path)
    header, sep = _header(name, sep)  # before pandas: a file that is no trace fails here, in bounded memory
    stem = trace_name(name)
    usable = skipped = 0
    text = (*REQUIRED, "hostname", "container", *(["name"] if "process" not in header else []))
    numeric = (*NUMERIC, *(FINISH_PARTS if "complete" not in header else ()))
    check_unique(name, header, (*text, *numeric))
    chunks = read_table_chunks(
        name, chunk_rows or CHUNK_ROWS, sep=sep, text=text, numeric=numeric, last=header[-1]
    )  # columns read only when needed: a full trace reads no more than before
    for frame, short in chunks:
        if "process" not in frame.columns:
            frame["process"] = frame["name"].str.replace(NAME_TAG, "", regex=True)
        chunk = _read_chunk(frame, short, name, stem, len(header))
        usable += len(chunk.observations)
        skipped += len(chunk.skipped)
        yield chunk
    if not usable:
        raise TraceFormatError(f"{name}: no usable rows ({skipped} skipped)")


def _header(name: str, sep: str | None) -> tuple[list[str], str]:
    """The names in a trace's first line, and its separator (a tab when the header has one: Nextflow
    writes TSV by default); a first line without the columns a trace needs is a TraceFormatError."""
    line = first_line(name)
    if sep is None:
        sep = "\t" if "\t" in line else "," if "," in line else "\t"
    header = header_fields(line, sep)
    have = set(header) | ({"process"} if "name" in header else set())
    missing = [c for c in REQUIRED if c not in have]
    if missing:
        raise TraceFormatError(f"{name}: not a Nextflow trace (missing columns {', '.join(missing)})")
    return header, sep


def _read_chunk(frame: pd.DataFrame, short: pd.Series, name: str, stem: str, fields: int) -> ImportResult:
    """The attempts of one chunk of rows, worked out a column at a time."""
    derive = "complete" not in frame.columns
    numbers, bad = numeric_columns(frame, (*NUMERIC, *FINISH_PARTS) if derive else NUMERIC, READABLE)
    if derive:
        ends = numbers["start"] + numbers["realtime"]
        numbers["complete"] = ends.fillna(numbers["submit"] + numbers["duration"])
    process = frame["process"].astype(str).str.strip()
    status = frame["status"].astype(str).str.strip()
    reason = pd.Series(None, index=frame.index, dtype=object)
    reason[status == "COMPLETED"] = ExitReason.COMPLETED
    failed = status == "FAILED"
    oom = failed & numbers["exit"].isin(OOM_EXIT_CODES)
    reason[failed] = ExitReason.ERROR
    reason[oom] = ExitReason.OOM_KILLED  # ABORTED / CACHED rows say nothing about resource use
    keys = (numbers["task_id"] > INT32) | (numbers["attempt"] > INT32)  # the store's INTEGER key columns
    problems = _problems(bad, numbers, process, status, reason, keys, short, fields)
    result = ImportResult()
    for pos, problem in problems.items():
        result.skipped.append(SkippedRow(name, int(pos) + 2, problem))  # the header is line 1
    ok = frame.index.difference(problems.index)
    if len(ok):
        result.observations = _observations(
            {c: v[ok] for c, v in numbers.items()}, process[ok], reason[ok], oom[ok], frame, ok, stem
        )
    return result


def _problems(
    bad: pd.Series,
    numbers: dict[str, pd.Series],
    process: pd.Series,
    status: pd.Series,
    reason: pd.Series,
    keys: pd.Series,
    short: pd.Series,
    fields: int,
) -> pd.Series:
    """Why each unusable row cannot be imported, by row (the most basic reason that applies)."""
    complete = numbers["complete"]
    why = pd.Series(None, index=bad.index, dtype=object)
    unusable = pd.Series(False, index=bad.index)
    for mask, say in (  # the last that applies wins: the most basic problem is named
        (reason.isna(), lambda rows: "status " + status[rows].map(repr) + " says nothing about resource use"),
        (process == "", lambda rows: pd.Series("empty process", index=rows)),
        (complete > LAST_MS, lambda rows: "not a time (milliseconds since 1970): complete="
         + complete[rows].map("{:.0f}".format)),
        (keys, lambda rows: _out_of_range(numbers, rows)),
        (bad != "", lambda rows: NOT_A_NUMBER + ": " + bad[rows].str.strip()),
        (short, lambda rows: pd.Series(f"short row: fewer fields than the header's {fields}", index=rows)),
    ):  # fmt: skip
        rows = mask[mask].index
        if len(rows):
            why[rows] = say(rows)
            unusable[rows] = True
    return why[unusable].fillna("unreadable row")  # a row marked unusable is never imported


def _out_of_range(numbers: dict[str, pd.Series], rows: pd.Index) -> pd.Series:
    """``task_id=3000000000 is out of range (…)``: the store keeps task ids and attempts as 32-bit."""
    note = pd.Series("", index=rows, dtype=object)
    for column in ("task_id", "attempt"):
        values = numbers[column][rows]
        big = values > INT32
        note[big] = note[big] + f"{column}=" + values[big].map("{:.0f}".format) + " "
    return note.str.strip() + f" is out of range (at most {INT32})"


def _observations(
    numbers: dict[str, pd.Series],
    process: pd.Series,
    reason: pd.Series,
    oom: pd.Series,
    frame: pd.DataFrame,
    rows: pd.Index,
    stem: str,
) -> list[Observation]:
    realtime_s = numbers["realtime"] / 1000
    peak = numbers["peak_rss"].where(~oom)
    kind = pd.Series(PeakKind.NONE, index=rows, dtype=object)
    kind[peak.fillna(0) > 0] = PeakKind.MEASURED
    kind[oom] = PeakKind.CENSORED
    memory = _ints(numbers["memory"])
    complete = numbers["complete"].where(numbers["complete"] > 0)
    finished = [
        None if ms is None else datetime.fromtimestamp(ms / 1000, timezone.utc) for ms in _floats(complete)
    ]
    hosts, images = (
        frame[c][rows].astype(str).str.strip() if c in frame else pd.Series("", index=rows)
        for c in ("hostname", "container")
    )
    families = process.tolist()  # the store fits long names to its keys (prefix and hash), never cut
    run_id = f"trace:{stem}"
    explanation = f"imported from {stem}"
    columns = zip(
        families,
        _ints(numbers["task_id"].fillna(pd.Series(rows, index=rows, dtype=float))),
        _ints(numbers["attempt"].where(numbers["attempt"] > 0, 1)),
        _ints(peak), _floats(realtime_s * (numbers["%cpu"] / 100)), _floats(realtime_s),
        _ints(numbers["read_bytes"].fillna(numbers["rchar"])), _ints(numbers["write_bytes"].fillna(numbers["wchar"])),
        kind.tolist(), reason.tolist(), _ints(numbers["exit"]), memory,
        [None if h in MISSING else h for h in hosts.tolist()], finished,
        [None if i in MISSING else i for i in images.tolist()], strict=True,
    )  # fmt: skip
    return [
        Observation(
            key=TaskKey(IMPORTED_DAG_ID, family, run_id, task_no, attempt),
            task_family=family,
            usage=Usage(peak_b, cpu_s, wall_s, read_b, write_b, peak_kind),
            exit_reason=why,
            exit_code=code,
            memory_request_bytes=mem,
            memory_limit_bytes=mem,
            user_request_bytes=mem,
            node_name=host,
            finished_at=when,
            strategy="user",
            explanation=explanation,
            image=image,
        )
        for family, task_no, attempt, peak_b, cpu_s, wall_s, read_b, write_b, peak_kind, why, code, mem, host, when, image in columns
    ]


def _ints(values: pd.Series) -> list[int | None]:
    return [None if v != v else int(v) for v in values.tolist()]  # v != v: NaN, a missing value


def _floats(values: pd.Series) -> list[float | None]:
    return [None if v != v else float(v) for v in values.tolist()]
