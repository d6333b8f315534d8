"""One simulated run: a workload on a cluster under one placement and one sizing policy (SimPy).

The scheduler works like kube-scheduler: pending pods are tried in queue order
(``queues``: FIFO by priority and arrival, least-finished-first or critical
path), a pod that fits nowhere waits without blocking other task families, and a
cycle runs once per instant after every event of that instant. Each pod is placed in two steps:
``core.placement`` filters and orders the node groups (the policy under test),
then the policy's node rule picks a node inside the first group that has room
(soft preferences: later groups are fallbacks). Requests are reserved; a peak
above the memory limit is an OOM kill after ``time_to_failure`` of the runtime,
then the sizing policy's retry answers, never above the largest node.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import simpy

from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.fitted_model import needs_refit
from airflow_adaptive.core.grouping import task_feature_ranks
from airflow_adaptive.core.labels import GroupCapacity, feature_capacities, task_labels
from airflow_adaptive.core.lff import class_tier
from airflow_adaptive.core.placement import TaskDemandView, engine_for
from airflow_adaptive.core.runtimes import Run, RuntimeModel, feature_scores, fit_runtimes
from airflow_adaptive.core.sketch import LogHistogram
from airflow_adaptive.evaluation.replay import GB_H

from .bounds import runtime_on
from .cluster import Cluster, SimNode
from .cpu_sizer import CpuSizer
from .group_state import GroupState, SimNodeState
from .node_rules import node_rules
from .params import DEFAULT_PARAMS, SIZINGS, SimParams
from .placements import LIVE, LOCALITY, WITHOUT_LIVE_LOAD, base_placement
from .queues import PendingQueue
from .results import RunResult, Span
from .sharing import Sharing
from .sizing import SimSizing
from .storage import SharedStorage
from .workload import FamilyStats, SimTask, Workload, dominant_features, family_demands

RUNTIME_WINDOW = 200  # recent runs a family's runtime model is fitted on
SIZING = SizingSettings()  # the provider's defaults: strategy "adaptive", 64 MiB floor
EPS = 1e-9


@dataclass
class _Attempt:
    task: int
    number: int
    memory_bytes: int
    ready_s: float
    cores: float  # the attempt's CPU request (the user's, or size_cpu's)


class Simulation:
    """Build once, ``run()`` once. Deterministic for the same inputs and ``seed``."""

    def __init__(
        self,
        cluster: Cluster,
        workload: Workload,
        placement: str,
        sizing: str = "user",
        params: SimParams = DEFAULT_PARAMS,
        seed: int = 0,
        *,
        queue: str = "fifo",
        record_timeline: bool = False,
    ) -> None:
        self.base = base_placement(placement)
        self.strategy = SIZINGS.get(sizing)  # the provider's sizing strategy this sizing runs
        self.cluster, self.workload, self.params = cluster, workload, params
        self.placement, self.sizing = placement, sizing
        self.record_timeline = record_timeline
        self.env = simpy.Environment()
        self.result = RunResult(placement, sizing, queue)
        self.engine = engine_for(self.base.removesuffix("-idle").removesuffix("-live"))
        self.live = self.base in LIVE  # told each group's load now, as placement_live_load does
        self.blind = self.base == WITHOUT_LIVE_LOAD
        self.by_node = self.live and self.engine.needs_runtimes  # what live load tells finish-time
        self.tasks: Sequence[SimTask] = workload.tasks
        specs = list(cluster.nodes)
        if params.shuffle_nodes:
            specs = [specs[i] for i in np.random.default_rng(seed).permutation(len(specs))]
        self._groups(cluster, specs)
        self.cap_bytes = cluster.largest_memory_bytes
        sized = params.size_cpu and sizing != "user"  # the provider's size_cpu, with its defaults
        self.cpu = CpuSizer(SIZING, max(n.cores for n in cluster.nodes)) if sized else None
        self.dominant = dominant_features(family_demands(self.tasks))
        self._history(params.history == "prior-run")
        rules = node_rules(self.dominant, len(self.nodes))
        self.node_rule, self.spread = rules[self.base], rules["fair"]
        self.storage = SharedStorage(
            self.tasks, [n.spec.name for n in self.nodes], params, locality=placement.endswith(LOCALITY)
        )
        self.children: list[list[int]] = [[] for _ in self.tasks]
        index = {t.id: i for i, t in enumerate(self.tasks)}
        self.waiting_on = [len(t.parents) for t in self.tasks]
        for i, t in enumerate(self.tasks):
            for p in t.parents:
                self.children[index[p]].append(i)
        done = self.successes.get  # LFF's key: successes so far; PriorityClasses: where they stand
        tier = lambda f: class_tier(self.success_counts.share_below(done(f, 0)))  # noqa: E731
        self.pending = PendingQueue(queue, workload, lambda f: done(f, 0), tier)
        self.attempts: list[_Attempt] = []
        self.sharing = Sharing(params)  # the running attempts' progress
        self._cycle_planned = False
        self._most_free_cores = 0.0
        self._waits = 0.0
        self._reserved_core_s: dict[int, float] = {}
        self._work_core_s: dict[int, float] = {}

    def _groups(self, cluster: Cluster, specs: Sequence[SimNode]) -> None:
        grouping = cluster.grouping
        group_of = {m: g.id for g in grouping.groups for m in g.members}
        self.nodes = [
            SimNodeState(s, i, group_of[s.name], s.cores, s.memory_bytes) for i, s in enumerate(specs)
        ]
        self.group_ranks = {g.id: task_feature_ranks(g.ranks) for g in grouping.groups}
        self.groups = GroupState(self.group_ranks, self.params.live_load_ttl_s)
        self.group_scores = {g.id: feature_scores(g.means) for g in grouping.groups}
        self.total_cores = {
            g.id: sum(n.spec.cores for n in self.nodes if n.group == g.id) for g in grouping.groups
        }
        self.capacities = feature_capacities(
            [
                GroupCapacity(
                    self.group_ranks[g.id],
                    self.total_cores[g.id],
                    sum(n.spec.memory_bytes for n in self.nodes if n.group == g.id),
                    len(g.members),
                )
                for g in grouping.groups
            ]
        )

    # --- knowledge -------------------------------------------------------------------------
    def _history(self, prior_run: bool) -> None:
        self.successes: dict[str, int] = {}  # per family, as the store counts them (LFF's key)
        self.success_counts = LogHistogram()  # every family's successes, as the store keeps them
        sizing = replace(SIZING, strategy=self.strategy)
        self.sizer = SimSizing(self.tasks, sizing, self.cap_bytes, online=not prior_run)
        self.stats = FamilyStats()
        self._labels: dict[str, dict[str, int] | None] = {}
        self._learned = 0
        self._labelled_at = 0
        self._runs: dict[str, list[Run]] = {}  # per family: the runs recorded, with their group
        self._runtime_models: dict[str, RuntimeModel | None] = {}
        self._fitted_on: dict[str, int] = {}  # per family: the runs its runtime model was fitted on
        if prior_run:
            for i, t in enumerate(self.tasks):
                self._count(t.family, 1)
                self._learn(t, t.runtime_s)
                # The earlier run spread its pods over the nodes: each family ran where it landed.
                node = self.nodes[i % len(self.nodes)]
                self._ran(t, node.group, runtime_on(t, node.spec, self.dominant[t.family]))

    def _ran(self, task: SimTask, group: int, runtime_s: float) -> None:
        runs = self._runs.setdefault(task.family, [])
        runs.append(Run(group, runtime_s, task.input_size_bytes))
        # As the store refits a family's model: after every run while it has few, then as it grows 5 %.
        if needs_refit(self._fitted_on.get(task.family, -1), len(runs), SIZING.refit_growth):
            self._runtime_models.pop(task.family, None)

    def expected_runtime_s(self, task: SimTask) -> dict[int, float]:
        """The task's expected runtime per group, from its family's recorded runs (core/runtimes.py)."""
        if task.family not in self._runtime_models:
            runs = self._runs.get(task.family, [])
            self._fitted_on[task.family] = len(runs)
            self._runtime_models[task.family] = fit_runtimes(runs[-RUNTIME_WINDOW:], self.group_scores)
        model = self._runtime_models[task.family]
        if model is None:
            return {}
        return {g: e.seconds for g, e in model.expected(self.group_scores, task.input_size_bytes).items()}

    def _count(self, family: str, successes: int) -> None:
        """The store's view for least-finished-first: a family counted from its first attempt on."""
        before = self.successes.get(family)
        if before is not None:
            self.success_counts.add(before, -1)
        self.successes[family] = (before or 0) + successes
        self.success_counts.add(self.successes[family])

    def _learn(self, t: SimTask, runtime_s: float) -> None:
        """What the simulator's own statistics (labels, SJFN, CPU) learn from a finished task."""
        first = self.stats.add(t, runtime_s)
        if self.cpu:
            self.cpu.learn(t)
        self._learned += 1
        if first or self._learned >= 1.05 * self._labelled_at + 1:
            self._labels.clear()  # labels are relative to every family: refresh them all
            self._labelled_at = self._learned

    def labels(self, family: str) -> dict[str, int] | None:
        if family not in self._labels:
            self._labels[family] = task_labels(family, self.stats.demands(), self.capacities)
        return self._labels[family]

    def known_runtime_s(self, family: str) -> float:
        """SJFN's estimate: the family's mean runtime so far; unknown families go first (0)."""
        return self.stats.mean_runtime_s(family) or 0.0

    # --- placement -------------------------------------------------------------------------
    def pick(self, attempt: _Attempt) -> SimNodeState | None:
        task = self.tasks[attempt.task]
        if attempt.cores > self._most_free_cores + EPS:
            return None
        fits = [
            n
            for n in self.nodes
            if n.active
            and n.free_cores >= attempt.cores - EPS
            and n.free_memory_bytes >= attempt.memory_bytes
            and task.required_capabilities <= n.spec.capabilities
        ]
        if not fits:
            return None
        demand = TaskDemandView(
            task.family,
            self.labels(task.family),
            attempt.memory_bytes,
            task.required_capabilities,
            self.expected_runtime_s(task) if self.engine.needs_runtimes else None,
            attempt.cores,
            self.stats.mean_cores_used(task.family),
        )
        views = self.groups.now(
            self.nodes, self.env.now, blind=self.blind, live=self.live, by_node=self.by_node
        )
        result = self.engine.place(demand, views)
        if not result.ranked:
            return None
        local = self.storage.local_bytes(task)
        if local:
            order = [r.group.id for r in result.ranked] if result.preference else []
            nearest = self.storage.nearest(fits, order, local, self.known_runtime_s(task.family) or None)
            return (self.node_rule if order else self.spread)(nearest, task)
        if result.preference:
            for ranked in result.ranked:
                inside = [n for n in fits if n.group == ranked.group.id]
                if inside:
                    return self.node_rule(inside, task)
        return self.spread(fits, task)  # no preference: spread (Tarema's unknown tasks)

    # --- events ----------------------------------------------------------------------------
    def _submit(self, task_index: int, number: int, memory_bytes: int, cores: float) -> None:
        task = self.tasks[task_index]
        self.attempts.append(_Attempt(task_index, number, memory_bytes, self.env.now, cores))
        key = self.known_runtime_s(task.family) if self.base == "sjfn" else 0.0
        self.pending.push(len(self.attempts) - 1, task_index, number - 1, key)
        self._plan_cycle()

    def _plan_cycle(self) -> None:
        if not self._cycle_planned:
            self._cycle_planned = True
            self.env.timeout(0).callbacks.append(self._cycle)

    def _cycle(self, _event: object = None) -> None:
        self._cycle_planned = False
        self._most_free_cores = max((n.free_cores for n in self.nodes if n.active), default=0.0)
        heads = self.pending.heads()
        while heads:
            entry, shape = heapq.heappop(heads)
            aid = int(entry[-1])
            node = self.pick(self.attempts[aid])
            if node is None:
                continue  # this sub-queue's first pod fits nowhere now; other sub-queues may
            self.pending.pop(shape)
            self._start(aid, node)
            self._most_free_cores = max(n.free_cores for n in self.nodes if n.active)
            following = self.pending.head(shape)
            if following is not None:
                heapq.heappush(heads, following)

    def _start(self, aid: int, node: SimNodeState) -> None:
        attempt, p = self.attempts[aid], self.params
        task = self.tasks[attempt.task]
        dominant = self.dominant[task.family]
        read = self.storage.read(task, node.spec.name, node.free_memory_bytes - attempt.memory_bytes)
        node.free_memory_bytes -= read.ram_bytes  # a RAM disk holds node memory (tmpfs)
        if read.shared_seconds:
            self.env.timeout(p.pod_startup_s + read.shared_seconds).callbacks.append(
                self.storage.done_reading
            )
        oom = task.peak_memory_bytes > attempt.memory_bytes
        work_s = runtime_on(task, node.spec, dominant) * (p.time_to_failure if oom else 1.0)
        node.free_cores -= attempt.cores
        self.groups.started(node, attempt.cores)
        node.free_memory_bytes -= attempt.memory_bytes
        node.running[aid] = (dominant, task.cpu_cores_used)
        # What the pod's annotation would say: its family's recorded mean, else its request.
        known = self.stats.mean_cores_used(task.family)
        node.expected_busy[aid] = attempt.cores if known is None else known
        now = self.env.now
        self.sizer.started(attempt.task, attempt.number, now + p.pod_startup_s)  # noted again: running
        self._waits += now - attempt.ready_s
        self.result.attempts += 1
        self._work_core_s[node.group] = self._work_core_s.get(node.group, 0.0) + task.cpu_cores_used * work_s
        if attempt.number == 1:
            self.result.tasks_by_group[node.group] = self.result.tasks_by_group.get(node.group, 0) + 1
        self.sharing.start(aid, now, p.pod_startup_s + read.seconds, work_s, oom)
        self._reshare(node)

    def _reshare(self, node: SimNodeState) -> None:
        """Every attempt on the node at its speed now; an attempt whose speed changed ends anew."""
        for aid, left_s, version in self.sharing.reshare(node.running, node.spec.cores, self.env.now):
            self.env.timeout(left_s).callbacks.append(partial(self._end, aid, node, version))

    def _end(self, aid: int, node: SimNodeState, version: int, _event: object = None) -> None:
        progress = self.sharing.ending(aid, version)
        if progress is None:
            return  # rescheduled since
        now = self.env.now
        attempt = self.attempts[aid]
        self._reserved_core_s[node.group] = self._reserved_core_s.get(node.group, 0.0) + attempt.cores * (
            now - progress.started_s
        )
        if self.record_timeline:
            task = self.tasks[attempt.task]
            self.result.timeline.append(
                Span(node.spec.name, task.id, progress.started_s, now, task.family, progress.oom)
            )
        self._finish(aid, node, progress.ran_s(now), progress.oom)
        self._reshare(node)

    def _finish(self, aid: int, node: SimNodeState, ran_s: float, oom: bool) -> None:
        attempt = self.attempts[aid]
        task = self.tasks[attempt.task]
        node.free_cores += attempt.cores
        node.free_memory_bytes += attempt.memory_bytes
        del node.running[aid]
        del node.expected_busy[aid]
        self.groups.ended(node, attempt.cores)
        self.result.makespan_s = max(self.result.makespan_s, self.env.now)
        self._count(task.family, 0 if oom else 1)
        if oom:
            self.result.oom_kills += 1
            self.result.waste_gb_h += attempt.memory_bytes * ran_s / GB_H
            if attempt.memory_bytes >= self.cap_bytes or attempt.number >= self.params.max_attempts:
                self.result.failed += 1
                self.sizer.given_up(attempt.task, attempt.number)
            else:
                retry = self.sizer.retry(
                    attempt.task, attempt.number, attempt.memory_bytes, ran_s, self.env.now
                )
                self._submit(attempt.task, attempt.number + 1, retry, attempt.cores)
        else:
            self.result.succeeded += 1
            self.result.waste_gb_h += (attempt.memory_bytes - task.peak_memory_bytes) * ran_s / GB_H
            self.result.used_gb_h += task.peak_memory_bytes * ran_s / GB_H
            if self.params.history == "online":
                self._learn(task, ran_s)
                self._ran(task, node.group, ran_s)
            self.sizer.ended(attempt.task, attempt.number, attempt.memory_bytes, ran_s, self.env.now)
            for child in self.children[attempt.task]:
                self.waiting_on[child] -= 1
                if self.waiting_on[child] == 0:
                    self._submit_first(child)
        self._plan_cycle()

    def _submit_first(self, task_index: int) -> None:
        task = self.tasks[task_index]
        alloc = self.sizer.first(task_index, self.env.now)
        cores = self.cpu.request_cores(task) if self.cpu else task.request_cores
        self._submit(task_index, 1, max(SIZING.floor_bytes, min(int(alloc), self.cap_bytes)), cores)

    def _activate(self, node: SimNodeState, _event: object = None) -> None:
        node.active = True
        self.groups.refresh(self.nodes)
        self._plan_cycle()

    def run(self) -> RunResult:
        for node in self.nodes:
            if node.spec.available_at_s <= 0:
                node.active = True
            else:
                self.env.timeout(node.spec.available_at_s).callbacks.append(partial(self._activate, node))
        self.groups.refresh(self.nodes)
        for i in self.workload.order:
            if self.waiting_on[i] == 0:
                self._submit_first(i)
        self.env.run()
        r = self.result
        r.mean_wait_s = self._waits / r.attempts if r.attempts else 0.0
        r.never_ran = len(self.tasks) - r.succeeded - r.failed
        r.shared_storage_read_bytes = self.storage.shared_read_bytes
        for gid in self.group_ranks:
            core_s = self.total_cores[gid] * r.makespan_s
            r.utilisation_by_group[gid] = self._reserved_core_s.get(gid, 0.0) / core_s if core_s else 0.0
            r.busy_by_group[gid] = self._work_core_s.get(gid, 0.0) / core_s if core_s else 0.0
        return r
