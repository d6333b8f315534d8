"""WfFormat 1.5 (WfCommons WfInstances) JSON: tasks with their input files and execution records."""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.common import ImportResult, SkippedRow, completed_observation

_INSTANCE_SUFFIX = re.compile(r"_\d+$")


def _number(record: dict[str, Any], key: str) -> float | None:
    raw = record.get(key)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw) or raw < 0:
        raise ValueError(f"{key}={raw!r}")
    return float(raw)


def read_wfformat(path: str | os.PathLike[str]) -> ImportResult:
    """Observations of a WfFormat instance; family = task name, input size = sum of input file sizes."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as handle:
            data = json.load(handle)
        workflow = data["workflow"]
        specs = {t["id"]: t for t in workflow["specification"]["tasks"]}
        files = {f["id"]: f.get("sizeInBytes") for f in workflow["specification"].get("files", [])}
        executions = workflow["execution"]["tasks"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise TraceFormatError(f"{name}: not a WfFormat 1.5 instance ({type(err).__name__}: {err})") from None
    result = ImportResult()
    stem = os.path.basename(name)
    for pos, record in enumerate(executions):
        where = f"task #{pos} ({record.get('id', '?')})"
        spec = specs.get(record.get("id"))
        try:
            peak = _number(record, "memoryInBytes")
            runtime = _number(record, "runtimeInSeconds")
            avg_cpu = _number(record, "avgCPU")
            read, written = _number(record, "readBytes"), _number(record, "writtenBytes")
        except ValueError as err:
            result.skipped.append(SkippedRow(name, pos + 1, f"{where}: not a non-negative number: {err}"))
            continue
        if spec is None or not peak:
            result.skipped.append(
                SkippedRow(
                    name, pos + 1, f"{where}: {'no specification' if spec is None else 'no memoryInBytes'}"
                )
            )
            continue
        family = str(spec.get("name") or _INSTANCE_SUFFIX.sub("", spec["id"]))[:250]
        sizes = [files.get(f) for f in spec.get("inputFiles", [])]
        input_size = int(sum(s for s in sizes if isinstance(s, (int, float)))) if sizes else None
        result.observations.append(
            completed_observation(
                stem,
                pos,
                family,
                peak_bytes=peak,
                wall_seconds=runtime,
                cpu_percent=avg_cpu,
                read_bytes=read,
                write_bytes=written,
                input_size_bytes=input_size,
            )
        )
    if not result.observations:
        raise TraceFormatError(f"{name}: no usable tasks ({len(result.skipped)} skipped)")
    return result
