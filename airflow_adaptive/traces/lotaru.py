"""Lotaru execution reports: ``<machine>/<workflow>.csv``, one row per task with its input size."""

from __future__ import annotations

import os

from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.common import (
    NOT_A_NUMBER,
    ImportResult,
    SkippedRow,
    completed_observation,
    numeric_columns,
    read_table,
    trace_name,
    value,
)
from airflow_adaptive.traces.source import check_unique, first_line, header_fields

REQUIRED = ("Task", "peak_rss", "Realtime")
NUMERIC = (
    "peak_rss",
    "Realtime",
    "%cpu",
    "memory",
    "TaskInputSize",
    "read_bytes",
    "write_bytes",
    "rchar",
    "wchar",
)


def read_lotaru(path: str | os.PathLike[str]) -> ImportResult:
    """Observations of a Lotaru report; the family is ``<workflow>:<Task>``, input size ``TaskInputSize``."""
    name = os.fspath(path)
    check_unique(
        name, header_fields(first_line(name), ","), (*REQUIRED, *NUMERIC, "Workflow", "Machine", "Label")
    )
    frame = read_table(name)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise TraceFormatError(f"{name}: not a Lotaru report (missing columns {', '.join(missing)})")
    numbers, bad = numeric_columns(frame, NUMERIC)
    result = ImportResult()
    stem = trace_name(name)
    for pos in range(len(frame)):
        task = str(frame.at[pos, "Task"]).strip()
        workflow = str(frame.at[pos, "Workflow"]).strip() if "Workflow" in frame.columns else ""
        peak, realtime_ms = value(numbers, "peak_rss", pos), value(numbers, "Realtime", pos)
        problem = (
            f"{NOT_A_NUMBER}: {bad.iat[pos].strip()}" if bad.iat[pos]
            else "empty Task" if not task
            else "no peak_rss" if not peak
            else None
        )  # fmt: skip
        if problem:
            result.skipped.append(SkippedRow(name, pos + 2, problem))
            continue
        family = f"{workflow}:{task}" if workflow else task
        wall = None if realtime_ms is None else realtime_ms / 1000
        cpu = value(numbers, "%cpu", pos)
        read = value(numbers, "read_bytes", pos)
        write = value(numbers, "write_bytes", pos)
        memory = value(numbers, "memory", pos)
        size = value(numbers, "TaskInputSize", pos)
        label = str(frame.at[pos, "Label"]).strip() if "Label" in frame.columns else ""
        result.observations.append(
            completed_observation(
                stem,
                pos,
                family,
                peak_bytes=peak,  # type: ignore[arg-type]  # checked above
                wall_seconds=wall,
                cpu_percent=cpu,
                read_bytes=read,
                write_bytes=write,
                request_bytes=memory,
                input_size_bytes=size,
                node_name=str(frame.at[pos, "Machine"]).strip() if "Machine" in frame.columns else None,
                note=label,
            )
        )
    if not result.observations:
        raise TraceFormatError(f"{name}: no usable rows ({len(result.skipped)} skipped)")
    return result
