"""SIGTERM for the command line: ``timeout``, ``kill`` or a stopped pod unwinds a command as Ctrl-C
does, so what it started stops and its temporary files (profile-node's fio file) go with it."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

TERMINATED_EXIT = 128 + signal.SIGTERM  # 143, as a shell reports a process SIGTERM ended


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM while a command runs."""


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (off the main thread, where Python
    cannot set a handler, nothing changes); the handler before is restored after. A second SIGTERM
    (``timeout`` signals the child, then its group) is ignored, so that it cannot cut short the
    cleanup the first one started. A command that sets its own handler (observe, grow-agent) wins."""

    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(
            signal.SIGTERM, signal.SIG_DFL if before is None else before
        )  # None: set outside Python
