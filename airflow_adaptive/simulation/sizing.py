"""The simulator's memory decisions: the provider's own, on a store of this process, at the simulated time.

Each first try and each retry after an OOM kill is sized by the decision a pod gets
(``evaluation/live.py``); with ``online`` history every ended try is recorded as the operator
records it, with ``prior-run`` history the store holds the whole workload from before and a
retry reads the killed try it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.model import MemoryRequest
from airflow_adaptive.evaluation.live import LiveSizing, Try, observation_of, replay_settings
from airflow_adaptive.traces.runs import TaskRun

from .workload import SimTask


class SimSizing:
    def __init__(
        self, tasks: Sequence[SimTask], sizing: SizingSettings, cap_bytes: int, *, online: bool
    ) -> None:
        self.tasks = tasks
        self.cap_bytes = cap_bytes
        self.online = online
        self.live = LiveSizing(replay_settings(replace(sizing, cap_bytes=cap_bytes)), completed=False)
        if not online:  # the prior run: every task finished once before
            self.live.imported(
                [TaskRun(t.family, t.peak_memory_bytes, t.runtime_s, t.input_size_bytes) for t in tasks]
            )

    def _try(self, task_index: int, number: int) -> Try:
        t = self.tasks[task_index]
        user = MemoryRequest(t.request_memory_bytes, t.request_memory_bytes)
        return Try(t.family, str(task_index), number, user, t.input_size_bytes)

    def first(self, task_index: int, now_s: float) -> int:
        """The first try's memory, the try noted as Pending (as the operator notes its pod)."""
        self.live.advance(now_s)
        attempt = self._try(task_index, 1)
        allocation = self.live.decide(attempt).memory_limit_bytes or self.cap_bytes
        self.live.started(attempt, running=False)
        return min(allocation, self.cap_bytes)

    def started(self, task_index: int, number: int, at_s: float) -> None:
        """The try's pod started running: noted again, now."""
        self.live.advance(at_s)
        self.live.started(self._try(task_index, number))

    def ended(self, task_index: int, number: int, memory_bytes: int, ran_s: float, now_s: float) -> None:
        """A try that fitted (online history: recorded)."""
        self.live.advance(now_s)
        tried = self._try(task_index, number)
        if not self.online:
            self.live.store.unmark_unfinished(tried.key)
            return
        allocation = {"request": memory_bytes, "limit": memory_bytes}
        self.live.ended(tried, allocation, self.tasks[task_index].peak_memory_bytes, ran_s, None)

    def given_up(self, task_index: int, number: int) -> None:
        """A try killed at the cap or the last attempt: the task ends unrecorded."""
        self.live.store.unmark_unfinished(self._try(task_index, number).key)

    def retry(self, task_index: int, number: int, memory_bytes: int, ran_s: float, now_s: float) -> int:
        """The memory of the try after OOM-killed try ``number``, which is recorded first (online)."""
        self.live.advance(now_s)
        allocation = {"request": memory_bytes, "limit": memory_bytes}
        killed = observation_of(
            self._try(task_index, number),
            allocation,
            peak_bytes=None,
            wall_seconds=ran_s,
            finished_at=self.live.now(),
        )
        if self.online:
            self.live.record([killed])
        decision = self.live.decide(self._try(task_index, number + 1), None if self.online else killed)
        return min(decision.memory_limit_bytes or self.cap_bytes, self.cap_bytes)
