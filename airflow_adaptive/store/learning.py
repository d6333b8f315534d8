"""Recording attempts and learning from them, written once for every store implementation.

Both stores run :func:`record_in` inside one transaction of their own, through
the small :class:`Transaction` interface. Order matters for concurrency: the
families' rows are locked first (sorted, so writers do not deadlock), then the
attempts are read and replaced, and the store-wide row is locked last and
held briefly. Writers of one family wait for each other; a rollup is always
``sum(contribution(attempt))`` over the stored attempts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from airflow_adaptive.core.decide import SizingSettings, to_samples
from airflow_adaptive.core.learn import fit_model, model_version, needs_refit
from airflow_adaptive.core.model import Observation, TaskKey
from airflow_adaptive.core.normalise import normalise
from airflow_adaptive.core.rollup import (
    DayKey,
    DayTotals,
    Distributions,
    FamilyRollup,
    contribution,
    day_contribution,
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

    def upsert(self, observations: Sequence[Observation]) -> None: ...

    def window(self, task_family: str, limit: int) -> tuple[list[Observation], int | None]:
        """The family's newest ``limit`` attempts (oldest first) and the newest attempt's id."""
        ...

    def save_family(self, state: FamilyState, *, refitted: bool) -> None: ...

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
    deltas: dict[DayKey, DayTotals] = {}
    for obs in batch:
        for attempt, sign in ((old.get(obs.key), -1), (obs, +1)):
            if attempt is not None:
                key, totals = day_contribution(attempt)
                deltas[key] = deltas.get(key, DayTotals()).plus(totals, sign)
    return deltas


def record_in(tx: Transaction, observations: Sequence[Observation], learning: Learning) -> RecordResult:
    """Replace the attempts, update rollups and distributions, refit models that are due."""
    batch = latest_by_key([normalise(o) for o in observations])
    if not batch:
        return RecordResult(0, 0)
    names = sorted({o.task_family for o in batch})
    states = tx.lock_families(names)
    old = tx.existing([o.key for o in batch])  # under the locks: no writer of these families races us
    moved = sorted({o.task_family for o in old.values()} - set(names))
    if moved:  # an attempt re-recorded under another family (rare): lock that one too, out of order;
        # a deadlock with a writer of that family is reported by the database and the attempt spooled
        states.update(tx.lock_families(moved))
        names = sorted({*names, *moved})
    tx.upsert(batch)
    rollups = {name: states[name].rollup for name in names}
    for obs in batch:
        before = old.get(obs.key)
        if before is not None:
            rollups[before.task_family] = rollups[before.task_family].plus(contribution(before), -1)
        rollups[obs.task_family] = rollups[obs.task_family].plus(contribution(obs))
    tx.add_days(day_deltas(batch, old))
    refitted = []
    for name in names:
        state = learn(learning, tx, rollups[name], states[name])
        if state is not None:
            refitted.append(name)
        tx.save_family(state or replace(states[name], rollup=rollups[name]), refitted=state is not None)
    distributions = tx.lock_distributions()
    for obs in batch:
        distributions.replace_attempt(old.get(obs.key), obs)
    for name in names:
        distributions.move_family(states[name].rollup, rollups[name])
    tx.save_distributions(distributions)
    replaced = sum(o.key in old for o in batch)
    return RecordResult(len(batch) - replaced, replaced, tuple(refitted))
