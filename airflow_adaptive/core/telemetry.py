"""Reading the usage line the container wrapper appends to the termination message."""

from __future__ import annotations

import json
import math

from .model import PeakKind, Usage

USAGE_PREFIX = "adaptive.airflow.io/usage="
STAGE_PREFIX = "adaptive.airflow.io/stage="  # the staging report, on its own line before the usage

_INT_FIELDS = ("peak_memory_bytes", "read_bytes", "write_bytes")
_FLOAT_FIELDS = ("cpu_core_seconds", "wall_seconds")


def parse_usage(message: str | None) -> Usage | None:
    """The last usage line of a termination message, or None when there is none or it is malformed.

    Fields that are missing, negative or not numbers stay None: they are unknown, not zero.
    """
    if not message:
        return None
    lines = [line for line in message.splitlines() if line.startswith(USAGE_PREFIX)]
    if not lines:
        return None
    try:
        raw = json.loads(lines[-1][len(USAGE_PREFIX) :])
    except json.JSONDecodeError:
        return None
    if not isinstance(raw, dict):
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


def _number(value: object) -> float | None:
    """A finite, non-negative number, else None (booleans and strings are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _whole(value: object) -> int | None:
    number = _number(value)
    return None if number is None else int(number)
