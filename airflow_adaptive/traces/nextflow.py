"""Nextflow trace files (``-with-trace``): one row per task attempt, ``process`` is the task family."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timezone

import pandas as pd

from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.common import (
    MISSING,
    ImportResult,
    SkippedRow,
    numeric_columns,
    read_table,
    trace_name,
    value,
)

REQUIRED = ("process", "status")
NUMERIC = (
    "task_id", "attempt", "exit", "memory", "peak_rss", "realtime", "%cpu",
    "read_bytes", "write_bytes", "rchar", "wchar", "complete",
)  # fmt: skip
LAST_MS = 253_402_300_799_999.0  # the end of year 9999, the last time Python represents
OOM_EXIT_CODES = {137}  # SIGKILL: Nextflow reports OOM kills this way


def _exit_reason(status: str, exit_code: float | None) -> ExitReason | None:
    if status == "COMPLETED":
        return ExitReason.COMPLETED
    if status == "FAILED":
        return ExitReason.OOM_KILLED if exit_code in OOM_EXIT_CODES else ExitReason.ERROR
    return None  # ABORTED / CACHED rows say nothing about resource use


def read_nextflow(path: str | os.PathLike[str], sep: str | None = None) -> ImportResult:
    """Observations of a Nextflow trace (CSV or TSV); malformed rows are reported and skipped."""
    name = os.fspath(path)
    frame = read_table(name, sep=sep or ("\t" if name.endswith((".txt", ".tsv")) else ","),
                       engine="python" if sep is None else "c")  # fmt: skip
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise TraceFormatError(f"{name}: not a Nextflow trace (missing columns {', '.join(missing)})")
    numbers, bad = numeric_columns(frame, NUMERIC)
    result = ImportResult()
    stem = trace_name(name)
    hosts = frame["hostname"].str.strip() if "hostname" in frame.columns else pd.Series("", index=frame.index)
    for pos in range(len(frame)):
        line = pos + 2  # the header is line 1

        def num(column: str, _pos: int = pos) -> float | None:
            return value(numbers, column, _pos)

        process = str(frame.at[pos, "process"]).strip()
        status = str(frame.at[pos, "status"]).strip()
        reason = _exit_reason(status, num("exit"))
        complete = num("complete")
        problem = _problem(bad.iat[pos], complete, process, status, reason)
        if problem or reason is None:
            result.skipped.append(SkippedRow(name, line, problem or "unusable row"))
            continue
        host = None if hosts.iat[pos] in MISSING else hosts.iat[pos]
        result.observations.append(_observation(num, process, reason, stem, pos, host))
    if not result.observations:
        raise TraceFormatError(f"{name}: no usable rows ({len(result.skipped)} skipped)")
    return result


def _observation(
    num: Callable[[str], float | None],
    process: str,
    reason: ExitReason,
    stem: str,
    pos: int,
    host: str | None,
) -> Observation:
    """One attempt from a usable row (``num`` reads the row's numeric columns)."""
    realtime_s = _scaled(num("realtime"), 1 / 1000)
    cpu_pct, peak, memory, complete = num("%cpu"), num("peak_rss"), num("memory"), num("complete")
    task_no = num("task_id")
    oom = reason is ExitReason.OOM_KILLED
    kind = PeakKind.CENSORED if oom else PeakKind.MEASURED if peak else PeakKind.NONE
    return Observation(
        key=TaskKey(
            "trace",
            process[:250],
            f"trace:{stem}",
            int(task_no if task_no is not None else pos),
            int(num("attempt") or 1),
        ),
        task_family=process[:250],
        usage=Usage(
            peak_memory_bytes=None if oom else _int(peak),
            cpu_core_seconds=None if cpu_pct is None else _scaled(realtime_s, cpu_pct / 100),
            wall_seconds=realtime_s,
            read_bytes=_int(_first(num("read_bytes"), num("rchar"))),
            write_bytes=_int(_first(num("write_bytes"), num("wchar"))),
            peak_kind=kind,
        ),
        exit_reason=reason,
        exit_code=_int(num("exit")),
        memory_request_bytes=_int(memory),
        memory_limit_bytes=_int(memory),
        user_request_bytes=_int(memory),
        node_name=host,
        finished_at=datetime.fromtimestamp(complete / 1000, timezone.utc) if complete else None,
        strategy="user",
        explanation=f"imported from {stem}",
    )


def _problem(
    bad: str, complete: float | None, process: str, status: str, reason: ExitReason | None
) -> str | None:
    """Why a row cannot be imported (None: it can)."""
    if bad:
        return f"not a non-negative number: {bad.strip()}"
    if complete is not None and complete > LAST_MS:
        return f"complete={complete:.0f} is not a time (milliseconds since 1970)"
    if not process:
        return "empty process"
    return f"status {status!r} says nothing about resource use" if reason is None else None


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor
