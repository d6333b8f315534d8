"""The k-Segments traces as published (long2mao1/k-segments-traces): InfluxDB exports, one folder per
workflow, a subfolder per process, and per task ``<task>_memory.csv`` (``docker_used_memory_mb``
samples) beside ``<task>_metadata.csv`` (input files and bytes, ``max_mem``: the request).

Read into the two tables of the converted format (``traces/series.py``): a task's start is its first
sample, its end the later of its last sample and its output event; the workflow is the folder's
name. InfluxDB's annotated CSV starts with ``#`` lines; the header names the columns, whose order
differs between the two kinds of file.
"""

from __future__ import annotations

import csv
import os
from datetime import datetime
from pathlib import Path

import pandas as pd

from airflow_adaptive.exceptions import TraceFormatError

MEMORY_SUFFIX = "_memory.csv"
METADATA_SUFFIX = "_metadata.csv"
MEMORY_FIELD = "docker_used_memory_mb"


def is_influx_series_folder(path: str | os.PathLike[str]) -> bool:
    """A workflow folder of the published layout: a process subfolder holding a task's memory file."""
    folder = Path(path)
    return folder.is_dir() and any(folder.glob(f"*/*{MEMORY_SUFFIX}"))


def _rows(path: Path) -> list[dict[str, str]]:
    """The data rows of an annotated CSV, by column name."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            lines = [line for line in f if line.strip() and not line.startswith("#")]
    except (OSError, UnicodeDecodeError) as err:
        raise TraceFormatError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    return list(csv.DictReader(lines))


def _epoch_s(stamp: str) -> float:
    """An RFC 3339 time with up to nanoseconds, as epoch seconds (microseconds kept)."""
    whole, _, fraction = stamp.strip().rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{(fraction + '000000')[:6]}+00:00").timestamp()


def _task(memory_file: Path, workflow: str) -> tuple[dict[str, str], list[tuple[str, float, str]]]:
    """One task's row of ``tasks.csv`` and its samples (task, seconds from its first, MB)."""
    name = memory_file.name[: -len(MEMORY_SUFFIX)]
    try:
        stamped = sorted(
            (_epoch_s(r["_time"]), r["_value"]) for r in _rows(memory_file) if r.get("_field") == MEMORY_FIELD
        )
        meta_file = memory_file.with_name(name + METADATA_SUFFIX)
        meta = {r["_field"]: r for r in _rows(meta_file)} if meta_file.is_file() else {}
        output = meta.get("files_output_total_size")
        end = _epoch_s(output["_time"]) if output else None
    except (KeyError, ValueError) as err:
        raise TraceFormatError(f"{memory_file}: not an InfluxDB memory export ({err})") from None
    first = stamped[0][0] if stamped else 0.0
    last = stamped[-1][0] if stamped else 0.0
    row = {
        "workflow": workflow,
        "process": memory_file.parent.name,
        "task": name,
        "input_bytes": meta.get("files_input_total_size", {}).get("_value", ""),
        "requested_bytes": meta.get("max_mem", {}).get("_value", ""),
        "start_s": str(first),
        "duration_s": str(max(end or last, last) - first),
    }
    return row, [(name, t - first, value) for t, value in stamped]


def export_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files a folder's trace is read from, in reading order: each task's memory file (regular
    files only: a pipe would block) and its metadata where there is one."""
    memory_files = sorted(p for p in Path(path).glob(f"*/*{MEMORY_SUFFIX}") if p.is_file())
    beside = (p.with_name(p.name[: -len(MEMORY_SUFFIX)] + METADATA_SUFFIX) for p in memory_files)
    return [*memory_files, *(p for p in beside if p.is_file())]


def read_influx_series(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The folder as the converted format's two tables (text cells, as read from its CSV files)."""
    workflow = Path(os.path.abspath(path)).name  # "." is named by the folder it stands for
    tasks, samples = [], []
    for memory_file in (p for p in export_files(path) if p.name.endswith(MEMORY_SUFFIX)):
        row, series = _task(memory_file, workflow)
        tasks.append(row)
        samples.extend(series)
    sample_frame = pd.DataFrame(samples, columns=["task", "t_s", "memory_mb"]).astype(str)
    return pd.DataFrame(tasks).astype(str), sample_frame
