"""One attempt's use of the history store: opened once, read once per row, given up on once.

A pod (or a CLI call, or one replayed decision) holds one session: it opens the store the first
time a role asks, keeps each family's row and the store-wide distributions it read, and after the
store failed it does not try again, so a pod waits for an unavailable store at most once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Generic, TypeVar

from airflow_adaptive.core.node_groups import StoredNode
from airflow_adaptive.core.normalise import fit_key
from airflow_adaptive.core.rollup import Distributions
from airflow_adaptive.exceptions import HistoryUnavailableError
from airflow_adaptive.failopen import first_line, warn_once
from airflow_adaptive.store.api import FamilyState, SizingStore

S = TypeVar("S", bound=SizingStore, covariant=True)
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class StoreSession(Generic[S]):
    """The store of one attempt, with what it has read; ``clock``: the time decisions are made at
    (a replay's simulated time)."""

    def __init__(self, factory: Callable[[], S], clock: Clock = utc_now) -> None:
        self._factory = factory
        self.clock = clock
        self._opened: S | None = None
        self._down: str | None = None  # why the store failed; not asked again
        self._down_at_s = 0.0  # monotonic
        self._families: dict[str, FamilyState | None] = {}
        self._distributions: Distributions | None = None
        self._nodes: list[StoredNode] | None = None

    def store(self) -> S:
        if self._down is not None:
            raise HistoryUnavailableError(self._down)
        if self._opened is None:
            self._opened = self._factory()
        return self._opened

    @property
    def down(self) -> bool:
        """Whether the store failed in this session (and is not asked again yet)."""
        return self._down is not None

    def unavailable(self, err: HistoryUnavailableError) -> str:
        """Remember (and log once) that the store is down; returns why, in one line."""
        message = first_line(err, 300)
        if not message.startswith("history store unavailable"):
            message = f"history store unavailable: {message}"
        self._down = message
        self._down_at_s = time.monotonic()
        warn_once(self._down)
        return self._down

    def ask_again_after(self, seconds: float) -> None:
        """Ask a store that failed ``seconds`` ago or longer again (an attempt's record, hours after
        its decision found the store down)."""
        if self._down is not None and time.monotonic() - self._down_at_s >= seconds:
            self._down = None

    def family(self, task_family: str) -> FamilyState | None:
        if task_family not in self._families:
            self._families[task_family] = self.store().family(task_family)
        return self._families[task_family]

    def has_read(self, task_family: str) -> bool:
        return task_family in self._families

    def read_families(self, task_families: Sequence[str]) -> None:
        """Read a page of families' rows in one query, for the decisions that follow."""
        found = self.store().families_named(task_families)  # keyed as stored (fit_key)
        self._families.update({name: found.get(fit_key(name)) for name in task_families})

    def distributions(self) -> Distributions:
        if self._distributions is None:
            self._distributions = self.store().distributions()
        return self._distributions

    def nodes(self) -> list[StoredNode]:
        if self._nodes is None:
            self._nodes = self.store().nodes()
        return self._nodes
