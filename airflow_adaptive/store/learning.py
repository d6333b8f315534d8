"""Recording attempts and learning from them, written once for every store implementation.

Both stores run :func:`.recording.record_batches_in` inside one transaction of their own, through
the small :class:`Transaction` interface. Order matters for concurrency: the
families' rows are locked first (sorted, so writers do not deadlock), then the
attempts are read and replaced, and the store-wide row is locked last and
held briefly. Writers of one family wait for each other; a rollup is always
``sum(contribution(attempt))`` over the stored attempts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol

from airflow_adaptive.core.cpu import cpu_history
from airflow_adaptive.core.decide import SizingSettings, to_samples
from airflow_adaptive.core.fitted_model import fit_model, model_version, needs_refit
from airflow_adaptive.core.model import Observation, TaskKey
from airflow_adaptive.core.rollup import (
    DayKey,
    DayTerms,
    DayTotals,
    Distributions,
    FamilyRollup,
    day_terms,
)
from airflow_adaptive.core.runtimes import recorded_runs
from airflow_adaptive.store.api import FamilyState


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

    def forget_unfinished(self, keys: Sequence[TaskKey]) -> None:
        """Remove the unfinished-attempt notes of these (now recorded) attempts."""
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
    if (
        fresh
        and model is not None
        and not needs_refit(model.family_samples, rollup.usable_samples, sizing.refit_growth)
    ):
        return None
    window, newest_id = tx.window(rollup.task_family, learning.history_window)
    samples = to_samples(window)
    cpu = cpu_history(window, sizing.cpu_quantile)  # kept whether or not size_cpu is on: ready when it is
    previous = model if fresh else None
    refitted = fit_model(
        samples, sizing, rollup.usable_samples, newest_id, previous, cpu, recorded_runs(window)
    )
    return FamilyState(rollup, refitted)


def day_deltas(batch: Sequence[Observation], old: dict[TaskKey, Observation]) -> dict[DayKey, DayTotals]:
    """Per (family, DAG, day): what the batch adds, less what the attempts it replaces had added."""
    rows: dict[DayKey, list[DayTerms]] = {}
    now = datetime.now(timezone.utc)
    for attempts, sign in ((old.values(), -1), (batch, +1)):
        for attempt in attempts:
            key, terms = day_terms(attempt, now)
            rows.setdefault(key, []).append(terms if sign > 0 else tuple(-t for t in terms))  # type: ignore[arg-type]
    # summed a column at a time, in the same order as one running total per column
    return {
        key: DayTotals(*(sum(column) for column in zip(*terms, strict=True))) for key, terms in rows.items()
    }
