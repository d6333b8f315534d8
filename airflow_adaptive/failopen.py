"""Failing open: the reason the adaptive machinery stood aside is logged once per process."""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

log = logging.getLogger("airflow_adaptive")
_lock = threading.Lock()
_warned: set[str] = set()
T = TypeVar("T")


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


def airflow_start_failure(err: BaseException) -> str | None:
    """Why Airflow could not be imported, when ``err`` was raised by its import: importing Airflow
    sets up its database from the configuration, so a malformed ``sql_alchemy_conn`` or a missing
    database driver stops it there (None: raised anywhere else, a fault to show in full)."""
    frames = traceback.extract_tb(err.__traceback__)
    if not any(Path(frame.filename).parts[-2:] == ("airflow", "__init__.py") for frame in frames):
        return None
    # Where in Airflow's set-up it stopped: its database's (URL, engine, driver), or elsewhere.
    database = any(word in frame.name for frame in frames for word in ("conn", "orm", "engine", "adapter"))
    check = "[database] sql_alchemy_conn and its database driver" if database else "the Airflow configuration"
    why = first_line(err, 400)  # a missing driver's advice runs to some 250 characters
    return f"Airflow cannot start with this configuration ({type(err).__name__}: {why}); check {check}"


def failure_reason(err: BaseException) -> str:
    """A failed call to the cluster in one line: an API answer's status and reason, the cause of
    urllib3's retries (its text starts with the URL), else the error's first line."""
    status, reason = getattr(err, "status", None), getattr(err, "reason", None)
    if isinstance(status, int) and isinstance(reason, str):  # the client's ApiException
        return f"{status} {reason}"
    if isinstance(reason, BaseException):
        return f"{type(reason).__name__}: {first_line(reason)}"
    return f"{type(err).__name__}: {first_line(err)}"


def one_round(what: str, round_: Callable[[], T]) -> T:
    """A command's single round (``--once``): an unreachable or refusing API is one line naming
    ``what`` and the cause, not a traceback."""
    from airflow_adaptive.exceptions import ClusterUnavailableError

    try:
        return round_()
    except ClusterUnavailableError:
        raise
    except Exception as err:
        raise ClusterUnavailableError(f"{what} failed ({failure_reason(err)})") from None


class LoopFailures:
    """A loop's failed rounds (the observer's cycles, the grow agent's): each reason logged once
    while it lasts, and a line when a round works again, not a warning every few seconds."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger, self.what = logger, what
        self.reason: str | None = None

    def failed(self, reason: str) -> None:
        if reason != self.reason:
            self.logger.warning("%s failed (%s); trying again", self.what, reason)
        self.reason = reason

    def worked(self) -> None:
        if self.reason is not None:
            self.logger.warning("%s works again", self.what)
        self.reason = None


def quiet_retries() -> None:
    """A command that says a failed cluster call in one line: urllib3's warning per retry before it
    would only repeat that line three times."""
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
