"""Nextflow's human-readable trace values, as the raw numbers a trace written with ``trace.raw = true`` holds.

By default Nextflow formats each trace field by its type (``TraceRecord.FIELDS``): sizes as
``MemoryUnit`` does (``1.2 GB``: one decimal, steps of 1024, units B KB MB GB TB PB EB; ``0`` when
zero), durations as ``Duration`` does (``12ms``, ``4.5s``, ``1d 2h 3m 4s``), percentages as ``98.3%``
and dates as ``yyyy-MM-dd HH:mm:ss.SSS``; ``-`` is a missing value. Each reader takes the cells of a
column that are not plain numbers and returns bytes, milliseconds, percent or milliseconds since
1970, NaN where a cell is none of these (the caller reports it). All are vectorised: a trace of
millions of readable rows is converted a chunk at a time without a Python call per cell.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_STEPS = ("B", "K", "M", "G", "T", "P", "E")  # MemoryUnit.UNITS, each 1024 times the one before
MEMORY_FACTORS = {"": 1.0} | {
    unit: 1024.0**step for step, letter in enumerate(_STEPS) for unit in {letter, letter + "B"}
}
_DURATION_UNITS = {  # Duration's unit words; traces use ms, s, m, h and d
    1.0: ("ms", "milli", "millis"),
    1_000.0: ("s", "sec", "second", "seconds"),
    60_000.0: ("m", "min", "minute", "minutes"),
    3_600_000.0: ("h", "hour", "hours"),
    86_400_000.0: ("d", "day", "days"),
}
DURATION_MS = {unit: ms for ms, units in _DURATION_UNITS.items() for unit in units}
_EPOCH = pd.Timestamp("1970-01-01", tz="UTC")


def _half_up(values: pd.Series) -> pd.Series:
    """Rounded as Java's ``Math.round`` rounds, so a parsed value equals the raw one Nextflow rounded."""
    return np.floor(values + 0.5)


def memory_bytes(text: pd.Series) -> pd.Series:
    """``1.2 GB`` → 1288490189 (Nextflow's ``MemoryUnit`` parses it the same way)."""
    parts = text.str.extract(rf"^\s*{_NUMBER}\s*([A-Za-z]{{0,2}})\s*$")
    factor = parts[1].str.upper().map(MEMORY_FACTORS)
    return _half_up(pd.to_numeric(parts[0], errors="coerce") * factor).astype(float)


def duration_ms(text: pd.Series) -> pd.Series:
    """``1h 2m 3s`` → 3723000, ``4.5s`` → 4500, ``12ms`` → 12; each part rounded to a millisecond."""
    result = pd.Series(np.nan, index=text.index, dtype=float)
    whole = text.str.fullmatch(rf"\s*(?:{_NUMBER}\s*[A-Za-z]+\s*)+").fillna(False).astype(bool)
    if not whole.any():
        return result
    parts = text[whole].str.extractall(rf"{_NUMBER}\s*([A-Za-z]+)")
    ms = _half_up(parts[0].astype(float) * parts[1].map(DURATION_MS))  # NaN: not a unit of time
    total = ms.groupby(level=0).sum(min_count=1)
    unknown = ms.isna().groupby(level=0).any()
    result[total.index] = total.where(~unknown)
    return result


def percent(text: pd.Series) -> pd.Series:
    """``98.3%`` → 98.3 (percent of one core, can exceed 100)."""
    number = text.str.extract(rf"^\s*{_NUMBER}\s*%\s*$")[0]
    return pd.to_numeric(number, errors="coerce").astype(float)


def epoch_ms(text: pd.Series) -> pd.Series:
    """``2024-01-01 00:00:01.234`` → 1704067201234. Nextflow writes the local time of the machine that
    ran the pipeline and does not name its zone: taken as UTC (a date with a zone is converted), so
    a file imports to the same attempts wherever it is imported."""
    when = pd.to_datetime(text.str.strip(), format="ISO8601", utc=True, errors="coerce")
    return ((when - _EPOCH).dt.total_seconds() * 1000).round().astype(float)


READERS: dict[str, Callable[[pd.Series], pd.Series]] = {
    "mem": memory_bytes,
    "time": duration_ms,
    "perc": percent,
    "date": epoch_ms,
}
