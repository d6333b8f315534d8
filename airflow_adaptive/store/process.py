"""History held in this process: the store the replay, the simulator and the what-if panel size through.

It implements :class:`~airflow_adaptive.store.api.SizingStore`, the role the memory decision and
recording need, with the same recording and learning code as the SQL store
(:func:`~airflow_adaptive.store.recording.record_batches_in`): rollups, distributions and models
come out alike, so a replayed task is sized by the decision a pod gets. Its reads are by family
(an index kept sorted as the SQL store orders a window) and unfinished attempts are counted by
bisection, so a replay of a long trace costs no scan per decision. It is not thread-safe.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timezone

from airflow_adaptive.core.lff import FamilyProgress
from airflow_adaptive.core.model import Observation, TaskKey
from airflow_adaptive.core.node_groups import StoredNode
from airflow_adaptive.core.normalise import fit_key, fit_task_key
from airflow_adaptive.core.rollup import DayKey, DayTotals, Distributions, FamilyRollup
from airflow_adaptive.core.sizing.similar import Identity
from airflow_adaptive.core.unfinished import Running
from airflow_adaptive.store.api import FamilyState, RecordResult
from airflow_adaptive.store.learning import DEFAULT_LEARNING, Learning, Transaction
from airflow_adaptive.store.recording import record_batches_in

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
Ordered = tuple[datetime, int, TaskKey]  # (finished at, attempt id, key): the SQL store's window order


class ProcessTransaction(Transaction):
    """Recording's view of a :class:`ProcessHistoryStore` (writes in place: nothing to roll back)."""

    def __init__(self, store: ProcessHistoryStore) -> None:
        self.store = store

    def lock_families(self, names: Sequence[str]) -> dict[str, FamilyState]:
        families = self.store._families
        return {name: families.setdefault(name, FamilyState(FamilyRollup(name))) for name in names}

    def existing(self, keys: Sequence[TaskKey]) -> dict[TaskKey, Observation]:
        return {k: self.store._attempts[k][1] for k in keys if k in self.store._attempts}

    def stored_runs(self, runs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        stored = {(k.dag_id, k.run_id) for k in self.store._attempts}
        return {run for run in runs if run in stored}

    def upsert(self, observations: Sequence[Observation], *, all_new: bool = False) -> None:
        for obs in observations:
            self.store._put(obs)

    def forget_unfinished(self, keys: Sequence[TaskKey]) -> None:
        for key in keys:
            self.store._unmark(key)

    def window(self, task_family: str, limit: int) -> tuple[list[Observation], int | None]:
        found = self.store._window(task_family, limit)
        return [obs for _, obs in found], max((i for i, _ in found), default=None)

    def save_families(self, states: Sequence[FamilyState], *, refitted: bool) -> None:
        for state in states:
            self.store._families[state.rollup.task_family] = state

    def add_days(self, totals: dict[DayKey, DayTotals]) -> None:
        for key, delta in totals.items():
            self.store._days[key] = self.store._days.get(key, DayTotals()).plus(delta)

    def lock_distributions(self) -> Distributions:
        return self.store._distributions

    def save_distributions(self, distributions: Distributions) -> None:
        self.store._distributions = distributions


class ProcessHistoryStore:
    """:class:`~airflow_adaptive.store.api.SizingStore` in dictionaries of this process."""

    def __init__(self, learning: Learning = DEFAULT_LEARNING) -> None:
        self.learning = learning
        self._attempts: dict[TaskKey, tuple[int, Observation]] = {}
        self._ordered: dict[str, list[Ordered]] = {}  # per family, in window order
        self._families: dict[str, FamilyState] = {}
        self._distributions = Distributions()
        self._days: dict[DayKey, DayTotals] = {}
        self._unfinished: dict[TaskKey, tuple[str, datetime, bool]] = {}  # key -> family, since, running
        self._running: dict[tuple[str, bool], Running] = {}  # per family, running or not: since, sorted
        self._nodes: dict[str, StoredNode] = {}
        self._next_id = 0

    def _enter(self) -> None:
        """Called before every operation (a test double makes it fail or wait)."""

    # --- writes ---------------------------------------------------------------------------------
    def _put(self, obs: Observation) -> None:  # stamped with a time where recorded (recording.py)
        known = self._attempts.get(obs.key)
        if known is None:
            self._next_id += 1
            attempt_id = self._next_id
        else:
            attempt_id = known[0]
            old = known[1]
            self._ordered[old.task_family].remove((old.finished_at or EPOCH, attempt_id, old.key))
        self._attempts[obs.key] = (attempt_id, obs)
        entry = (obs.finished_at or EPOCH, attempt_id, obs.key)
        bisect.insort(self._ordered.setdefault(obs.task_family, []), entry)

    def _unmark(self, key: TaskKey) -> None:
        noted = self._unfinished.pop(key, None)
        if noted is not None:
            self._running[noted[0], noted[2]].end(key)

    def record(self, observations: Sequence[Observation]) -> RecordResult:
        return self.record_batches([observations])

    def record_batches(self, batches: Iterable[Sequence[Observation]]) -> RecordResult:
        self._enter()
        return record_batches_in(ProcessTransaction(self), batches, self.learning)

    def mark_unfinished(
        self, key: TaskKey, task_family: str, started_at: datetime, *, running: bool = True
    ) -> None:
        self._enter()
        key = fit_task_key(key)
        for earlier in range(1, key.try_number):
            self._unmark(replace(key, try_number=earlier))
        self._unmark(key)
        family = fit_key(task_family)
        self._unfinished[key] = (family, started_at, running)
        self._running.setdefault((family, running), Running()).start(key, started_at.timestamp())

    def unmark_unfinished(self, key: TaskKey) -> None:
        self._enter()
        self._unmark(fit_task_key(key))

    # --- reads ----------------------------------------------------------------------------------
    def _window(self, task_family: str, limit: int) -> list[tuple[int, Observation]]:
        ordered = self._ordered.get(task_family, [])
        newest = ordered[-limit:] if limit > 0 else []
        return [(attempt_id, self._attempts[key][1]) for _, attempt_id, key in newest]

    def count_unfinished(
        self,
        task_family: str,
        *,
        started_after: datetime,
        started_before: datetime,
        running_only: bool = False,
    ) -> int:
        self._enter()
        family = fit_key(task_family)
        noted = [self._running.get((family, True))] + (
            [] if running_only else [self._running.get((family, False))]
        )
        after, before = started_after.timestamp(), started_before.timestamp()
        return sum(kind.count_between(after, before) for kind in noted if kind is not None)

    def family(self, task_family: str) -> FamilyState | None:
        self._enter()
        state = self._families.get(fit_key(task_family))
        return state if state is not None and state.rollup.attempts else None

    def progress(self, task_family: str) -> FamilyProgress | None:
        state = self.family(task_family)
        return state.progress if state else None

    def families_named(self, task_families: Sequence[str]) -> dict[str, FamilyState]:
        found = {fit_key(name): self.family(name) for name in task_families}
        return {name: state for name, state in found.items() if state is not None}

    def history(
        self, task_family: str, *, limit: int = 500, dag_ids: frozenset[str] | None = None
    ) -> list[Observation]:
        self._enter()
        everything = len(self._attempts) if dag_ids is not None else limit
        found = [obs for _, obs in self._window(fit_key(task_family), everything)]
        return [o for o in found if dag_ids is None or o.key.dag_id in dag_ids][-limit:] if limit > 0 else []

    def attempt(self, key: TaskKey) -> Observation | None:
        self._enter()
        found = self._attempts.get(fit_task_key(key))
        return found[1] if found else None

    def attempts_for_try(
        self, dag_id: str, task_id: str, try_number: int, *, limit: int = 200
    ) -> list[Observation]:
        self._enter()
        wanted = (fit_key(dag_id), fit_key(task_id), try_number)
        found = [
            o for _, o in self._attempts.values() if (o.key.dag_id, o.key.task_id, o.key.try_number) == wanted
        ]
        found.sort(key=lambda o: o.finished_at or EPOCH, reverse=True)
        return found[:limit]

    def distributions(self) -> Distributions:
        """The store's own (read it, do not change it: no copy is made)."""
        self._enter()
        return self._distributions

    def families(self, *, limit: int = 100, offset: int = 0) -> list[FamilyRollup]:
        self._enter()
        rollups = [s.rollup for s in self._families.values() if s.rollup.attempts]
        rollups.sort(key=lambda r: (-r.attempts, r.task_family))
        return rollups[offset : offset + limit]

    def donor_candidates(self, *, limit: int) -> list[tuple[Identity, int]]:
        return [
            (Identity(r.task_family, r.image, r.program), r.usable_samples)
            for r in self.families(limit=limit)
        ]

    def nodes(self) -> list[StoredNode]:
        self._enter()
        return [self._nodes[n] for n in sorted(self._nodes)]
