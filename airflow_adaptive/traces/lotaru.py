"""Lotaru execution reports: ``<machine>/<workflow>.csv``, one row per task with its input size."""

from __future__ import annotations

import os

import pandas as pd

from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.common import ImportResult, SkippedRow, numeric_columns, value

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
    frame = pd.read_csv(name, dtype=str, keep_default_na=False)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise TraceFormatError(f"{name}: not a Lotaru report (missing columns {', '.join(missing)})")
    numbers, bad = numeric_columns(frame, NUMERIC)
    result = ImportResult()
    stem = os.path.basename(os.path.dirname(os.path.abspath(name))) + "/" + os.path.basename(name)
    for pos in range(len(frame)):
        task = str(frame.at[pos, "Task"]).strip()
        workflow = str(frame.at[pos, "Workflow"]).strip() if "Workflow" in frame.columns else ""
        peak, realtime_ms = value(numbers, "peak_rss", pos), value(numbers, "Realtime", pos)
        problem = (
            f"not a non-negative number: {bad.iat[pos].strip()}" if bad.iat[pos]
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
            Observation(
                key=TaskKey("trace", family[:250], f"trace:{stem}", pos, 1),
                task_family=family[:250],
                usage=Usage(
                    peak_memory_bytes=int(peak),  # type: ignore[arg-type]
                    cpu_core_seconds=None if cpu is None or wall is None else cpu / 100 * wall,
                    wall_seconds=wall,
                    read_bytes=None if read is None else int(read),
                    write_bytes=None if write is None else int(write),
                    peak_kind=PeakKind.MEASURED,
                ),
                exit_reason=ExitReason.COMPLETED,
                exit_code=0,
                memory_request_bytes=None if memory is None else int(memory),
                memory_limit_bytes=None if memory is None else int(memory),
                input_size_bytes=None if size is None else int(size),
                node_name=str(frame.at[pos, "Machine"]).strip() if "Machine" in frame.columns else None,
                strategy="user",
                explanation=f"imported from {stem} ({label})" if label else f"imported from {stem}",
            )
        )
    if not result.observations:
        raise TraceFormatError(f"{name}: no usable rows ({len(result.skipped)} skipped)")
    return result
