"""Where and in which order an attempt runs: its node groups (Tarema) and its least-finished-first rank."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from airflow_adaptive.advice.session import StoreSession
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.labels import GroupCapacity, feature_capacities, labels_from_distributions
from airflow_adaptive.core.lff import FamilyProgress, PriorityChoice, choose_priority
from airflow_adaptive.core.node_groups import StoredNode, summarize_groups
from airflow_adaptive.core.placement import (
    DEFAULT_PLACEMENT,
    GroupLoad,
    GroupView,
    PlacementEngine,
    PlacementResult,
    TaskDemandView,
    engine_for,
)
from airflow_adaptive.core.runtimes import (
    RuntimeEstimate,
    StoredRun,
    feature_scores,
    fit_runtimes,
    runs_on_groups,
)
from airflow_adaptive.exceptions import HistoryUnavailableError, UnknownStrategyError
from airflow_adaptive.failopen import warn_once
from airflow_adaptive.store.api import SizingStore


class PlacementAdvice:
    def __init__(self, settings: AdaptiveSettings, session: StoreSession[SizingStore]) -> None:
        self.settings = settings
        self.session = session

    def progress(self, task_family: str) -> FamilyProgress | None:
        """The family's successes and failures, for Airflow's queue weight (``weight_rule.py``): from
        its row when this session read it (a page of families), else two columns of it; raises
        HistoryUnavailableError (the weight strategy falls back itself)."""
        if self.session.has_read(task_family):
            state = self.session.family(task_family)
            return state.progress if state else None
        return self.session.store().progress(task_family)

    def priority(self, task_family: str, static_weight: int = 0) -> PriorityChoice | None:
        """The family's least-finished-first rank (None when the store is unavailable)."""
        try:
            state = self.session.family(task_family)
            successes = self.session.distributions().successes
        except HistoryUnavailableError as err:
            self.session.unavailable(err)
            return None
        progress = state.progress if state else None
        return choose_priority(
            progress or FamilyProgress(0, 0), successes, self.settings.lff_failures, static_weight
        )

    def place(
        self,
        task_family: str,
        required_capabilities: frozenset[str],
        memory_request_bytes: int | None,
        loads: Mapping[int, GroupLoad] | None = None,
        input_size_bytes: int | None = None,
        *,
        request_cores: float = 0.0,
        limit_cores: float | None = None,
        with_runtimes: bool = False,
    ) -> PlacementResult:
        """Preferred node groups for the family (no preference when groups or history are unavailable).
        Its expected runtime per group is learnt when the policy needs it or ``with_runtimes``."""
        task = TaskDemandView(
            task_family, None, memory_request_bytes, required_capabilities, request_cores=request_cores
        )
        try:
            nodes = self.session.nodes()
            groups = summarize_groups(nodes)
            if not groups:
                return PlacementResult((), (), False, ("no node groups profiled yet",))
            state = self.session.family(task_family)
            demand = self.session.distributions().demand
        except HistoryUnavailableError as err:
            self.session.unavailable(err)
            return PlacementResult((), (), False, ("node groups unavailable",))
        capacities = feature_capacities(
            [GroupCapacity(g.task_ranks, g.cores, g.memory_bytes, len(g.members)) for g in groups]
        )
        own = state.rollup.demand() if state else None
        labels = labels_from_distributions(own, demand, capacities)
        engine = self._engine()
        runtimes = None
        if with_runtimes or engine.needs_runtimes:
            runtimes = self._runtimes(
                state.model.runs if state and state.model else (), nodes, input_size_bytes
            )
        load = {g.id: (loads or {}).get(g.id, GroupLoad()) for g in groups}
        views = [
            GroupView(
                g.id,
                g.task_ranks,
                g.capabilities,
                g.largest_memory_bytes,
                g.members,
                reserved_fraction=load[g.id].reserved_fraction,
                idle_nodes=load[g.id].idle_nodes,
                # Live load lists every group with a labelled node; one it does not list has none now.
                nodes=None if loads is None else load[g.id].nodes,
            )
            for g in groups
        ]
        busy = own.cpu_cores if own else None
        if busy is not None and limit_cores:
            busy = min(busy, limit_cores)  # a CPU limit caps what it can keep busy
        return engine.place(replace(task, labels=labels, runtime_by_group_s=runtimes, busy_cores=busy), views)

    @staticmethod
    def _runtimes(
        stored: Sequence[StoredRun], nodes: Sequence[StoredNode], input_size_bytes: int | None
    ) -> dict[int, float] | None:
        """Expected runtime per group; None (no preference by runtime) when it cannot be learnt: a
        pod is never stopped by it."""
        try:
            estimates = runtime_estimates(stored, nodes, input_size_bytes)
            return {g: e.seconds for g, e in estimates.items()} if estimates else None
        except Exception as err:  # numerical trouble in stored runs or profiles: place without
            warn_once(
                f"expected runtimes unavailable ({type(err).__name__}: {err})", "pods are placed without them"
            )
            return None

    def _engine(self) -> PlacementEngine:
        """The configured policy's engine; an unknown name places as the default does (logged once)."""
        try:
            return engine_for(self.settings.placement_policy)
        except UnknownStrategyError as err:
            warn_once(f"placement_policy: {err}", f"pods are placed by {DEFAULT_PLACEMENT}")
            return engine_for(DEFAULT_PLACEMENT)

    def mean_runtime_s(self, task_family: str) -> float | None:
        """The family's mean recorded runtime; None when unknown or the store is unavailable."""
        try:
            state = self.session.family(task_family)
        except HistoryUnavailableError as err:
            self.session.unavailable(err)
            return None
        return state.rollup.mean_wall_seconds if state else None


def runtime_estimates(
    stored: Sequence[StoredRun], nodes: Sequence[StoredNode], input_size_bytes: int | None = None
) -> dict[int, RuntimeEstimate]:
    """A family's expected runtime per node group from its stored runs and the nodes' benchmark
    scores (``core/runtimes.py``); empty when it has no run on a grouped node."""
    group_of = {n.name: n.group_id for n in nodes if n.group_id is not None}
    members: dict[int, list[StoredNode]] = {}
    for n in nodes:
        if n.group_id is not None:
            members.setdefault(n.group_id, []).append(n)
    scores = {g: feature_scores(_mean_benchmarks(ns)) for g, ns in members.items()}
    model = fit_runtimes(runs_on_groups(stored, group_of), scores)
    return model.expected(scores, input_size_bytes) if model else {}


def _mean_benchmarks(nodes: Sequence[StoredNode]) -> dict[str, float]:
    """Each benchmark's mean over the nodes that measured it."""
    values: dict[str, list[float]] = {}
    for n in nodes:
        for name, value in n.profile.benchmarks.items():
            values.setdefault(name, []).append(value)
    return {name: sum(v) / len(v) for name, v in values.items()}
