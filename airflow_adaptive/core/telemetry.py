"""Reading the lines the container wrapper appends to the termination message: the usage line and,
when the pod staged inputs, the staging report."""

from __future__ import annotations

import json
import math
from typing import Any

from .growth_plan import PROFILE_FRACTIONS
from .locality import StageReport
from .model import PeakKind, Usage

USAGE_PREFIX = "adaptive.airflow.io/usage="
STAGE_PREFIX = "adaptive.airflow.io/stage="  # the staging report, on its own line before the usage

_INT_FIELDS = ("peak_memory_bytes", "read_bytes", "write_bytes")
_FLOAT_FIELDS = ("cpu_core_seconds", "wall_seconds")


def parse_usage(message: str | None) -> Usage | None:
    """The last usage line of a termination message, or None when there is none or it is malformed.

    Fields that are missing, negative or not numbers stay None: they are unknown, not zero.
    """
    raw = _last_record(message, USAGE_PREFIX)
    if raw is None:
        return None
    ints = {name: _whole(raw.get(name)) for name in _INT_FIELDS}
    floats = {name: _number(raw.get(name)) for name in _FLOAT_FIELDS}
    peak = ints["peak_memory_bytes"]
    return Usage(
        peak_memory_bytes=peak,
        cpu_core_seconds=floats["cpu_core_seconds"],
        wall_seconds=floats["wall_seconds"],
        read_bytes=ints["read_bytes"],
        write_bytes=ints["write_bytes"],
        peak_kind=PeakKind.MEASURED if peak else PeakKind.NONE,
    )


def parse_memory_profile(message: str | None) -> tuple[float, ...] | None:
    """The usage line's memory profile: ascending, non-negative seconds, one per step (``core/growth.py``);
    None when absent or malformed."""
    raw = _last_record(message, USAGE_PREFIX)
    values = raw.get("memory_profile_s") if raw else None
    if not isinstance(values, list) or len(values) != len(PROFILE_FRACTIONS):
        return None
    times = [_number(v) for v in values]
    if any(t is None for t in times):
        return None
    ordered = tuple(float(t) for t in times if t is not None)
    return ordered if list(ordered) == sorted(ordered) else None


def parse_memory_rebound(message: str | None) -> int | None:
    """The usage line's memory rebound in bytes (``core/growth_plan.py: rebound_of``); None when the
    task never fell, the line has none, or it is not a non-negative number."""
    raw = _last_record(message, USAGE_PREFIX)
    return _whole(raw.get("memory_rebound_bytes")) if raw else None


def parse_stage_report(*messages: str | None) -> StageReport | None:
    """The staging report from the first message that has one: the main container's (the wrapper
    copies the report there), then the staging container's own."""
    for message in messages:
        raw = _last_record(message, STAGE_PREFIX)
        if raw is None:
            continue
        try:
            return StageReport(
                tuple(map(str, raw.get("hits", []))),
                tuple(map(str, raw.get("copied", []))),
                {str(k): str(v) for k, v in dict(raw.get("failed", {})).items()},
                tuple(map(str, raw.get("evicted", []))),
                int(raw.get("copied_bytes", 0)),
            )
        except (ValueError, TypeError, AttributeError):
            continue
    return None


def _last_record(message: str | None, prefix: str) -> dict[str, Any] | None:
    """The JSON object on the last line that starts with ``prefix``; None when none is there or it is malformed."""
    lines = [line for line in (message or "").splitlines() if line.startswith(prefix)]
    if not lines:
        return None
    try:
        raw = json.loads(lines[-1][len(prefix) :])
    except json.JSONDecodeError:
        return None
    return raw if isinstance(raw, dict) else None


def _number(value: object) -> float | None:
    """A finite, non-negative number, else None (booleans and strings are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


MAX_COUNT = 1 << 62  # above any real byte count, and within the store's 64-bit columns


def _whole(value: object) -> int | None:
    """A non-negative whole count; None for anything else, or one too large to be real."""
    number = _number(value)
    return None if number is None or number > MAX_COUNT else int(number)
