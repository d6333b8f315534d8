"""Failing open: the reason the adaptive machinery stood aside is logged once per process."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("airflow_adaptive")
_lock = threading.Lock()
_warned: set[str] = set()


def warn_once(reason: str, consequence: str = "pods keep the user's resources") -> None:
    """Log a fail-open reason once per process (a busy scheduler would repeat it per pod)."""
    with _lock:
        if reason in _warned:
            return
        _warned.add(reason)
    log.warning("airflow-adaptive: %s; %s", reason, consequence)


def forget_warnings() -> None:
    """Let every reason be logged again (tests)."""
    with _lock:
        _warned.clear()


def first_line(err: BaseException, limit: int = 200) -> str:
    """An error's first line for a log reason, or its type's name when it has no message."""
    lines = str(err).splitlines()
    return lines[0][:limit] if lines else type(err).__name__
