"""Joins settings, the history store and the pure decision, failing open at every step.

One advisor serves one pod (or one CLI call): it opens the store once, reads
each row it needs once, and after the store failed it does not try again, so
a pod waits for an unavailable store at most once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.cpu import CpuHistory, decide_cpu
from airflow_adaptive.core.decide import Fitted, decide_with, fit_history, fresh_predictor, warming_up
from airflow_adaptive.core.labels import GroupCapacity, feature_capacities, labels_from_distributions
from airflow_adaptive.core.learn import restore_predictor, staleness
from airflow_adaptive.core.locality import InputState, InputUse
from airflow_adaptive.core.model import Decision, MemoryRequest, Observation, TaskKey
from airflow_adaptive.core.nodes import StoredNode, summarize_groups
from airflow_adaptive.core.normalise import fit_key
from airflow_adaptive.core.placement import GroupView, PlacementEngine, PlacementResult, TaskDemandView
from airflow_adaptive.core.priority import FamilyProgress, PriorityChoice, choose_priority
from airflow_adaptive.core.rollup import Distributions
from airflow_adaptive.core.sizing.base import HistogramPeakPrior
from airflow_adaptive.core.sizing.similar import Identity, pick_donor
from airflow_adaptive.core.unfinished import STALE_AFTER_S, Unfinished
from airflow_adaptive.core.units import format_bytes
from airflow_adaptive.exceptions import AdaptiveError, HistoryRejectedError, HistoryUnavailableError
from airflow_adaptive.failopen import first_line, warn_once
from airflow_adaptive.store.access import open_store
from airflow_adaptive.store.api import FamilyState, HistoryStore
from airflow_adaptive.store.spool import Spool

log = logging.getLogger(__name__)


DONOR_CANDIDATES = 1000  # families read to find a cold family's donor, most attempts first


class _NoUsableModel(Exception):
    """The stored model cannot be used and this advisor does not refit."""


def keep_user(user: MemoryRequest, reason: str) -> Decision:
    """The fail-open decision: the user's own resources, and why."""
    return Decision(
        user.request_bytes,
        user.limit_bytes,
        "user",
        f"{reason}; keeping the user's request {format_bytes(user.request_bytes)}",
        adaptive=False,
    )


class Advisor:
    """Decides memory and placement for a task family and records attempts."""

    def __init__(
        self,
        settings: AdaptiveSettings,
        store_factory: Callable[[], HistoryStore] | None = None,
        *,
        refit_stale: bool = True,
    ) -> None:
        """``refit_stale=False`` (the UI): a family without a usable stored model keeps the user's
        request instead of being refitted here."""
        self.settings = settings
        self.refit_stale = refit_stale
        self._nodes: list[StoredNode] | None = None
        self._factory = store_factory or (lambda: open_store(settings))
        self._opened: HistoryStore | None = None
        self._down: str | None = None  # why the store failed; not asked again by this advisor
        self._families: dict[str, FamilyState | None] = {}
        self._distributions: Distributions | None = None

    def _store(self) -> HistoryStore:
        if self._down is not None:
            raise HistoryUnavailableError(self._down)
        if self._opened is None:
            self._opened = self._factory()
        return self._opened

    def _unavailable(self, err: HistoryUnavailableError) -> str:
        message = first_line(err, 300)
        if not message.startswith("history store unavailable"):
            message = f"history store unavailable: {message}"
        self._down = message
        warn_once(self._down)
        return self._down

    def _family(self, task_family: str) -> FamilyState | None:
        if task_family not in self._families:
            self._families[task_family] = self._store().family(task_family)
        return self._families[task_family]

    def read_families(self, task_families: Sequence[str]) -> None:
        """Read a page of families' rows in one query, for the decisions that follow."""
        found = self._store().families_named(task_families)  # keyed as stored (fit_key)
        self._families.update({name: found.get(fit_key(name)) for name in task_families})

    def family_state(self, task_family: str) -> FamilyState | None:
        """The family's row, read once per advisor (HistoryUnavailableError when the store is down:
        the advisor then waits for it no more)."""
        try:
            return self._family(task_family)
        except HistoryUnavailableError as err:
            self._unavailable(err)
            raise

    def _all_distributions(self) -> Distributions:
        if self._distributions is None:
            self._distributions = self._store().distributions()
        return self._distributions

    def _fitted(self, task_family: str, state: FamilyState | None) -> Fitted:
        """The family's stored model restored; refitted here only when it cannot be used as it is."""
        sizing = self.settings.sizing
        if state is None:
            return Fitted(fresh_predictor(sizing), 0, 0)
        reason = staleness(state.model, sizing, state.rollup.usable_samples)
        if reason is None and state.model is not None:
            try:
                predictor = restore_predictor(state.model, sizing)
                return Fitted(predictor, state.model.window_samples, state.model.lower_bound_samples)
            except (ValueError, TypeError, KeyError, AttributeError) as err:
                reason = f"stored model unreadable ({type(err).__name__})"
        if not self.refit_stale:
            raise _NoUsableModel(f"no usable stored model ({reason}); the next recording fits one")
        history = self._store().history(task_family, limit=self.settings.history_window)
        return replace(fit_history(history, sizing), note=f"; refitted now: {reason}")

    def _borrowed(self, cold: Identity) -> Fitted | None:
        """For a family with no history: the model of the most similar family that has one (warm
        starts, core/sizing/similar.py), among the ``DONOR_CANDIDATES`` families with most attempts."""
        donor = pick_donor(cold, self._store().donor_candidates(limit=DONOR_CANDIDATES))
        if donor is None:
            return None
        try:
            fitted = self._fitted(donor.family, self._family(donor.family))
        except _NoUsableModel:
            return None
        return Fitted(fitted.predictor, 0, 0, donor=donor) if fitted.predictor.warm else None

    def previous_try(self, key: TaskKey, run_id_of: Callable[[str], str] | None = None) -> Observation | None:
        """This task instance's previous try; ``run_id_of`` maps stored run ids to the one in ``key``
        (a pod may only carry a sanitised label). None when unknown or the store is unavailable."""
        if key.try_number <= 1:
            return None
        try:
            if run_id_of is None:  # the run id is known exactly: one row by its key
                return self._store().attempt(replace(key, try_number=key.try_number - 1))
            candidates = self._store().attempts_for_try(key.dag_id, key.task_id, key.try_number - 1)
        except HistoryUnavailableError as err:
            self._unavailable(err)
            return None
        for obs in candidates:
            if run_id_of(obs.key.run_id) == key.run_id and obs.key.map_index == key.map_index:
                return obs
        return None

    def decide(
        self,
        task_family: str,
        user: MemoryRequest,
        key: TaskKey | None = None,
        *,
        input_size_bytes: int | None = None,
        previous_attempt: Observation | None = None,
        cpu_limit_millicores: int | None = None,
        image: str | None = None,
        program: str | None = None,
    ) -> Decision:
        """The decision for the next attempt; the user's resources when history is unavailable.
        ``image`` and ``program``: what the pod runs, for a cold family's warm start."""
        try:
            state = self._family(task_family)
            if previous_attempt is None and key is not None:
                previous_attempt = self.previous_try(key)
            fitted = self._fitted(task_family, state)
            if (
                fitted.samples == 0
                and fitted.predictor.borrows_when_cold
                and self.settings.sizing.warm_starts
                and not warming_up(self.settings.sizing.min_observations, 0)  # it keeps the request
                and not self._running(task_family)  # beside a running try, a borrowed guess waits
            ):
                fitted = self._borrowed(Identity(task_family, image, program)) or fitted
            unfinished = self._unfinished(task_family, state, fitted)
            needs_prior = (  # what other families' tasks used; a new family with a request keeps it
                (state is None and not user.request_bytes)
                or (unfinished is not None and unfinished.outnumber(fitted.samples))
                or fitted.predictor.draws_on_prior(user.request_bytes)
            )
            everyone = self._all_distributions() if needs_prior else None
            prior = HistogramPeakPrior(everyone.peaks) if everyone else None
            decision = decide_with(
                fitted,
                user,
                self.settings.sizing,
                previous_attempt=previous_attempt,
                input_size_bytes=input_size_bytes,
                prior=prior,
                unfinished=unfinished,
            )
            return self._with_cpu(decision, state, cpu_limit_millicores)
        except HistoryUnavailableError as err:
            self._unavailable(err)
            return keep_user(user, "history store unavailable")
        except _NoUsableModel as err:
            return keep_user(user, str(err))
        except AdaptiveError as err:  # e.g. an unknown strategy name in config
            warn_once(str(err))
            return keep_user(user, str(err))
        except Exception as err:  # a bug in a predictor must not stop the pod: fail open, say why
            log.exception("airflow-adaptive: the decision for %r failed", task_family)
            return keep_user(user, f"decision failed ({type(err).__name__})")

    def _unfinished(self, task_family: str, state: FamilyState | None, fitted: Fitted) -> Unfinished | None:
        """The family's unfinished attempts that have run longer than its finished ones took on
        average, for a strategy that guards against them (None: nothing to compare with)."""
        mean_s = state.rollup.mean_wall_seconds if state else None
        if mean_s is None or not fitted.samples or not fitted.predictor.guards_unfinished:
            return None
        return Unfinished(self._count_unfinished(task_family, longer_than_s=mean_s), mean_s)

    def _running(self, task_family: str) -> bool:
        """Whether an attempt of the family is running (noted as started, not yet recorded)."""
        return self._count_unfinished(task_family, longer_than_s=0.0) > 0

    def _count_unfinished(self, task_family: str, *, longer_than_s: float) -> int:
        """The family's noted attempts that started ``longer_than_s`` ago or more, and not stale."""
        now = datetime.now(timezone.utc)
        return self._store().count_unfinished(
            task_family,
            started_after=now - timedelta(seconds=STALE_AFTER_S),
            started_before=now - timedelta(seconds=longer_than_s),
        )

    def started(self, task_family: str, key: TaskKey) -> None:
        """Note that this attempt's pod is being created (until it is recorded); never raises."""
        try:
            self._store().mark_unfinished(key, task_family, datetime.now(timezone.utc))
        except (HistoryUnavailableError, HistoryRejectedError) as err:
            reason = f"attempt not noted as started: {first_line(err)}"
            warn_once(reason, "decisions do not count it among the family's unfinished attempts")

    def ended_unrecorded(self, key: TaskKey) -> None:
        """Remove the note of an attempt that ended without a record (killed, no pod); never raises."""
        try:
            self._store().unmark_unfinished(key)
        except (HistoryUnavailableError, HistoryRejectedError) as err:
            reason = f"unrecorded attempt not cleared: {first_line(err)}"
            warn_once(reason, "it counts as unfinished until pruned")

    def _with_cpu(
        self, decision: Decision, state: FamilyState | None, limit_millicores: int | None
    ) -> Decision:
        """With ``size_cpu``: the CPU request from the family's recorded cores busy, and why."""
        sizing = self.settings.sizing
        if not sizing.size_cpu or not decision.adaptive:
            return decision
        try:
            if self._nodes is None:
                self._nodes = self._store().nodes()
        except HistoryUnavailableError as err:  # the memory decision stands; the CPU request stays
            self._unavailable(err)
            return replace(decision, explanation=f"{decision.explanation}; cpu: node profiles unavailable")
        largest = max((n.profile.cores or 0 for n in self._nodes), default=0) * 1000
        model = state.model if state else None
        history = CpuHistory(model.cpu_cores, model.cpu_attempts) if model else None
        cpu, why = decide_cpu(
            history,
            sizing.cpu_quantile,
            sizing.min_cpu_millicores,
            limit_millicores=limit_millicores,
            largest_node_millicores=largest or None,
        )
        return replace(decision, cpu_request_millicores=cpu, explanation=f"{decision.explanation}; {why}")

    def priority(self, task_family: str, static_weight: int = 0) -> PriorityChoice | None:
        """The family's least-finished-first rank (None when the store is unavailable)."""
        try:
            state = self._family(task_family)
            successes = self._all_distributions().successes
        except HistoryUnavailableError as err:
            self._unavailable(err)
            return None
        progress = FamilyProgress.of(state.rollup.attempts, state.rollup.completed) if state else None
        return choose_priority(
            progress or FamilyProgress(0, 0), successes, self.settings.lff_failures, static_weight
        )

    def place(
        self,
        task_family: str,
        required_capabilities: frozenset[str],
        memory_request_bytes: int | None,
        idle_nodes: Mapping[int, int] | None = None,
    ) -> PlacementResult:
        """Preferred node groups for the family (no preference when groups or history are unavailable)."""
        task = TaskDemandView(task_family, None, memory_request_bytes, required_capabilities)
        try:
            if self._nodes is None:
                self._nodes = self._store().nodes()
            groups = summarize_groups(self._nodes)
            if not groups:
                return PlacementResult((), (), False, ("no node groups profiled yet",))
            state = self._family(task_family)
            demand = self._all_distributions().demand
        except HistoryUnavailableError as err:
            self._unavailable(err)
            return PlacementResult((), (), False, ("node groups unavailable",))
        capacities = feature_capacities(
            [GroupCapacity(g.task_ranks, g.cores, g.memory_bytes, len(g.members)) for g in groups]
        )
        labels = labels_from_distributions(state.rollup.demand() if state else None, demand, capacities)
        views = [
            GroupView(
                g.id,
                g.task_ranks,
                g.capabilities,
                g.largest_memory_bytes,
                g.members,
                idle_nodes=(idle_nodes or {}).get(g.id, 0),
            )
            for g in groups
        ]
        return PlacementEngine().place(replace(task, labels=labels), views)

    def mean_runtime_s(self, task_family: str) -> float | None:
        """The family's mean recorded runtime; None when unknown or the store is unavailable."""
        try:
            state = self._family(task_family)
        except HistoryUnavailableError as err:
            self._unavailable(err)
            return None
        return state.rollup.mean_wall_seconds if state else None

    def input_state(self, uris: Sequence[str], keys: Sequence[str]) -> InputState:
        """Earlier reads, sizes and holders of declared inputs; nothing known when the store is down."""
        try:
            return self._store().input_state(uris, keys)
        except HistoryUnavailableError as err:
            self._unavailable(err)
            return InputState()

    def record_inputs(
        self, node: str | None, uses: Sequence[InputUse], evicted: Sequence[str], dag_id: str | None = None
    ) -> None:
        """Where inputs are cached now, and which DAG read them. Soft state: when it cannot be written,
        a later pod misses."""
        if not uses and not evicted:
            return
        try:
            self._store().record_inputs(node, uses, evicted, dag_id)
        except (HistoryUnavailableError, HistoryRejectedError) as err:
            warn_once(f"input cache locations not recorded: {first_line(err)}")

    def record(self, observation: Observation) -> bool:
        """Record an attempt, then any spooled ones one by one; spool it when the store is unavailable."""
        spool = Spool(self.settings.spool_dir)
        try:
            self._store().record([observation])
        except (HistoryRejectedError, ValueError, TypeError) as err:  # bad values: keep it aside, go on
            spool.quarantine(spool.put(observation), str(err))
            log.error(
                "airflow-adaptive: attempt %s rejected, kept in %s: %s", observation.key, spool.folder, err
            )
            return False
        except HistoryUnavailableError as err:
            reason = self._unavailable(err)
            try:
                spool.put(observation)
                log.warning(
                    "airflow-adaptive: attempt %s spooled to %s: %s", observation.key, spool.folder, reason
                )
            except OSError as spool_err:
                log.error("airflow-adaptive: attempt %s lost: %s", observation.key, spool_err)
            return False
        self.drain(spool)
        return True

    def drain(self, spool: Spool) -> int:
        """Write spooled attempts one by one; a permanently rejected one is quarantined, not retried."""
        written = 0
        for path, obs in spool.pending():
            try:
                self._store().record([obs])
            except (HistoryRejectedError, ValueError, TypeError) as err:
                spool.quarantine(path, str(err))
                log.error("airflow-adaptive: spooled attempt %s rejected, quarantined: %s", obs.key, err)
                continue
            except HistoryUnavailableError:
                break
            path.unlink(missing_ok=True)
            written += 1
        return written
