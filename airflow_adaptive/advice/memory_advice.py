"""The memory (and CPU) decision of one attempt: the family's stored model, the pure decision, fail-open.

The operator, the pod-mutation hook, the UI, ``decide`` and the replay all size through
:meth:`MemoryAdvice.decide`, so a figure the replay measures is what a pod gets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from airflow_adaptive.advice.session import StoreSession
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.cpu import CpuHistory, decide_cpu
from airflow_adaptive.core.decide import Fitted, decide_with, fit_history, fresh_predictor, warming_up
from airflow_adaptive.core.fitted_model import restore_predictor, staleness
from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.core.growth_plan import GrowthPlan, learnt_plan
from airflow_adaptive.core.model import Decision, MemoryRequest, Observation, TaskKey
from airflow_adaptive.core.sizing.prior import HistogramPeakPrior
from airflow_adaptive.core.sizing.similar import Identity, pick_donor
from airflow_adaptive.core.unfinished import STALE_AFTER_S, Unfinished
from airflow_adaptive.core.units import format_bytes
from airflow_adaptive.exceptions import AdaptiveError, HistoryUnavailableError
from airflow_adaptive.failopen import warn_once
from airflow_adaptive.store.api import FamilyState, SizingStore

log = logging.getLogger(__name__)
DONOR_CANDIDATES = 1000  # families read to find a cold family's donor, most attempts first


class NoUsableModel(Exception):
    """The stored model cannot be used and this advice does not refit."""


def keep_user(user: MemoryRequest, reason: str) -> Decision:
    """The fail-open decision: the user's own resources, and why."""
    return Decision(
        user.request_bytes,
        user.limit_bytes,
        "user",
        f"{reason}; keeping the user's request {format_bytes(user.request_bytes)}",
        adaptive=False,
    )


class MemoryAdvice:
    """Sizes an attempt of a task family from its history; the user's resources when it cannot."""

    def __init__(
        self, settings: AdaptiveSettings, session: StoreSession[SizingStore], *, refit_stale: bool = True
    ) -> None:
        """``refit_stale=False`` (the UI): a family without a usable stored model keeps the user's
        request instead of being refitted here."""
        self.settings = settings
        self.session = session
        self.refit_stale = refit_stale

    def family_state(self, task_family: str) -> FamilyState | None:
        """The family's row, read once per session (HistoryUnavailableError when the store is down:
        the session then waits for it no more)."""
        try:
            return self.session.family(task_family)
        except HistoryUnavailableError as err:
            self.session.unavailable(err)
            raise

    def previous_try(self, key: TaskKey, run_id_of: Callable[[str], str] | None = None) -> Observation | None:
        """This task instance's previous try; ``run_id_of`` maps stored run ids to the one in ``key``
        (a pod may only carry a sanitised label). None when unknown or the store is unavailable."""
        if key.try_number <= 1:
            return None
        try:
            store = self.session.store()
            if run_id_of is None:  # the run id is known exactly: one row by its key
                return store.attempt(replace(key, try_number=key.try_number - 1))
            candidates = store.attempts_for_try(key.dag_id, key.task_id, key.try_number - 1)
        except HistoryUnavailableError as err:
            self.session.unavailable(err)
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
            if previous_attempt is None and key is not None:
                previous_attempt = self.previous_try(key)
            state = self.session.family(task_family)
            decision = self._decide(
                task_family, state, user, previous_attempt, input_size_bytes, image, program
            )
            return self._with_cpu(decision, state, cpu_limit_millicores)
        except HistoryUnavailableError as err:
            self.session.unavailable(err)
            return keep_user(user, "history store unavailable")
        except NoUsableModel as err:
            return keep_user(user, str(err))
        except AdaptiveError as err:  # e.g. an unknown strategy name in config
            warn_once(str(err))
            return keep_user(user, str(err))
        except Exception as err:  # a bug in a predictor must not stop the pod: fail open, say why
            log.exception("airflow-adaptive: the decision for %r failed", task_family)
            return keep_user(user, f"decision failed ({type(err).__name__})")

    def _decide(
        self,
        task_family: str,
        state: FamilyState | None,
        user: MemoryRequest,
        previous_attempt: Observation | None,
        input_size_bytes: int | None,
        image: str | None,
        program: str | None,
    ) -> Decision:
        sizing = self.settings.sizing
        fitted = self._fitted(task_family, state)
        if (
            fitted.samples == 0
            and fitted.predictor.tags().borrows_when_cold
            and sizing.warm_starts
            and not warming_up(sizing.min_observations, 0)  # it keeps the request
            and not self._running(task_family)  # beside a running try, a borrowed guess waits
        ):
            fitted = self._borrowed(Identity(task_family, image, program)) or fitted
        unfinished = self._unfinished(task_family, state, fitted)
        needs_prior = (  # what other families' tasks used; a new family with a request keeps it
            (state is None and not user.request_bytes)
            or (unfinished is not None and unfinished.outnumber(fitted.samples))
            or fitted.predictor.draws_on_prior(user.request_bytes)
        )
        everyone = self.session.distributions() if needs_prior else None
        prior = (
            HistogramPeakPrior(everyone.peaks, everyone.spread, everyone.scores, everyone.steady_scores)
            if everyone
            else None
        )
        if prior is not None and fitted.predictor.warm:
            fitted.predictor.use_prior(prior)  # restored from the store, fitted without one
        return decide_with(
            fitted,
            user,
            sizing,
            previous_attempt=previous_attempt,
            input_size_bytes=input_size_bytes,
            prior=prior,
            unfinished=unfinished,
        )

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
            raise NoUsableModel(f"no usable stored model ({reason}); the next recording fits one")
        history = self.session.store().history(task_family, limit=self.settings.history_window)
        return replace(fit_history(history, sizing), note=f"; refitted now: {reason}")

    def growth_plan(self, task_family: str, rule: GrowthRule, decision_bytes: int) -> GrowthPlan | None:
        """Where a growing pod starts and its headroom, learnt from the family's recorded memory
        profiles (``core/growth.py``); None without one or without the store (the pod
        then starts at the decision, grown by the rule's default only to be rescued)."""
        try:
            history = self.session.store().history(task_family, limit=self.settings.history_window)
        except HistoryUnavailableError as err:
            self.session.unavailable(err)
            return None
        shaped = [o for o in history if o.memory_profile_s and o.usage.peak_memory_bytes and not o.oom_killed]
        profiles = [(o.memory_profile_s or (), float(o.usage.peak_memory_bytes or 0)) for o in shaped]
        rebounds = [o.memory_rebound_bytes for o in shaped]
        sizing = self.settings.sizing
        return learnt_plan(
            profiles, decision_bytes, rule.window_s, sizing.max_oom_rate, sizing.floor_bytes, rebounds,
            rule.rescue_bytes(decision_bytes),
        )  # fmt: skip

    def _borrowed(self, cold: Identity) -> Fitted | None:
        """For a family with no history: the model of the most similar family that has one (warm
        starts, core/sizing/similar.py), among the ``DONOR_CANDIDATES`` families with most attempts."""
        candidates = self.session.store().donor_candidates(limit=DONOR_CANDIDATES)
        donor = pick_donor(cold, candidates, min_similarity=self.settings.sizing.min_similarity)
        if donor is None:
            return None
        try:
            fitted = self._fitted(donor.family, self.session.family(donor.family))
        except NoUsableModel:
            return None
        return Fitted(fitted.predictor, 0, 0, donor=donor) if fitted.predictor.warm else None

    def _unfinished(self, task_family: str, state: FamilyState | None, fitted: Fitted) -> Unfinished | None:
        """The family's unfinished attempts that have run longer than its finished ones took on
        average, for a strategy that guards against them (None: nothing to compare with)."""
        mean_s = state.rollup.mean_wall_seconds if state else None
        guarded = self.settings.sizing.guard_unfinished and fitted.predictor.tags().guards_unfinished
        if mean_s is None or not fitted.samples or not guarded:
            return None
        return Unfinished(
            self._count_unfinished(task_family, longer_than_s=mean_s, running_only=True), mean_s
        )

    def _running(self, task_family: str) -> bool:
        """Whether an attempt of the family is in flight (noted, Pending or running, not yet recorded)."""
        return self._count_unfinished(task_family, longer_than_s=0.0) > 0

    def _count_unfinished(self, task_family: str, *, longer_than_s: float, running_only: bool = False) -> int:
        """The family's noted attempts that started ``longer_than_s`` ago or more, and not stale
        (``running_only``: a Pending pod's wait is not time run)."""
        now = self.session.clock()
        return self.session.store().count_unfinished(
            task_family,
            started_after=now - timedelta(seconds=STALE_AFTER_S),
            started_before=now - timedelta(seconds=longer_than_s),
            running_only=running_only,
        )

    def _with_cpu(
        self, decision: Decision, state: FamilyState | None, limit_millicores: int | None
    ) -> Decision:
        """With ``size_cpu``: the CPU request from the family's recorded cores busy, and why."""
        sizing = self.settings.sizing
        if not sizing.size_cpu or not decision.adaptive:
            return decision
        try:
            nodes = self.session.nodes()
        except HistoryUnavailableError as err:  # the memory decision stands; the CPU request stays
            self.session.unavailable(err)
            return replace(decision, explanation=f"{decision.explanation}; cpu: node profiles unavailable")
        largest = max((n.profile.cores or 0 for n in nodes), default=0) * 1000
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
