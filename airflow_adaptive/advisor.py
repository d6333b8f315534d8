"""Joins settings, the history store and the pure decision, failing open at every step."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace

from sqlalchemy.exc import SQLAlchemyError

from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.decide import decide_memory
from airflow_adaptive.core.labels import GroupCapacity, feature_capacities, task_labels
from airflow_adaptive.core.model import Decision, MemoryRequest, Observation, TaskKey
from airflow_adaptive.core.placement import GroupView, PlacementEngine, PlacementResult, TaskDemandView
from airflow_adaptive.core.sizing.base import RequestRatioPrior
from airflow_adaptive.core.units import format_bytes
from airflow_adaptive.exceptions import AdaptiveError, HistoryUnavailableError
from airflow_adaptive.store.access import open_repository, warn_once
from airflow_adaptive.store.nodes import NodeRepository, family_demands, group_views
from airflow_adaptive.store.repository import HistoryRepository
from airflow_adaptive.store.spool import Spool

log = logging.getLogger(__name__)

# Errors that mean "the store is not usable now"; anything else is a bug and propagates.
STORE_ERRORS = (SQLAlchemyError, HistoryUnavailableError, OSError)


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
    """Decides memory for a task family and records attempts."""

    def __init__(
        self,
        settings: AdaptiveSettings,
        repository_factory: Callable[[], HistoryRepository] | None = None,
    ) -> None:
        self.settings = settings
        self._factory = repository_factory or (
            lambda: open_repository(settings.history_conn_id, settings.store_timeout_seconds)
        )

    def decide(
        self,
        task_family: str,
        user: MemoryRequest,
        key: TaskKey | None = None,
        *,
        input_size_bytes: int | None = None,
        previous_attempt: Observation | None = None,
    ) -> Decision:
        """The decision for the next attempt; the user's resources when history is unavailable."""
        try:
            repo = self._factory()
            history = repo.history(task_family, limit=self.settings.history_window)
            prior = RequestRatioPrior()
            if not history:  # other families' request ratios only matter for a cold start
                for peak, request in repo.request_ratios():
                    prior.add(peak, request)
            if previous_attempt is None and key is not None and key.try_number > 1:
                previous_attempt = repo.attempt(replace(key, try_number=key.try_number - 1))
        except STORE_ERRORS as err:
            reason = f"history store unavailable ({type(err).__name__}: {err})"
            warn_once(reason.splitlines()[0][:300])
            return keep_user(user, "history store unavailable")
        try:
            return decide_memory(
                history,
                user,
                self.settings.sizing,
                previous_attempt=previous_attempt,
                input_size_bytes=input_size_bytes,
                prior=prior,
            )
        except AdaptiveError as err:  # e.g. an unknown strategy name in config
            warn_once(str(err))
            return keep_user(user, str(err))

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
            repo = self._factory()
            groups = group_views(NodeRepository(repo.engine).nodes())
            demands = family_demands(repo.engine) if groups else {}
        except STORE_ERRORS as err:
            warn_once(f"node groups unavailable ({type(err).__name__})")
            return PlacementResult((), (), False, ("node groups unavailable",))
        if not groups:
            return PlacementResult((), (), False, ("no node groups profiled yet",))
        capacities = feature_capacities(
            [GroupCapacity(g["task_ranks"], g["cores"], g["memory_bytes"], len(g["members"])) for g in groups]
        )
        labels = task_labels(task_family, demands, capacities)
        views = [
            GroupView(
                g["id"],
                g["task_ranks"],
                frozenset(g["capabilities"]),
                g["largest_memory_bytes"],
                tuple(g["members"]),
                idle_nodes=(idle_nodes or {}).get(g["id"], 0),
            )
            for g in groups
        ]
        return PlacementEngine().place(replace(task, labels=labels), views)

    def record(self, observation: Observation) -> bool:
        """Record an attempt (and any spooled ones); spool it when the store is unavailable."""
        spool = Spool(self.settings.spool_dir)
        try:
            repo = self._factory()
            pending = spool.pending()
            repo.record([observation, *(obs for _, obs in pending)])
        except STORE_ERRORS as err:
            warn_once(f"cannot record task attempts ({type(err).__name__}); spooling to {spool.folder}")
            try:
                spool.put(observation)
            except OSError as spool_err:
                log.error("airflow-adaptive: attempt %s lost: %s", observation.key, spool_err)
            return False
        for path, _ in pending:
            path.unlink(missing_ok=True)
        return True
