"""Recording attempts in one transaction, over any number of batches (see :mod:`.learning`).

A pod's attempt is one batch of one; a trace of a million rows is forty batches taken one at a
time. Each family's row is locked the first time a batch names it, and its rollup is then kept
here; rollups, day totals and the store-wide distributions are written once, at the end, and the
families whose samples grew enough are refitted once. Concurrent writers of the same families
wait for the transaction; two large imports locking families in different orders may deadlock,
which the database reports and which fails one of them whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np

from airflow_adaptive.core.model import Observation, TaskKey
from airflow_adaptive.core.normalise import normalise
from airflow_adaptive.core.rollup import DayKey, DayTotals, Distributions, FamilyRollup, contributions
from airflow_adaptive.store.api import FamilyState, RecordResult
from airflow_adaptive.store.learning import Learning, Transaction, day_deltas, latest_by_key, learn

LOOKUP_RUNS_FROM = 1_000  # a batch this large looks up only keys that can be stored


def record_batches_in(
    tx: Transaction, batches: Iterable[Sequence[Observation]], learning: Learning
) -> RecordResult:
    """Replace the attempts, update rollups and distributions, refit models that are due."""
    recording = _Recording(tx)
    for observations in batches:
        recording.add(observations)
    return recording.finish(learning)


class _Recording:
    def __init__(self, tx: Transaction) -> None:
        self.tx = tx
        self.keys = _KeysSoFar(tx)
        self.locked: dict[str, FamilyState] = {}  # as stored before this transaction
        self.rollups: dict[str, FamilyRollup] = {}  # as they stand now
        self.days: dict[DayKey, DayTotals] = {}
        self.added, self.removed = Distributions(), Distributions()  # peaks of attempts
        self.new = self.replaced = self.repeated = 0

    def add(self, observations: Sequence[Observation]) -> None:
        batch = latest_by_key([normalise(o) for o in observations])
        self.repeated += len(observations) - len(batch)
        if not batch:
            return
        self._lock({o.task_family for o in batch})
        lookup, again = self.keys.maybe_stored([o.key for o in batch])  # under the locks: no writer races us
        old = self.tx.existing(lookup) if lookup else {}
        now = datetime.now(timezone.utc)
        batch = [_with_time(o, old.get(o.key), now) for o in batch]
        self._lock({o.task_family for o in old.values()})  # an attempt re-recorded under another family
        self.tx.upsert(batch, all_new=not old)
        self.tx.forget_unfinished([o.key for o in batch])
        for attempts, sign in ((list(old.values()), -1), (batch, +1)):
            for name, members in _by_family(attempts).items():
                self.rollups[name] = self.rollups[name].plus(contributions(name, members), sign)
        for key, delta in day_deltas(batch, old).items():
            self.days[key] = self.days[key].plus(delta) if key in self.days else delta
        for obs in batch:
            self.added.replace_attempt(None, obs)
        for obs in old.values():
            self.removed.replace_attempt(None, obs)
        added = len(batch) - len(old)
        self.new += added
        self.replaced += len(batch) - added - again  # again: in an earlier batch, not "already there"
        self.repeated += again

    def _lock(self, names: set[str]) -> None:
        missing = sorted(names - self.locked.keys())
        if missing:
            states = self.tx.lock_families(missing)
            self.locked.update(states)
            self.rollups.update((name, state.rollup) for name, state in states.items())

    def finish(self, learning: Learning) -> RecordResult:
        names = sorted(self.locked)
        if not names:
            return RecordResult(0, 0, (), self.repeated)
        self.tx.add_days(self.days)
        states = [replace(self.locked[name], rollup=self.rollups[name]) for name in names]
        self.tx.save_families(states, refitted=False)
        fitted = [learn(learning, self.tx, state.rollup, state) for state in states]
        refitted = [state for state in fitted if state is not None]
        if refitted:
            self.tx.save_families(refitted, refitted=True)
        distributions = self.tx.lock_distributions()  # the store-wide row, locked last and briefly
        distributions.add_peaks(self.added)
        distributions.add_peaks(self.removed, -1)
        for name in names:
            distributions.move_family(self.locked[name].rollup, self.rollups[name])
        for state in refitted:
            before = self.locked[state.rollup.task_family].model
            after = state.model
            distributions.move_scores(before, after)
        self.tx.save_distributions(distributions)
        return RecordResult(
            self.new, self.replaced, tuple(s.rollup.task_family for s in refitted), self.repeated
        )


def _with_time(obs: Observation, stored: Observation | None, now: datetime) -> Observation:
    """An attempt without a finish time of its own (a trace without times) finishes when it is first
    recorded, for its row, its family's last finish and its day alike; recorded again, it keeps that
    time, so importing a file twice changes nothing."""
    if obs.finished_at is not None:
        return obs
    return replace(obs, finished_at=stored.finished_at if stored and stored.finished_at else now)


def _by_family(observations: Sequence[Observation]) -> dict[str, list[Observation]]:
    grouped: dict[str, list[Observation]] = {}
    for obs in observations:
        grouped.setdefault(obs.task_family, []).append(obs)
    return grouped


class _KeysSoFar:
    """What a recording knows of its keys, so that a large batch asks the store only about keys
    that can be stored: those of runs stored before it began, or seen in an earlier batch. A small
    batch asks about every key, as a lookup of a run is no cheaper than one of its keys."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx
        self._hashes = _HashSet()
        self._stored_runs: dict[tuple[str, str], bool] = {}

    def maybe_stored(self, keys: Sequence[TaskKey]) -> tuple[list[TaskKey], int]:
        """The keys to look up, and how many were in an earlier batch."""
        earlier = self._hashes.add([hash(k) for k in keys])
        if len(keys) < LOOKUP_RUNS_FROM:
            return list(keys), sum(earlier)
        runs = {(k.dag_id, k.run_id) for k in keys} - self._stored_runs.keys()
        if runs:  # first seen now: were they stored before this recording began?
            stored = self._tx.stored_runs(sorted(runs))
            self._stored_runs.update((run, run in stored) for run in runs)
        lookup = [
            k
            for k, seen in zip(keys, earlier, strict=True)
            if seen or self._stored_runs[(k.dag_id, k.run_id)]
        ]
        return lookup, sum(earlier)


class _HashSet:
    """64-bit hashes (a million keys take 8 MB, not a set of tuples) in sorted numpy arrays of
    halving sizes, merged as a log-structured merge tree does: adding n hashes costs O(n log n)
    overall, a membership test O(log n) per array. A hash collision only makes a key looked up."""

    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []

    def add(self, hashes: list[int]) -> list[bool]:
        """Add the hashes; returns, for each, whether it was there before."""
        new = np.asarray(hashes, dtype=np.int64)
        seen = np.zeros(new.size, dtype=bool)
        for run in self._runs:
            at = np.minimum(np.searchsorted(run, new), run.size - 1)
            seen |= run[at] == new
        self._runs.append(np.sort(new))
        while len(self._runs) > 1 and self._runs[-1].size >= self._runs[-2].size:
            last = self._runs.pop()
            self._runs[-1] = np.sort(np.concatenate((self._runs[-1], last)))
        return seen.tolist()
