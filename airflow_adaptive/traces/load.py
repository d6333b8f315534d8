"""Pick the importer for a trace file, and turn observations into replayable task runs."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from airflow_adaptive.core.model import Observation
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.cctools import DELIMITER, read_cctools
from airflow_adaptive.traces.common import ImportResult
from airflow_adaptive.traces.formats import FORMATS
from airflow_adaptive.traces.influx_series import MEMORY_SUFFIX
from airflow_adaptive.traces.lotaru import read_lotaru
from airflow_adaptive.traces.nextflow import iter_nextflow, read_nextflow
from airflow_adaptive.traces.runs import TaskRun
from airflow_adaptive.traces.series import (
    MEMORY_FILES,
    is_exports_folder,
    is_series_folder,
    is_series_tasks,
    read_series_history,
)
from airflow_adaptive.traces.source import first_line, has_rows, readable_copy
from airflow_adaptive.traces.wfformat import NotAnInstanceError, NotJsonError, load_instance, read_wfformat

READERS: dict[str, Callable[[str], ImportResult]] = {
    "nextflow": read_nextflow,
    "lotaru": read_lotaru,
    "cctools": read_cctools,
    "wfformat": read_wfformat,
    "series": read_series_history,
}
IGNORED_SHOWN = 20  # files of a folder that are no trace, named one by one; the rest are counted


def detect_format(path: str) -> str:
    """The format of a trace file (plain or gzip), from its first line (read with a bound); a folder
    of the published k-Segments exports (``<process>/<task>_memory.csv``) is a series."""
    if os.path.isdir(path) and is_series_folder(path):
        return "series"
    head = first_line(path)
    if head.lstrip().startswith("{"):
        return "wfformat"
    if DELIMITER in head:
        return "cctools"
    columns = {c.strip() for c in head.replace("\t", ",").split(",")}
    if {"process", "status"} <= columns or {"task_id", "hash", "name", "status"} <= columns:  # default fields
        return "nextflow"
    if {"Task", "peak_rss", "Realtime"} <= columns:
        return "lotaru"
    if is_series_tasks(columns):
        return "series"
    raise TraceFormatError(f"{path}: unknown trace format (use --format {'|'.join(READERS)})")


def read_trace(path: str | os.PathLike[str], fmt: str = "auto") -> ImportResult:
    """A trace's attempts and skipped rows; ``-`` is stdin, a pipe is read once."""
    name = os.fspath(path)
    result = ImportResult()
    for part in iter_trace(name, fmt):
        result.observations.extend(part.observations)
        result.skipped.extend(part.skipped)
    return result


def iter_trace(path: str | os.PathLike[str], fmt: str = "auto") -> Iterator[ImportResult]:
    """:func:`read_trace` in parts, for a store to record one at a time: Nextflow traces (the ones
    that grow to millions of rows) a chunk of rows at a time, other formats whole."""
    name = os.fspath(path)
    with readable_copy(name) as copy:
        try:
            kind = _format_of(copy, fmt)
            parts = iter_nextflow(copy) if kind == "nextflow" else iter([READERS[kind](copy)])
            for part in parts:
                if copy != name:  # errors and rows name the input as the user gave it
                    part.skipped = [replace(row, path=name) for row in part.skipped]
                yield part
        except TraceFormatError as err:
            if copy == name:
                raise
            raise TraceFormatError(str(err).replace(copy, name)) from None


def _format_of(name: str, fmt: str) -> str:
    if fmt not in FORMATS:
        raise TraceFormatError(f"unknown trace format {fmt!r}; known: {', '.join(FORMATS)}")
    return detect_format(name) if fmt == "auto" else fmt


def task_runs(observations: list[Observation]) -> list[TaskRun]:
    """Completed attempts as replay input (a failed attempt has no true peak to replay)."""
    return [run for run in map(_task_run, observations) if isinstance(run, TaskRun)]


def replay_input(
    path: str, fmt: str = "auto", first_lines: dict[str, int] | None = None
) -> tuple[list[TaskRun], dict[str, int]]:
    """A trace's replay input, and how many of its rows were left out, by reason: rows the
    reader skipped (as ``history import`` reports them) and attempts with no true peak.
    ``first_lines``: filled with the file line of each skipped row's reason's first row."""
    result = read_trace(path, fmt)
    kinds = [row.kind or row.reason.split(":")[0] for row in result.skipped]
    reasons = Counter(kinds)
    if first_lines is not None:
        for kind, row in zip(kinds, result.skipped, strict=True):
            if row.by_line:  # a JSON instance's task has a place, not a line
                first_lines.setdefault(kind, row.line)
    runs = []
    for made in map(_task_run, result.observations):
        if isinstance(made, TaskRun):
            runs.append(made)
        else:
            reasons[made] += 1
    return runs, dict(reasons)


def _task_run(obs: Observation) -> TaskRun | str:
    """The attempt as replay input, or why it cannot be."""
    peak = obs.usage.peak_memory_bytes
    if obs.oom_killed:
        return "OOM-killed (true peak unknown)"
    if obs.exit_reason.value != "Completed":
        return "not completed (peak may be partial)"
    if not peak:
        return "no peak memory recorded"
    wall = obs.usage.wall_seconds or 0.0
    finish = obs.finished_at.timestamp() if obs.finished_at else None
    return TaskRun(
        family=obs.task_family,
        peak_bytes=peak,
        wall_seconds=wall,
        input_size_bytes=obs.input_size_bytes,
        user_request_bytes=obs.memory_request_bytes,
        start_s=None if finish is None else finish - wall,
        finish_s=finish,
        image=obs.image,
        program=obs.program,
    )


def ignored_lines(ignored: list[str], shown: int = IGNORED_SHOWN) -> list[str]:
    """What replay says of files in folders that are no trace: the first ``shown``, then a count
    (a folder of ten thousand stray files is one screen, not ten thousand lines)."""
    lines = [f"not a trace, ignored: {path}" for path in ignored[:shown]]
    if len(ignored) > shown:
        lines.append(f"and {len(ignored) - shown} more files ignored (not traces)")
    return lines


def expand_paths(paths: list[str]) -> tuple[list[str], list[str]]:
    """Files to replay: named files as they are; folders searched for files of a known format.

    Returns (traces, skipped files found in folders whose format is unknown).
    """
    traces: list[str] = []
    skipped: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            traces.append(path)
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .git, .venv: never traces
            if is_exports_folder(root):  # one trace, read whole from its process subfolders' files
                traces.append(root)
                dirs[:] = [d for d in dirs if not any(Path(root, d).glob(f"*{MEMORY_SUFFIX}"))]
            samples = MEMORY_FILES if is_series_folder(root) else ()
            for name in sorted(set(files) - set(samples)):  # a series' samples are read with its tasks
                candidate = os.path.join(root, name)
                (traces if _is_trace(candidate) else skipped).append(candidate)
    return traces, skipped


def _is_trace(path: str) -> bool:
    """Whether a file found in a folder is a trace: of a known format by its first line, and a JSON
    document a WfFormat instance (read whole: stray JSON beside the traces is common, and would
    otherwise stop a folder's import or replay). A broken instance is a trace: its reader says why;
    so is a file named as JSON that is none (cut short), but not another that starts with ``{``.
    A header with no row after it holds no trace either (as an empty file does)."""
    try:
        kind = detect_format(path)
    except TraceFormatError:  # no header of a known format
        return False
    if kind != "wfformat":
        return has_rows(path)
    try:
        load_instance(path)
    except NotJsonError:  # a template, say; a file named .json is a trace cut short
        return path.lower().removesuffix(".gz").endswith(".json")
    except NotAnInstanceError:
        return False
    except TraceFormatError:
        return True
    return True
