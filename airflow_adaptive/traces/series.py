"""Memory over time: the k-Segments trace format (``tasks.csv`` and ``memory.csv[.gz]`` in one folder,
or the published InfluxDB exports, read into the same tables by ``traces/influx_series.py``).

``tasks.csv``: workflow, process, task, input_bytes, requested_bytes, start_s, duration_s, peak_mb
(more columns are ignored); ``memory.csv``: task, t_s (seconds since the task's first sample),
memory_mb. Megabytes are decimal (10^6 bytes), as the column names say. The family is
``<workflow>:<process>``. A task without samples, or with a non-numeric or negative value, is
skipped and counted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from airflow_adaptive.core.growth_plan import profile_of, rebound_of
from airflow_adaptive.core.units import MB
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.common import ImportResult, SkippedRow, completed_observation, trace_name
from airflow_adaptive.traces.influx_series import export_files, is_influx_series_folder, read_influx_series
from airflow_adaptive.traces.runs import TaskRun
from airflow_adaptive.traces.source import READ_ERRORS

TASK_COLUMNS = ("workflow", "process", "task", "input_bytes", "requested_bytes", "start_s", "duration_s")
SAMPLE_COLUMNS = ("task", "t_s", "memory_mb")
MEMORY_FILES = ("memory.csv.gz", "memory.csv")


@dataclass(frozen=True)
class SeriesRun:
    """A task instance with its memory sampled over its life; the last sample time is its end."""

    run: TaskRun
    times_s: np.ndarray
    usage_bytes: np.ndarray


@dataclass
class SeriesTrace:
    name: str
    runs: list[SeriesRun]
    skipped: dict[str, int]  # reason -> tasks
    skipped_lines: list[tuple[int, str]]  # (line of tasks.csv, reason)


def is_series_folder(path: str | os.PathLike[str]) -> bool:
    return _is_converted(Path(path)) or is_influx_series_folder(path)


def is_exports_folder(path: str | os.PathLike[str]) -> bool:
    """A folder of the published exports only, without a converted ``tasks.csv``: a trace itself."""
    return not _is_converted(Path(path)) and is_influx_series_folder(path)


def series_folders(path: str) -> list[str]:
    """``path`` when it is a time-series folder, else the ones under it (as a plain replay searches a
    folder for traces), sorted; empty when there are none."""
    found, seen = [], set()
    for root, dirs, _ in os.walk(path, followlinks=True):  # ``path`` first; nothing when not a folder
        real = os.path.realpath(root)
        if real in seen:  # reached twice, through a link (or a loop of them)
            dirs.clear()
            continue
        seen.add(real)
        if is_series_folder(root):
            found.append(root)
            dirs.clear()  # a series folder's own subfolders are its data
    return sorted(found)


def _is_converted(folder: Path) -> bool:
    return (folder / "tasks.csv").is_file() and any((folder / name).is_file() for name in MEMORY_FILES)


def _read(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (*READ_ERRORS, ValueError, UnicodeDecodeError) as err:
        raise TraceFormatError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise TraceFormatError(
            f"{path}: not a memory time-series file (missing columns {', '.join(missing)})"
        )
    return frame


def _numbers(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    out = frame.copy()
    for column in columns:
        out[column] = pd.to_numeric(frame[column].str.strip(), errors="coerce")
    return out


def _tables(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The folder's tasks and samples, as text, from either layout."""
    if _is_converted(folder):
        memory_file = next(folder / name for name in MEMORY_FILES if (folder / name).is_file())
        return _read(folder / "tasks.csv", TASK_COLUMNS), _read(memory_file, SAMPLE_COLUMNS)
    if is_influx_series_folder(folder):
        return read_influx_series(folder)
    raise TraceFormatError(
        f"{folder}: no tasks.csv with a memory.csv or memory.csv.gz beside it, "
        "and no <process>/<task>_memory.csv exports"
    )


def read_series(path: str | os.PathLike[str]) -> SeriesTrace:
    """The tasks of a k-Segments folder, in start order, each with its samples sorted by time."""
    folder = Path(path)
    tasks, samples = _tables(folder)
    tasks, samples = _numbers(tasks, TASK_COLUMNS[3:]), _numbers(samples, SAMPLE_COLUMNS[1:])
    bad_samples = samples[["t_s", "memory_mb"]].isna().any(axis=1) | (samples[["t_s", "memory_mb"]] < 0).any(
        axis=1
    )
    samples = samples[~bad_samples].sort_values(["task", "t_s"], kind="stable")
    by_task = {name: group for name, group in samples.groupby("task", sort=False)}
    skipped: dict[str, int] = {}
    lines: list[tuple[int, str]] = []
    runs = []
    for line, row in enumerate(tasks.itertuples(index=False), start=2):
        reason = _problem(row, by_task)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            lines.append((line, reason))
            continue
        group = by_task[row.task]
        times = group["t_s"].to_numpy(dtype=float)
        usage = group["memory_mb"].to_numpy(dtype=float) * MB
        end = max(float(row.duration_s), float(times[-1]))
        if end > times[-1]:  # the task ran on after its last sample, at that sample's usage
            times, usage = np.append(times, end), np.append(usage, usage[-1])
        run = TaskRun(
            family=f"{row.workflow}:{row.process}",
            peak_bytes=int(usage.max()),
            wall_seconds=end,
            input_size_bytes=None if np.isnan(row.input_bytes) else int(row.input_bytes),
            user_request_bytes=None if np.isnan(row.requested_bytes) else int(row.requested_bytes),
            start_s=float(row.start_s),
            finish_s=float(row.start_s) + end,
        )
        runs.append(SeriesRun(run, times, usage))
    runs.sort(key=lambda s: s.run.start_s or 0.0)
    return SeriesTrace(str(folder), runs, skipped, lines)


def is_series_tasks(columns: set[str]) -> bool:
    """Whether a header is a k-Segments ``tasks.csv``'s."""
    return {"process", "task", "duration_s", "peak_mb", "requested_bytes"} <= columns


def read_series_history(path: str | os.PathLike[str]) -> ImportResult:
    """A k-Segments ``tasks.csv`` (its samples beside it), or a folder of the published exports, as
    completed attempts for the history store, each with its memory profile (``core/growth.py``)."""
    name = os.fspath(path)
    if os.path.isdir(name) and _is_converted(Path(name)):
        name = os.path.join(name, "tasks.csv")
    exports = os.path.isdir(name)  # the published exports, read from their files
    if not exports and os.path.basename(name) != "tasks.csv":  # the one file read_series reads there
        raise TraceFormatError(
            f"{name}: not a time-series trace (--format series reads a folder, or its tasks.csv with a "
            "memory.csv beside it)"
        )
    trace = read_series(name if exports else Path(name).parent)
    result = ImportResult(skipped=[SkippedRow(name, line, reason) for line, reason in trace.skipped_lines])
    stem = trace_name(name, [os.fspath(p) for p in export_files(name)] if exports else ())
    for position, s in enumerate(trace.runs):
        observation = completed_observation(
            stem, position, s.run.family, peak_bytes=s.run.peak_bytes, wall_seconds=s.run.wall_seconds,
            request_bytes=s.run.user_request_bytes, input_size_bytes=s.run.input_size_bytes,
        )  # fmt: skip
        finished = datetime.fromtimestamp(s.run.finish_s or 0.0, tz=timezone.utc)
        usage = s.usage_bytes.tolist()
        rebound = rebound_of(s.times_s.tolist(), usage)
        result.observations.append(
            replace(
                observation, finished_at=finished, memory_profile_s=profile_of(s.times_s.tolist(), usage),
                memory_rebound_bytes=None if rebound is None else round(rebound),
            )
        )  # fmt: skip
    if not result.observations:
        raise TraceFormatError(f"{name}: no usable tasks ({len(result.skipped)} skipped)")
    return result


def _problem(row: Any, by_task: dict[str, pd.DataFrame]) -> str | None:
    if any(np.isnan(v) or v < 0 for v in (row.start_s, row.duration_s)):
        return "no start or duration"
    if any(not np.isnan(v) and v < 0 for v in (row.input_bytes, row.requested_bytes)):
        return "negative size"
    group = by_task.get(row.task)
    if group is None or group.empty or float(group["memory_mb"].max()) <= 0:
        return "no memory samples"
    return None
