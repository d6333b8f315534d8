"""The history store's interface, by role, in core types only.

:class:`HistoryStore` is every role together, as
:class:`~airflow_adaptive.store.sql.SqlHistoryStore` (the provider's tables in
Airflow's metadata database) implements it. A caller depends on the roles it
uses: the memory decision and recording on :class:`SizingStore`, which
:class:`~airflow_adaptive.store.process.ProcessHistoryStore` (history held in
one process: the replay's, the simulator's and the what-if's) implements too.
Every method raises :class:`HistoryUnavailableError` when the store cannot
answer now, and :class:`HistoryRejectedError` when it refused this input for
good; nothing else escapes for store trouble.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from typing import Protocol

from airflow_adaptive.core.fitted_model import FittedModel
from airflow_adaptive.core.grouping import Grouping, NodeProfile
from airflow_adaptive.core.lff import FamilyProgress
from airflow_adaptive.core.locality import CachedInput, InputState, InputUse
from airflow_adaptive.core.model import IMPORTED_DAG_ID, Observation, TaskKey
from airflow_adaptive.core.node_groups import StoredNode
from airflow_adaptive.core.rollup import DayTotals, Distributions, FamilyRollup
from airflow_adaptive.core.sizing.similar import Identity


@dataclass(frozen=True)
class FamilyState:
    """What a decision needs of one family: its rollup and its fitted model (one row)."""

    rollup: FamilyRollup
    model: FittedModel | None = None

    @property
    def progress(self) -> FamilyProgress:
        """Its successful and failed attempts (least-finished-first's keys)."""
        return FamilyProgress.of(self.rollup.attempts, self.rollup.completed)


FAMILY_SORTS = (
    "task_family",
    "attempts",
    "completed",
    "oom_killed",
    "retries",
    "requested_byte_seconds",
    "used_byte_seconds",
    "user_requested_byte_seconds",
    "killed_byte_seconds",
    "last_day",
)


class Source(str, Enum):
    """Where attempts came from: Airflow ran them (``live``) or a trace import recorded them."""

    LIVE = "live"
    IMPORTED = "imported"

    @classmethod
    def of_dag(cls, dag_id: str) -> Source:
        return cls.IMPORTED if dag_id == IMPORTED_DAG_ID else cls.LIVE


@dataclass(frozen=True)
class TotalsQuery:
    """Which attempts to total: DAGs (None: all), days (inclusive, UTC), a family name fragment, and
    their source (None: live and imported together)."""

    dag_ids: frozenset[str] | None = None
    start: date | None = None
    end: date | None = None
    search: str = ""
    task_family: str | None = None
    source: Source | None = None


@dataclass(frozen=True)
class FamilyTotals:
    task_family: str
    totals: DayTotals
    last_day: date


@dataclass(frozen=True)
class RecordResult:
    new: int  # attempts that were not in the store
    replaced: int  # attempts recorded again (same key): the newer values replaced the older
    refitted: tuple[str, ...] = ()  # families whose model was fitted again
    repeated: int = 0  # attempts given more than once in the same call: the last given was kept


@dataclass(frozen=True)
class PruneResult:
    attempts: int  # removed (or, on a dry run, that would be)
    families: int  # families that lost attempts
    dry_run: bool


class AttemptWrites(Protocol):
    """Recording attempts, and noting the ones still running."""

    def record(self, observations: Sequence[Observation]) -> RecordResult:
        """Record attempts (idempotent on the attempt key) and learn from them, in one transaction."""
        ...

    def record_batches(self, batches: Iterable[Sequence[Observation]]) -> RecordResult:
        """:meth:`record` of every batch in one transaction, taking one batch at a time (a trace
        file too large to hold); models are refitted once, after the last batch. An error from the
        iterable rolls the whole transaction back."""
        ...

    def mark_unfinished(
        self, key: TaskKey, task_family: str, started_at: datetime, *, running: bool = True
    ) -> None:
        """Note an attempt whose pod is being created (``running=False``: Pending from
        ``started_at`` until noted again) or runs since ``started_at`` (idempotent), replacing the
        notes of the task instance's earlier tries; recording the attempt removes its note."""
        ...

    def unmark_unfinished(self, key: TaskKey) -> None:
        """Remove an attempt's note when it ended without being recorded (killed, no pod)."""
        ...


class SizingReads(Protocol):
    """What a memory (and CPU) decision reads."""

    def count_unfinished(
        self,
        task_family: str,
        *,
        started_after: datetime,
        started_before: datetime,
        running_only: bool = False,
    ) -> int:
        """The family's noted, unrecorded attempts that started in (``started_after``, ``started_before``)
        (``running_only``: those noted as running, not Pending)."""
        ...

    def family(self, task_family: str) -> FamilyState | None:
        """One family's rollup and model by primary key; None for a family never recorded."""
        ...

    def families_named(self, task_families: Sequence[str]) -> dict[str, FamilyState]:
        """:meth:`family` of each of a page of families, in one read; a family never recorded is
        left out."""
        ...

    def history(
        self, task_family: str, *, limit: int = 500, dag_ids: frozenset[str] | None = None
    ) -> list[Observation]:
        """The family's most recent attempts (of these DAGs only, when given), oldest first."""
        ...

    def attempt(self, key: TaskKey) -> Observation | None: ...

    def attempts_for_try(
        self, dag_id: str, task_id: str, try_number: int, *, limit: int = 200
    ) -> list[Observation]:
        """Recent attempts of a task at one try number (for callers that only know sanitised run ids)."""
        ...

    def distributions(self) -> Distributions:
        """Store-wide peaks and families' mean demands and successes (one row)."""
        ...

    def donor_candidates(self, *, limit: int) -> list[tuple[Identity, int]]:
        """Families with attempts, most first: what each runs and its usable samples (a cold family's
        warm start compares them, core/sizing/similar.py); four columns, no models."""
        ...

    def progress(self, task_family: str) -> FamilyProgress | None:
        """The family's successful and failed attempts (two columns of its row, by primary key);
        None for a family never recorded."""
        ...

    def nodes(self) -> list[StoredNode]:
        """The profiled nodes (the largest bounds a CPU request; placement groups them)."""
        ...


class SizingStore(AttemptWrites, SizingReads, Protocol):
    """What sizing and recording need: an in-process store is enough (the replay's)."""


class ReportReads(Protocol):
    """What the UI and the commands total and list."""

    def newest_requests(
        self, task_families: Sequence[str], *, dag_ids: frozenset[str] | None = None
    ) -> dict[str, int | None]:
        """Each family's newest attempt's user memory request (of these DAGs only, when given), in
        one read for a page of families; None: no request, or no such attempt."""
        ...

    def families(self, *, limit: int = 100, offset: int = 0) -> list[FamilyRollup]:
        """Rollups, most attempts first."""
        ...

    def family_count(self) -> int: ...

    def family_dags(self, task_family: str) -> list[str]:
        """The DAGs whose attempts the family has."""
        ...

    def day_totals(self, query: TotalsQuery) -> list[tuple[date, DayTotals]]:
        """Totals per day over the matching families and DAGs, oldest day first."""
        ...

    def family_totals(
        self,
        query: TotalsQuery,
        *,
        sort: str = "attempts",
        descending: bool = True,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[FamilyTotals], int]:
        """A page of families with their totals over the matching DAGs and days, and how many match."""
        ...


class NodeWrites(Protocol):
    def save_nodes(self, profiles: Sequence[NodeProfile], grouping: Grouping) -> None:
        """Replace the node set: profiles with their group; nodes no longer present are removed."""
        ...


class InputStore(Protocol):
    """Declared inputs: their reads, sizes and staged copies."""

    def input_state(self, uris: Sequence[str], keys: Sequence[str]) -> InputState:
        """Earlier reads and known sizes of declared inputs (by URI), and the nodes holding staged
        copies (by content key)."""
        ...

    def record_inputs(
        self, node: str | None, uses: Sequence[InputUse], evicted: Sequence[str], dag_id: str | None = None
    ) -> None:
        """Count an attempt's input reads and that ``dag_id`` read them; on ``node``, keep the copies it
        holds and drop the ones it evicted or failed to find."""
        ...

    def cached_inputs(self, dag_ids: frozenset[str] | None = None) -> list[CachedInput]:
        """Staged copies by node, most recently used first (with ``dag_ids``: of inputs they read)."""
        ...


class Maintenance(Protocol):
    def prune(
        self, *, keep_attempts: int, keep_days: float, now: datetime | None = None, dry_run: bool = False
    ) -> PruneResult:
        """Remove attempts beyond the newest ``keep_attempts`` per family or older than ``keep_days``
        (0 turns a limit off); rollups keep their totals."""
        ...

    def rebuild(self, *, fit_models: bool = True) -> int:
        """Recompute every rollup, the distributions and (unless told not to) every model from the
        stored attempts; returns the number of families. Totals of pruned attempts are lost."""
        ...


class HistoryStore(SizingStore, ReportReads, NodeWrites, InputStore, Maintenance, Protocol):
    """Every role: the provider's tables (``store/sql.py``)."""
