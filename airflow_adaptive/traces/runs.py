"""One task instance of a trace, as the replay and the simulator need it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskRun:
    """One task instance of a trace, as the replay needs it."""

    family: str
    peak_bytes: int
    wall_seconds: float
    input_size_bytes: int | None = None
    user_request_bytes: int | None = None
    start_s: float | None = None  # when it started; None: trace order only
    finish_s: float | None = None
    image: str | None = None  # what it runs, where the trace says (warm starts compare families by it)
    program: str | None = None
