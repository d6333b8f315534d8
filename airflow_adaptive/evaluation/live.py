"""A replay's attempts sized by the decision a pod gets, and recorded as a finished pod is.

:class:`LiveSizing` keeps a :class:`~airflow_adaptive.store.process.ProcessHistoryStore` and a
simulated clock. Each replayed try is sized by the memory decision of an attempt's advisor
(:class:`~airflow_adaptive.advice.memory_advice.MemoryAdvice`, the operator's and the hook's), noted as started and recorded through the store's
recording and learning code, so every figure the replay, the simulator and the what-if print is
measured on the code that sizes pods. ``journal``, when given, lists every store write and decision
in order, so a test can repeat them against the SQL store.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_adaptive.advice.memory_advice import MemoryAdvice
from airflow_adaptive.advice.session import StoreSession
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.model import (
    Decision,
    ExitReason,
    MemoryRequest,
    Observation,
    PeakKind,
    TaskKey,
    Usage,
)
from airflow_adaptive.core.modes import Mode
from airflow_adaptive.options import OPTIONS
from airflow_adaptive.store.learning import Learning
from airflow_adaptive.store.process import EPOCH, ProcessHistoryStore
from airflow_adaptive.traces.runs import TaskRun

REPLAY_DAG = "replay"  # the DAG id replayed attempts are recorded under


def replay_settings(sizing: SizingSettings, history_window: int | None = None) -> AdaptiveSettings:
    """Settings for decisions made in this process on its own store: the sizing given, every other
    option at its default (nothing here reads Airflow's configuration)."""
    window = history_window or int(OPTIONS["history_window"][1])
    return AdaptiveSettings(
        history_conn_id="",
        store_timeout_seconds=0.0,
        history_window=window,
        retention_attempts=0,
        retention_days=0.0,
        mode=Mode.OFF,
        placement_live_load=False,
        lff_failures=OPTIONS["lff_failures"][1],
        priority_classes=False,
        metrics_sample_interval_seconds=0.0,
        spool_dir="",
        sizing=sizing,
    )


@dataclass(frozen=True)
class Try:
    """One replayed try of a task: what it asked for and runs."""

    family: str
    task: str  # the task instance, unique in the replay
    number: int
    user: MemoryRequest
    input_size_bytes: int | None = None
    image: str | None = None
    program: str | None = None

    @property
    def key(self) -> TaskKey:
        return TaskKey(REPLAY_DAG, self.family, self.task, -1, self.number)


class LiveSizing:
    """The replay's store, clock and decisions."""

    def __init__(
        self, settings: AdaptiveSettings, journal: list[tuple[Any, ...]] | None = None, *, completed: bool
    ) -> None:
        """``completed``: a success is recorded when it finishes (else at once: sequential history)."""
        self.settings = settings
        self.store = ProcessHistoryStore(Learning(settings.sizing, settings.history_window))
        self.now_s = 0.0
        self.journal = journal
        self.completed = completed
        self._running: list[tuple[float, int, Observation]] = []  # (finish time, order, record): a heap
        self._order = 0

    def imported(self, runs: Sequence[TaskRun]) -> None:
        """History known before the replay starts (another workflow's trace), recorded in one batch."""
        if runs:
            user = MemoryRequest()
            self.record(
                [
                    observation_of(
                        Try(r.family, f"imported{i}", 1, user, r.input_size_bytes, r.image, r.program),
                        {"request": None, "limit": None},
                        peak_bytes=r.peak_bytes,
                        wall_seconds=max(r.wall_seconds, 1e-3),
                        finished_at=EPOCH,
                    )
                    for i, r in enumerate(runs)
                ]
            )

    def advance(self, now_s: float) -> None:
        """Move the clock to ``now_s``, recording every try that ended by then."""
        self.now_s = max(self.now_s, now_s)
        while self._running and self._running[0][0] <= self.now_s:
            self.record([heapq.heappop(self._running)[2]])

    def ended(
        self,
        attempt: Try,
        allocation: Mapping[str, int | None],
        peak_bytes: int | None,
        wall_seconds: float,
        finish_s: float | None,
    ) -> None:
        """A try that ended (``peak_bytes`` None: OOM-killed): recorded when it ends, ``finish_s`` or
        ``wall_seconds`` from now (completed history), or at once (sequential)."""
        finish = self.now_s + wall_seconds if finish_s is None else finish_s
        at = EPOCH + timedelta(seconds=finish if self.completed else self.now_s)
        record = observation_of(
            attempt, allocation, peak_bytes=peak_bytes, wall_seconds=wall_seconds, finished_at=at
        )
        if not self.completed:
            self.record([record])
            return
        self._order += 1
        heapq.heappush(self._running, (finish, self._order, record))

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.now_s)

    def decide(self, attempt: Try, previous: Observation | None = None) -> Decision:
        """The operator's memory decision for this try at the current time; the previous try is
        ``previous``, else read from the store as the operator reads it."""
        memory = MemoryAdvice(self.settings, StoreSession(lambda: self.store, self.now))  # one per try
        decision = memory.decide(
            attempt.family,
            attempt.user,
            attempt.key,
            previous_attempt=previous,
            input_size_bytes=attempt.input_size_bytes,
            image=attempt.image,
            program=attempt.program,
        )
        if self.journal is not None:
            self.journal.append(("decide", attempt, self.now(), decision.memory_request_bytes))
        return decision

    def started(self, attempt: Try, *, running: bool = True) -> None:
        """The try's pod was created (``running=False``: Pending until noted again) or runs now."""
        self.store.mark_unfinished(attempt.key, attempt.family, self.now(), running=running)
        if self.journal is not None:
            self.journal.append(("start", attempt.key, attempt.family, self.now(), running))

    def record(self, observations: list[Observation]) -> None:
        self.store.record(observations)
        if self.journal is not None:
            self.journal.append(("record", observations))


def observation_of(
    attempt: Try,
    allocation: Mapping[str, int | None],
    *,
    peak_bytes: int | None,
    wall_seconds: float,
    finished_at: datetime,
) -> Observation:
    """What the operator records of a replayed try: ``peak_bytes`` None for an OOM kill (censored at
    its limit)."""
    killed = peak_bytes is None
    usage = Usage(
        peak_memory_bytes=allocation["limit"] if killed else peak_bytes,
        wall_seconds=wall_seconds,
        peak_kind=PeakKind.CENSORED if killed else PeakKind.MEASURED,
    )
    return Observation(
        attempt.key,
        attempt.family,
        usage,
        ExitReason.OOM_KILLED if killed else ExitReason.COMPLETED,
        memory_request_bytes=allocation["request"],
        memory_limit_bytes=allocation["limit"],
        input_size_bytes=attempt.input_size_bytes,
        finished_at=finished_at.astimezone(timezone.utc),
        user_request_bytes=attempt.user.request_bytes,
        image=attempt.image,
        program=attempt.program,
    )
