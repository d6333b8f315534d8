"""Recording attempts and learning from them, written once for every store implementation.

Both stores run :func:`record_batches_in` inside one transaction of their own, through
the small :class:`Transaction` interface. Order matters for concurrency: the
families' rows are locked first (sorted, so writers do not deadlock), then the
attempts are read and replaced, and the store-wide row is locked last and
held briefly. Writers of one family wait for each other; a rollup is always
``sum(contribution(attempt))`` over the stored attempts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Protocol

import numpy as np

from airflow_adaptive.core.decide import SizingSettings, to_samples
from airflow_adaptive.core.learn import fit_model, model_version, needs_refit
from airflow_adaptive.core.model import Observation, TaskKey
from airflow_adaptive.core.normalise import normalise
from airflow_adaptive.core.rollup import (
    DayKey,
    DayTotals,
    Distributions,
    FamilyRollup,
    contributions,
    day_terms,
)
from airflow_adaptive.store.api import FamilyState, RecordResult


@dataclass(frozen=True)
class Learning:
    """What recording needs to fit models: the sizing settings and the window a decision reads."""

    sizing: SizingSettings = field(default_factory=SizingSettings)
    history_window: int = 500


DEFAULT_LEARNING = Learning()


class Transaction(Protocol):
    def lock_families(self, names: Sequence[str]) -> dict[str, FamilyState]:
        """Lock (creating when missing) the families' rows, in sorted order."""
        ...

    def existing(self, keys: Sequence[TaskKey]) -> dict[TaskKey, Observation]: ...

    def stored_runs(self, runs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those of the (DAG id, run id) pairs that have an attempt stored."""
        ...

    def upsert(self, observations: Sequence[Observation], *, all_new: bool = False) -> None:
        """Insert or replace the attempts (``all_new``: the caller found none of their keys stored)."""
        ...

    def window(self, task_family: str, limit: int) -> tuple[list[Observation], int | None]:
        """The family's newest ``limit`` attempts (oldest first) and the newest attempt's id."""
        ...

    def save_families(self, states: Sequence[FamilyState], *, refitted: bool) -> None:
        """Write the families' rollups (and, when ``refitted``, their models)."""
        ...

    def add_days(self, totals: dict[DayKey, DayTotals]) -> None:
        """Add (signed) totals to the per-family, per-DAG, per-day rows."""
        ...

    def lock_distributions(self) -> Distributions: ...

    def save_distributions(self, distributions: Distributions) -> None: ...


def latest_by_key(observations: Sequence[Observation]) -> list[Observation]:
    """One observation per attempt key, the last given winning (a spool may hold one twice)."""
    return list({o.key: o for o in observations}.values())


def learn(
    learning: Learning, tx: Transaction, rollup: FamilyRollup, state: FamilyState
) -> FamilyState | None:
    """The family's state refitted when its samples grew enough (None: the stored model stands)."""
    sizing = learning.sizing
    model = state.model
    fresh = model is not None and model.version == model_version(sizing)
    if fresh and model is not None and not needs_refit(model.family_samples, rollup.usable_samples):
        return None
    window, newest_id = tx.window(rollup.task_family, learning.history_window)
    samples = to_samples(window)
    refitted = fit_model(samples, sizing, rollup.usable_samples, newest_id, model if fresh else None)
    return FamilyState(rollup, refitted)


def day_deltas(batch: Sequence[Observation], old: dict[TaskKey, Observation]) -> dict[DayKey, DayTotals]:
    """Per (family, DAG, day): what the batch adds, less what the attempts it replaces had added."""
    sums: dict[DayKey, list[Any]] = {}
    now = datetime.now(timezone.utc)
    for attempts, sign in ((old.values(), -1), (batch, +1)):
        for attempt in attempts:
            key, terms = day_terms(attempt, now)
            total = sums.setdefault(key, [0] * len(terms))
            for column, term in enumerate(terms):
                total[column] += sign * term
    return {key: DayTotals(*total) for key, total in sums.items()}


def record_batches_in(
    tx: Transaction, batches: Iterable[Sequence[Observation]], learning: Learning
) -> RecordResult:
    """Replace the attempts, update rollups and distributions, refit models that are due; batches
    are taken one at a time (a trace too large to hold at once), in the caller's one transaction,
    and each family's model is refitted once, after the last batch."""
    new = replaced = repeated = 0
    touched: set[str] = set()
    known = _KeysSoFar(tx)
    for observations in batches:
        batch = latest_by_key([normalise(o) for o in observations])
        again = 0  # attempts of an earlier batch: repeated in the input, not "already there"
        if batch:
            added, again, names = _record_batch(tx, batch, known)
            new, replaced = new + added, replaced + len(batch) - added - again
            touched.update(names)
        repeated += len(observations) - len(batch) + again
    refitted = _refit(tx, sorted(touched), learning)
    return RecordResult(new, replaced, tuple(refitted), repeated)


def _by_family(observations: Sequence[Observation]) -> dict[str, list[Observation]]:
    grouped: dict[str, list[Observation]] = {}
    for obs in observations:
        grouped.setdefault(obs.task_family, []).append(obs)
    return grouped


class _KeysSoFar:
    """What a recording knows of its keys, so that a large batch asks the store only about keys
    that can be stored: those of runs stored before it began, or seen in an earlier batch (kept as
    8-byte hashes: a million keys take 8 MB). A small batch asks about every key, as a lookup of a
    run is no cheaper than one of its keys."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx
        self._hashes = _HashSet()
        self._stored_runs: dict[tuple[str, str], bool] = {}

    def maybe_stored(self, keys: Sequence[TaskKey]) -> tuple[list[TaskKey], int]:
        """The keys to look up, and how many were in an earlier batch."""
        earlier = self._hashes.add([hash(k) for k in keys])
        if len(keys) < _LOOKUP_RUNS_FROM:
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
    """A set of 64-bit hashes in sorted numpy arrays of halving sizes (merged like a log-structured
    merge tree): adding n hashes costs O(n log n) overall, a membership test O(log n) per array."""

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


_LOOKUP_RUNS_FROM = 1_000


def _record_batch(tx: Transaction, batch: list[Observation], known: _KeysSoFar) -> tuple[int, int, list[str]]:
    """Store one batch (one observation per key) and its totals; returns (new attempts, attempts of
    an earlier batch, families)."""
    names = sorted({o.task_family for o in batch})
    states = tx.lock_families(names)
    lookup, again = known.maybe_stored([o.key for o in batch])  # under the locks: no writer races us
    old = tx.existing(lookup) if lookup else {}
    moved = sorted({o.task_family for o in old.values()} - set(names))
    if moved:  # an attempt re-recorded under another family (rare): lock that one too, out of order;
        # a deadlock with a writer of that family is reported by the database and the attempt spooled
        states.update(tx.lock_families(moved))
        names = sorted({*names, *moved})
    tx.upsert(batch, all_new=not old)
    rollups = {name: states[name].rollup for name in names}
    for attempts, sign in ((list(old.values()), -1), (batch, +1)):
        for name, members in _by_family(attempts).items():
            rollups[name] = rollups[name].plus(contributions(name, members), sign)
    tx.add_days(day_deltas(batch, old))
    tx.save_families([replace(states[name], rollup=rollups[name]) for name in names], refitted=False)
    distributions = tx.lock_distributions()
    for obs in batch:
        distributions.replace_attempt(old.get(obs.key), obs)
    for name in names:
        distributions.move_family(states[name].rollup, rollups[name])
    tx.save_distributions(distributions)
    return len(batch) - sum(o.key in old for o in batch), again, names


def _refit(tx: Transaction, names: list[str], learning: Learning) -> list[str]:
    """Refit the families whose samples grew enough; returns those refitted."""
    fitted = [learn(learning, tx, state.rollup, state) for state in tx.lock_families(names).values()]
    refitted = [state for state in fitted if state is not None]
    if refitted:
        tx.save_families(refitted, refitted=True)
    return [state.rollup.task_family for state in refitted]
