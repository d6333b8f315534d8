"""How long attempts are kept: the one rule ``history prune``, its options and ``[adaptive]`` share."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

DAYS_RULE = "a number of days >= 0 (0: no limit)"


def check_keep_days(days: float) -> float:
    """``days`` when it can be a retention; ValueError otherwise. NaN compares false with every
    cut-off, so it would silently keep everything: a mistake, not a limit. Infinity keeps everything."""
    if math.isnan(days) or days < 0:
        raise ValueError(f"is not {DAYS_RULE}")
    return days


def prune_cutoff(now: datetime, keep_days: float) -> datetime | None:
    """The finish time before which attempts are removed, or None to keep them all: no day limit (0),
    or a cut-off before the earliest date a datetime holds (999999 days, 1e12, infinity), where
    nothing can have finished."""
    if not keep_days > 0:  # 0, and NaN should the edges let it through
        return None
    try:
        return now - timedelta(days=keep_days)
    except OverflowError:  # beyond timedelta's range, or before year 1
        return None
