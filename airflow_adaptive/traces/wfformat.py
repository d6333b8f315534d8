"""WfFormat 1.5 (WfCommons WfInstances) JSON: tasks with their input files and execution records."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from airflow_adaptive.exceptions import TraceFormatError
from airflow_adaptive.traces.common import (
    MAX_NUMBER,
    NOT_A_NUMBER,
    ImportResult,
    SkippedRow,
    completed_observation,
    trace_name,
)
from airflow_adaptive.traces.source import READ_ERRORS, cannot_read, open_bytes

_INSTANCE_SUFFIX = re.compile(r"_\d+$")
_TASK_ID = re.compile(r"_ID\d+$")  # WfCommons' Makeflow and Pegasus instances name a task <kind>_ID<n>


def number(record: dict[str, Any], key: str) -> float | None:
    """A record's number from 0 to ``MAX_NUMBER``, None when absent; anything else is a ValueError."""
    raw = record.get(key)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw <= MAX_NUMBER:  # NaN too
        raise ValueError(f"{key}={raw!r}")
    return float(raw)


@dataclass(frozen=True)
class WfInstance:
    """The parts of a WfFormat 1.5 instance we read: task specifications, execution records, file sizes."""

    specs: list[dict[str, Any]]
    records: list[dict[str, Any]]
    file_sizes: dict[str, Any]

    def input_size_bytes(self, spec: dict[str, Any]) -> int | None:
        """The sum of the task's input file sizes (None when it lists no input files)."""
        sizes = [self.file_sizes.get(f) for f in spec.get("inputFiles", [])]
        return int(sum(s for s in sizes if isinstance(s, (int, float)))) if sizes else None


def bad_instance(
    path: str, err: Exception, kind: type[TraceFormatError] = TraceFormatError
) -> TraceFormatError:
    return kind(f"{path}: not a WfFormat 1.5 instance ({type(err).__name__}: {err})")


class NotAnInstanceError(TraceFormatError):
    """JSON, but no WfFormat instance at all (no top-level ``workflow``): stray JSON in a folder."""


class NotJsonError(NotAnInstanceError):
    """No JSON at all: an instance cut short, or a file that only starts with ``{`` (a template)."""


def load_instance(path: str | os.PathLike[str]) -> WfInstance:
    name = os.fspath(path)
    try:
        with open_bytes(name) as handle:
            document = json.load(handle)
        if not isinstance(document, dict) or "workflow" not in document:
            raise NotAnInstanceError(f"{name}: not a WfFormat 1.5 instance (no top-level 'workflow' object)")
        workflow = document["workflow"]
        return WfInstance(
            list(workflow["specification"]["tasks"]),
            list(workflow["execution"]["tasks"]),
            {f["id"]: f.get("sizeInBytes") for f in workflow["specification"].get("files", [])},
        )
    except TraceFormatError:
        raise
    except json.JSONDecodeError as err:  # "Extra data": a whole other document, e.g. JSON Lines
        stray = NotAnInstanceError if err.msg == "Extra data" else NotJsonError
        raise bad_instance(name, err, stray) from None
    except UnicodeDecodeError as err:  # no JSON text at all (a template in Latin-1)
        raise bad_instance(name, err, NotJsonError) from None
    except OSError as err:
        if err.errno is None:  # a gzip file that is corrupt or cut short: its bytes are the fault
            raise bad_instance(name, err) from None
        raise cannot_read(name, err) from None  # missing, a folder, not allowed, a disk error
    except (*READ_ERRORS, ValueError, KeyError, TypeError) as err:
        raise bad_instance(name, err) from None
    except RecursionError:  # nested deeper than Python's parser goes: no instance is
        raise TraceFormatError(f"{name}: not a WfFormat 1.5 instance (JSON nested too deeply)") from None


def task_family(spec: dict[str, Any]) -> str:
    """A task's family: its name (the store fits long names), else its id without an instance
    number, either without a ``_ID<n>`` task number."""
    named = str(spec.get("name") or _INSTANCE_SUFFIX.sub("", str(spec["id"])))
    return _TASK_ID.sub("", named) or named


def read_wfformat(path: str | os.PathLike[str]) -> ImportResult:
    """Observations of a WfFormat instance; family = task name (without a ``_ID<n>`` task number),
    input size = sum of input file sizes."""
    name = os.fspath(path)
    instance = load_instance(name)
    try:
        specs = {t["id"]: t for t in instance.specs}
    except (KeyError, TypeError) as err:
        raise bad_instance(name, err) from None
    executions = instance.records
    result = ImportResult()
    stem = trace_name(name)
    for pos, record in enumerate(executions):
        where = f"task #{pos} ({record.get('id', '?')})"
        spec = specs.get(record.get("id"))
        try:
            peak = number(record, "memoryInBytes")
            runtime = number(record, "runtimeInSeconds")
            avg_cpu = number(record, "avgCPU")
            read, written = number(record, "readBytes"), number(record, "writtenBytes")
        except ValueError as err:
            kind = NOT_A_NUMBER
            result.skipped.append(SkippedRow(name, pos + 1, f"{where}: {kind}: {err}", kind, by_line=False))
            continue
        if spec is None or not peak:
            kind = "no specification" if spec is None else "no memoryInBytes"
            result.skipped.append(SkippedRow(name, pos + 1, f"{where}: {kind}", kind, by_line=False))
            continue
        family = task_family(spec)
        input_size = instance.input_size_bytes(spec)
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
