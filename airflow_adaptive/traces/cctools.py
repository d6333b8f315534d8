"""CCTools / Work Queue task summaries: `` -- ``-delimited tables, memory in MB, the tag is the category."""

from __future__ import annotations

import os

import pandas as pd

from airflow_adaptive.core.normalise import INT32
from airflow_adaptive.core.units import MIB
from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.common import (
    NOT_A_NUMBER,
    ImportResult,
    SkippedRow,
    completed_observation,
    numeric_columns,
    trace_name,
    value,
)
from airflow_adaptive.traces.source import READ_ERRORS, cannot_read, open_bytes

DELIMITER = " -- "
# By position: some published files name the last (tag) column "0" or "1".
COLUMNS = ("task_id", "core", "memory", "virtual_memory", "disk", "time", "average_cores", "tag")


def read_cctools(path: str | os.PathLike[str]) -> ImportResult:
    """Observations of a CCTools table; family ``<workflow>:category-<tag>``, the workflow the file's
    name (each workflow numbers its own categories: two workflows' ``category-1`` are not one family
    in a store); memory and disk are MB (MiB)."""
    name = os.fspath(path)
    try:
        with open_bytes(name) as handle:
            lines = handle.read().decode("utf-8").splitlines()
    except (*READ_ERRORS, UnicodeDecodeError) as err:
        raise cannot_read(name, err) from None
    if not lines or DELIMITER not in lines[0]:
        raise TraceFormatError(f"{name}: not a CCTools task table (no ' -- ' delimited header)")
    result = ImportResult()
    rows = _split_rows(name, lines, result)
    frame = pd.DataFrame([cells for _, cells in rows], columns=list(COLUMNS))
    numbers, bad = numeric_columns(frame, ("memory", "time", "average_cores"))
    stem = trace_name(name)
    workflow = os.path.basename(name).split(".")[0]
    prefix = f"{workflow}:" if workflow not in ("", "-") else ""
    for pos, (number, cells) in enumerate(rows):
        memory_mb, seconds = value(numbers, "memory", pos), value(numbers, "time", pos)
        problem = (
            f"{NOT_A_NUMBER}: {bad.iat[pos].strip()}" if bad.iat[pos]
            else "no memory" if not memory_mb
            else None
        )  # fmt: skip
        if problem:
            result.skipped.append(SkippedRow(name, number, problem))
            continue
        cores = value(numbers, "average_cores", pos)
        result.observations.append(
            completed_observation(
                stem,
                int(cells[0]) if cells[0].isascii() and cells[0].isdigit() else pos,
                f"{prefix}category-{cells[7]}",
                peak_bytes=memory_mb * MIB,  # type: ignore[operator]  # checked above
                wall_seconds=seconds,
                cpu_percent=None if cores is None else cores * 100,
            )
        )
    result.skipped.sort(key=lambda row: row.line)
    if not result.observations:
        raise TraceFormatError(f"{name}: no usable rows ({len(result.skipped)} skipped)")
    return result


def _split_rows(name: str, lines: list[str], result: ImportResult) -> list[tuple[int, list[str]]]:
    """Each data line's number and cells; a line of the wrong width or an out-of-range task_id is
    recorded in ``result.skipped`` instead."""
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(DELIMITER)]
        if len(cells) != len(COLUMNS):
            reason = f"{len(cells)} fields, expected {len(COLUMNS)}"
            result.skipped.append(SkippedRow(name, number, reason, "wrong number of fields"))
        elif cells[0].isascii() and cells[0].isdigit() and int(cells[0]) > INT32:  # the store's key is 32-bit
            reason = f"task_id={cells[0]} is out of range (at most {INT32})"
            result.skipped.append(SkippedRow(name, number, reason, "task_id out of range"))
        else:
            rows.append((number, cells))
    return rows
