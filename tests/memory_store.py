"""A complete history store in memory, for unit tests: the process store with every other role and a
fault switch.

It is :class:`~airflow_adaptive.store.process.ProcessHistoryStore` (the same recording and learning
code as the SQL store), plus the UI's totals, nodes, inputs and maintenance, one lock, a transaction
that rolls back, and ``faults``: ``down`` (every call is unavailable), ``slow_seconds`` (every call
waits first), ``corrupt_models`` (stored models are unreadable documents, as after a manual edit).
``calls`` counts round trips.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from typing import Any

from airflow_adaptive.core.grouping import Grouping, NodeProfile
from airflow_adaptive.core.locality import CachedInput, InputState, InputUse
from airflow_adaptive.core.model import Observation, TaskKey
from airflow_adaptive.core.node_groups import StoredNode
from airflow_adaptive.core.normalise import fit_key, without_nul
from airflow_adaptive.core.retention import prune_cutoff
from airflow_adaptive.core.rollup import DayKey, DayTotals
from airflow_adaptive.core.unfinished import STALE_AFTER_S
from airflow_adaptive.exceptions import HistoryUnavailableError, InvalidSettingError
from airflow_adaptive.store.api import (
    FAMILY_SORTS,
    FamilyState,
    FamilyTotals,
    PruneResult,
    RecordResult,
    Source,
    TotalsQuery,
)
from airflow_adaptive.store.learning import DEFAULT_LEARNING, Learning
from airflow_adaptive.store.process import EPOCH as _EPOCH
from airflow_adaptive.store.process import ProcessHistoryStore
from airflow_adaptive.store.rebuild import rebuild_states


@dataclass
class Faults:
    down: bool = False
    slow_seconds: float = 0.0
    corrupt_models: bool = False


class InMemoryHistoryStore(ProcessHistoryStore):
    """:class:`~airflow_adaptive.store.api.HistoryStore` in dictionaries (a test double)."""

    def __init__(self, learning: Learning = DEFAULT_LEARNING) -> None:
        super().__init__(learning)
        self.faults = Faults()
        self._lock = threading.RLock()
        self._inputs: dict[str, tuple[int, int | None]] = {}  # uri -> reads, size
        self._cached: dict[tuple[str, str], CachedInput] = {}  # (node, content key) -> copy
        self._input_dags: dict[str, set[str]] = {}  # uri -> DAGs that read it
        self.calls = 0  # store round trips, for tests that count them

    def _enter(self) -> None:
        self.calls += 1
        if self.faults.slow_seconds:
            time.sleep(self.faults.slow_seconds)
        if self.faults.down:
            raise HistoryUnavailableError("history store unavailable: the in-memory store is switched off")

    _STATE = (
        "_attempts",
        "_ordered",
        "_families",
        "_distributions",
        "_next_id",
        "_days",
        "_unfinished",
        "_running",
    )

    def record_batches(self, batches: Iterable[Sequence[Observation]]) -> RecordResult:
        with self._lock:
            snapshot = copy.deepcopy({name: getattr(self, name) for name in self._STATE})
            try:
                return super().record_batches(batches)
            except BaseException:  # one transaction: all or nothing
                for name, value in snapshot.items():
                    setattr(self, name, value)
                raise

    def family(self, task_family: str) -> FamilyState | None:
        with self._lock:
            state = super().family(task_family)
        if self.faults.corrupt_models and state is not None and state.model is not None:
            bad = replace(state.model, state={"learnt": {"not a fitted attribute": 1}})
            return replace(state, model=bad)
        return state

    def distributions(self) -> Any:
        return copy.deepcopy(super().distributions())

    def newest_requests(
        self, task_families: Sequence[str], *, dag_ids: frozenset[str] | None = None
    ) -> dict[str, int | None]:
        newest = {name: self.history(name, limit=1, dag_ids=dag_ids) for name in task_families}
        return {
            fit_key(name): found[-1].user_request_bytes if found else None for name, found in newest.items()
        }

    def _matching(self, query: TotalsQuery) -> list[tuple[DayKey, DayTotals]]:
        with self._lock:
            self._enter()
            items = list(self._days.items())
        return [
            ((family, dag, day), t)
            for (family, dag, day), t in items
            if t.attempts
            and (query.dag_ids is None or dag in query.dag_ids)
            and (query.start is None or day >= query.start)
            and (query.end is None or day <= query.end)
            and (query.task_family is None or family == query.task_family)
            and (query.source is None or Source.of_dag(dag) is query.source)
            and without_nul(query.search).lower() in family.lower()
        ]

    def family_dags(self, task_family: str) -> list[str]:
        task_family = fit_key(task_family)
        return sorted({dag for (family, dag, _), _t in self._matching(TotalsQuery(task_family=task_family))})

    def day_totals(self, query: TotalsQuery) -> list[tuple[date, DayTotals]]:
        by_day: dict[date, DayTotals] = {}
        for (_, _, day), t in self._matching(query):
            by_day[day] = by_day.get(day, DayTotals()).plus(t)
        return sorted(by_day.items())

    def family_totals(
        self,
        query: TotalsQuery,
        *,
        sort: str = "attempts",
        descending: bool = True,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[FamilyTotals], int]:
        if sort not in FAMILY_SORTS:
            raise InvalidSettingError(f"sort must be one of {', '.join(FAMILY_SORTS)}")
        by_family: dict[str, FamilyTotals] = {}
        for (family, _, day), t in self._matching(query):
            known = by_family.get(family)
            merged = known.totals.plus(t) if known else t
            by_family[family] = FamilyTotals(family, merged, max(day, known.last_day) if known else day)

        def key(f: FamilyTotals) -> Any:
            return (
                f.task_family.lower()  # as SQL's lower(): names sort case aside
                if sort == "task_family"
                else f.last_day
                if sort == "last_day"
                else getattr(f.totals, sort)
            )

        ordered = sorted(sorted(by_family.values(), key=lambda f: f.task_family), key=key, reverse=descending)
        return ordered[offset : offset + limit], len(ordered)

    def family_count(self) -> int:
        return len(self.families(limit=10**9))

    def save_nodes(self, profiles: Sequence[NodeProfile], grouping: Grouping) -> None:
        now = datetime.now(timezone.utc)
        with self._lock:
            self._enter()
            self._nodes = {}
            for p in profiles:
                group = grouping.group_of(p.node)
                ranks = dict(group.ranks) if group else {}
                self._nodes[p.node] = StoredNode(p, group.id if group else None, ranks, now)
            self._cached = {k: c for k, c in self._cached.items() if k[0] in self._nodes}

    def input_state(self, uris: Sequence[str], keys: Sequence[str]) -> InputState:
        with self._lock:
            self._enter()
            known = {u: self._inputs[u] for u in uris if u in self._inputs}
            holders = {k: tuple(sorted(n for n, key in self._cached if key == k)) for k in keys}
        return InputState(
            {u: reads for u, (reads, _) in known.items()},
            {u: size for u, (_, size) in known.items() if size is not None},
            {k: nodes for k, nodes in holders.items() if nodes},
        )

    def record_inputs(
        self, node: str | None, uses: Sequence[InputUse], evicted: Sequence[str], dag_id: str | None = None
    ) -> None:
        now = datetime.now(timezone.utc)
        with self._lock:
            self._enter()
            for u in uses:
                reads, size = self._inputs.get(u.uri, (0, None))
                self._inputs[u.uri] = (reads + 1, u.size_bytes if u.size_bytes is not None else size)
                self._input_dags.setdefault(u.uri, set()).update([dag_id] if dag_id else [])
            if node is None:
                return
            for key in [u.key for u in uses if u.key and not u.cached] + list(evicted):
                self._cached.pop((node, key), None)
            for u in uses:
                if u.key and u.cached:
                    self._cached[(node, u.key)] = CachedInput(node, u.key, u.uri, u.size_bytes or 0, now)

    def cached_inputs(self, dag_ids: frozenset[str] | None = None) -> list[CachedInput]:
        with self._lock:
            self._enter()
            copies = [
                c for c in self._cached.values() if dag_ids is None or self._input_dags[c.uri] & dag_ids
            ]
        return sorted(copies, key=lambda c: (c.node, -c.last_used_at.timestamp()))

    def prune(
        self, *, keep_attempts: int, keep_days: float, now: datetime | None = None, dry_run: bool = False
    ) -> PruneResult:
        cutoff = prune_cutoff(now or datetime.now(timezone.utc), keep_days)
        with self._lock:
            self._enter()
            doomed: list[TaskKey] = []
            for name in {o.task_family for _, o in self._attempts.values()}:
                ordered = self._window(name, len(self._attempts))
                for rank, (_, obs) in enumerate(reversed(ordered), start=1):
                    old = cutoff is not None and (obs.finished_at or _EPOCH) < cutoff
                    if old or (keep_attempts > 0 and rank > keep_attempts):
                        doomed.append(obs.key)
            families = len({self._attempts[k][1].task_family for k in doomed})
            if not dry_run:
                for key in doomed:
                    attempt_id, obs = self._attempts.pop(key)
                    self._ordered[obs.task_family].remove((obs.finished_at or _EPOCH, attempt_id, key))
                lost = (now or datetime.now(timezone.utc)) - timedelta(seconds=STALE_AFTER_S)
                for key, (_, started, _) in list(self._unfinished.items()):
                    if started <= lost:
                        self._unmark(key)
        return PruneResult(len(doomed), families, dry_run)

    def rebuild(self, *, fit_models: bool = True) -> int:
        with self._lock:
            self._enter()
            by_family: dict[str, list[tuple[int, Observation]]] = {}
            for i, obs in sorted(
                self._attempts.values(), key=lambda item: (item[1].finished_at or _EPOCH, item[0])
            ):
                by_family.setdefault(obs.task_family, []).append((i, obs))
            states, self._distributions, self._days = rebuild_states(
                sorted(by_family.items()), self.learning if fit_models else None
            )
            self._families = {state.rollup.task_family: state for state in states}
            return len(self._families)
