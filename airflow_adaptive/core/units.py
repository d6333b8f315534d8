"""Byte units, defined once, and human-readable byte counts and durations for explanations."""

from __future__ import annotations

MIB = 1024**2
GIB = 1024**3
PIB = 1024**5
MB = 10**6  # decimal units: trace sizes and simulated shared storage
GB = 10**9


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and the noun in its number: "1 attempt", "2 attempts" ("1 family", "2 families")."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def whole_mib_up(value_bytes: int) -> int:
    """MiB, rounded up: how a pod's memory quantity holds bytes (``kubernetes/quantity.py``)."""
    return -(-value_bytes // MIB)


def as_pod_holds(value_bytes: int) -> int:
    """Bytes as a pod's memory quantity holds them: whole MiB, rounded up."""
    return whole_mib_up(value_bytes) * MIB


def format_bytes(value: float | None) -> str:
    """Binary units, three significant digits: 1.5 GiB, 250 MiB."""
    if value is None:
        return "unset"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.3g} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    """Three significant digits in the largest fitting unit: 45 s, 12.5 min, 3.2 h."""
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"
