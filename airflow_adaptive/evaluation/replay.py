"""Online replay of a trace through a sizing strategy, with the metrics of Witt and Phung.

Tasks arrive in submission order (trace order without timestamps). A strategy
sees only the instances of the same family that completed before the task
started (``completed``) or every earlier instance (``sequential``). An
allocation below the true peak is an OOM kill that costs
allocation x runtime x time-to-failure, then the strategy's retry policy
answers; nothing goes above the cap, and an instance killed at the cap never
succeeds.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from airflow_adaptive.core.decide import warming_up
from airflow_adaptive.core.learn import needs_refit
from airflow_adaptive.core.sizing import Predictor, Sample, make_predictor
from airflow_adaptive.core.sizing.adaptive import MAX_OOM_RATE
from airflow_adaptive.core.sizing.base import MIB, PeakPrior, runtimes
from airflow_adaptive.core.sizing.similar import (
    MIN_SIMILARITY,
    Identity,
    as_identity,
    borrowed_allocation,
    pick_donor,
)
from airflow_adaptive.core.unfinished import Running
from airflow_adaptive.exceptions import InvalidSettingError

GB_H = 1e9 * 3600.0  # byte-seconds in one GB-hour
HISTORY_MODES = ("completed", "sequential")


@dataclass(frozen=True)
class TaskRun:
    """One task instance of a trace, as the replay needs it."""

    family: str
    peak_bytes: int
    wall_seconds: float
    input_size_bytes: int | None = None
    user_request_bytes: int | None = None
    start_s: float | None = None  # when it started; None: trace order only
    finish_s: float | None = None
    image: str | None = None  # what it runs, where the trace says (warm starts compare families by it)
    program: str | None = None


@dataclass(frozen=True)
class ReplayConfig:
    history: str = "completed"
    time_to_failure: float = 1.0
    cap_bytes: int | None = None  # default: the largest peak rounded up to a power of two
    floor_bytes: int = MIB
    # Refit a family's predictor after every completion while it has fewer than 20 samples, then each
    # time its history grew by this fraction (0: after every completion). Bounds replay cost on long traces.
    refit_growth: float = 0.05
    max_attempts: int = 64
    max_oom_rate: float = MAX_OOM_RATE  # the OOM-kill budget of strategies that take one (``adaptive``)
    warm_starts: bool = True  # a cold family's first tries sized by a similar family's model (similar.py)
    min_similarity: float = MIN_SIMILARITY  # of a donor family (similar.py)
    # With completed history: a family's unfinished tasks may floor its first tries (unfinished.py).
    guard_unfinished: bool = True
    # As ``[adaptive] min_observations``: above 1, a family with fewer finished tasks keeps the
    # user's request (no request: the cap, as an unbounded pod could use the whole node).
    min_observations: int = 1

    def __post_init__(self) -> None:
        check_history_and_failures(self.history, HISTORY_MODES, self.time_to_failure)
        if not 0.0 <= self.max_oom_rate <= 1.0:
            raise InvalidSettingError("max_oom_rate must be in [0, 1]")
        if self.min_observations < 1:
            raise InvalidSettingError("min_observations must be at least 1")


def check_history_and_failures(history: str, modes: Sequence[str], time_to_failure: float) -> None:
    """What a replay and a simulation share: a known history mode, and a kill after a share of the
    runtime in (0, 1]."""
    if history not in modes:
        raise InvalidSettingError(f"history must be one of {tuple(modes)}, not {history!r}")
    if not 0.0 < time_to_failure <= 1.0:
        raise InvalidSettingError("time_to_failure must be in (0, 1]")


@dataclass
class StrategyResult:
    """Totals over every attempt of every instance."""

    strategy: str
    instances: int = 0
    waste_byte_s: float = 0.0
    used_byte_s: float = 0.0
    whole_node_waste_byte_s: float = 0.0
    retries: int = 0
    failed: int = 0
    efficiency_sum: float = 0.0
    first_allocations: list[tuple[str, int, int]] = field(default_factory=list)  # (family, predicted, peak)

    def metrics(self) -> dict[str, float | int]:
        n = max(self.instances, 1)
        return {
            "waste_gb_h": self.waste_byte_s / GB_H,
            "maq": self.used_byte_s / (self.used_byte_s + self.waste_byte_s) if self.used_byte_s else 0.0,
            "wrr": 1.0 - self.waste_byte_s / self.whole_node_waste_byte_s
            if self.whole_node_waste_byte_s
            else 0.0,
            "ate": self.efficiency_sum / n,
            "retries_per_100": 100.0 * self.retries / n,
            "failed": self.failed,
        }


def default_cap_bytes(runs: Iterable[TaskRun]) -> int:
    """The largest peak rounded up to a power of two: the 'largest node' of a trace."""
    largest = max((r.peak_bytes for r in runs), default=MIB)
    return 1 << max(int(largest - 1).bit_length(), 20)


def arrival_order(runs: Sequence[TaskRun]) -> list[int]:
    if runs and all(r.start_s is not None for r in runs):
        return sorted(range(len(runs)), key=lambda i: (runs[i].start_s, i))
    return list(range(len(runs)))


class FamilySizer:
    """One family's predictor and its samples; ``ready()`` refits only when the history grew enough."""

    def __init__(self, predictor: Predictor, refit_growth: float, prior: PeakPrior | None = None) -> None:
        self.predictor = predictor
        self.prior = prior
        self.samples: list[Sample] = []
        self.fitted = -1
        self.refit_growth = refit_growth
        self.identity: Identity | None = None  # what the family's newest sample said it runs

    def ready(self) -> Predictor:
        n = len(self.samples)
        if needs_refit(self.fitted, n, self.refit_growth):
            self.predictor.fit(self.samples, self.prior)
            self.fitted = n
        return self.predictor


class FamilyModels:
    """Every family's predictor and samples, with what other families teach a cold one: the peaks
    of their tasks (for a family that asks for no memory) and, with ``warm_starts``, a similar
    family's model (``similar.py``), for strategies that borrow."""

    def __init__(
        self,
        factory: Callable[[], Predictor],
        refit_growth: float,
        *,
        warm_starts: bool,
        min_similarity: float = MIN_SIMILARITY,
        min_observations: int = 1,
        cap_bytes: int | None = None,
        guard_unfinished: bool = True,
    ) -> None:
        self.factory = factory
        self.guard_unfinished = guard_unfinished  # a family's unfinished tasks may floor its first tries
        self.refit_growth = refit_growth
        self.min_observations = min_observations
        self.cap_bytes = cap_bytes  # what a task that asks for nothing may use while warming up
        self.warm_starts = warm_starts
        self.min_similarity = min_similarity
        self.prior = PeakPrior()
        self.sizers: dict[str, FamilySizer] = {}

    def sizer(self, family: str) -> FamilySizer:
        if family not in self.sizers:
            self.sizers[family] = FamilySizer(self.factory(), self.refit_growth, self.prior)
        return self.sizers[family]

    def learn(self, known: Identity | str, sample: Sample) -> None:
        family = as_identity(known)
        sizer = self.sizer(family.family)
        sizer.samples.append(sample)
        if family.image or family.program:
            sizer.identity = family
        self.prior.add(sample.peak_memory_bytes)

    def first_allocation(
        self,
        known: Identity | str,
        input_size_bytes: int | None,
        request_bytes: int | None,
        running: Running | None = None,
        now_s: float = 0.0,
    ) -> tuple[int, Predictor]:
        """The first try's allocation, and the family's predictor (which answers its retries).
        ``running``: the family's unfinished tasks, at ``now_s``."""
        family = as_identity(known)
        own = self.sizer(family.family)
        predictor = own.ready()
        if warming_up(self.min_observations, len(own.samples)):
            return request_bytes or self.cap_bytes or predictor.predict(), predictor  # the user's request
        alone = running is None or not len(running)  # beside a running try, a borrowed guess waits
        if not predictor.warm and predictor.borrows_when_cold and self.warm_starts and alone:
            counts = ((sizer.identity or name, len(sizer.samples)) for name, sizer in self.sizers.items())
            donor = pick_donor(family, counts, min_similarity=self.min_similarity)
            if donor is not None:
                borrowed = self.sizers[donor.family].ready()
                return borrowed_allocation(borrowed, input_size_bytes, request_bytes), predictor
        allocation = predictor.predict(input_size_bytes, request_bytes)
        finished = getattr(predictor, "n_samples_", 0)
        guarded = self.guard_unfinished and predictor.guards_unfinished
        if guarded and predictor.warm and running is not None and len(running) > finished:
            mean_s = float(np.mean(runtimes(own.samples[:finished])))
            if running.longer_than(mean_s, now_s).outnumber(finished):
                cold = self.factory().fit([], self.prior).predict(input_size_bytes, request_bytes)
                allocation = max(allocation, cold)
        return allocation, predictor


def _attempts(
    run: TaskRun, alloc: int, predictor: Predictor, cap: int, config: ReplayConfig, result: StrategyResult
) -> bool:
    """Try ``run`` from ``alloc`` until it fits, the cap is reached or attempts run out; add what it
    cost to ``result``. An OOM-killed try costs its allocation for ``time_to_failure`` of the runtime."""
    t = max(run.wall_seconds, 1e-3)
    ttf = config.time_to_failure
    allocated_byte_s = 0.0
    succeeded = False
    for _ in range(config.max_attempts):
        if alloc >= run.peak_bytes:
            result.waste_byte_s += (alloc - run.peak_bytes) * t
            allocated_byte_s += alloc * t
            succeeded = True
            break
        result.waste_byte_s += alloc * t * ttf
        allocated_byte_s += alloc * t * ttf
        result.retries += 1
        if alloc >= cap:
            break
        alloc = predictor.retry(alloc, run.input_size_bytes, run.user_request_bytes)
    result.instances += 1
    result.used_byte_s += run.peak_bytes * t if succeeded else 0.0
    result.failed += not succeeded
    result.whole_node_waste_byte_s += (cap - run.peak_bytes) * t if run.peak_bytes <= cap else cap * t * ttf
    result.efficiency_sum += (
        (run.peak_bytes * t / allocated_byte_s) if succeeded and allocated_byte_s else 0.0
    )
    return succeeded


def identity(run: TaskRun) -> Identity:
    return Identity(run.family, run.image, run.program)


def _family_models(strategy: str, config: ReplayConfig, cap: int, params: dict[str, object]) -> FamilyModels:
    return FamilyModels(
        lambda: make_predictor(
            strategy,
            cap_bytes=cap,
            floor_bytes=config.floor_bytes,
            max_oom_rate=config.max_oom_rate,
            **params,
        ),
        config.refit_growth,
        warm_starts=config.warm_starts,
        min_similarity=config.min_similarity,
        min_observations=config.min_observations,
        cap_bytes=cap,
        guard_unfinished=config.guard_unfinished,
    )


def replay(
    runs: Sequence[TaskRun],
    strategy: str,
    config: ReplayConfig = ReplayConfig(),
    *,
    imported: Sequence[TaskRun] = (),
    **params: object,
) -> StrategyResult:
    """Replay ``runs`` through the named strategy; deterministic for given runs and parameters.
    ``imported``: history of other families known before the replay starts (another workflow's
    trace, say), which only cold starts draw on; their families should not occur in ``runs``."""
    cap = config.cap_bytes or default_cap_bytes(runs)
    result = StrategyResult(strategy)
    completed = config.history == "completed" and bool(runs) and all(r.start_s is not None for r in runs)
    pending: list[tuple[float, int]] = []  # (finish time, run index) not yet visible to predictors

    models = _family_models(strategy, config, cap, params)

    def learn(run: TaskRun) -> None:
        models.learn(identity(run), Sample(run.peak_bytes, run.input_size_bytes, run.wall_seconds))

    for run in imported:
        learn(run)
    unfinished: dict[str, Running] = {}  # per family: tasks started and not yet learnt from
    for index in arrival_order(runs):
        run = runs[index]
        now_s = run.start_s or 0.0
        if completed:
            while pending and pending[0][0] <= now_s:
                done = heapq.heappop(pending)[1]
                unfinished[runs[done].family].end(done)
                learn(runs[done])
        alloc, predictor = models.first_allocation(
            identity(run),
            run.input_size_bytes,
            run.user_request_bytes,
            unfinished.get(run.family),
            now_s,
        )
        result.first_allocations.append((run.family, alloc, run.peak_bytes))
        if not _attempts(run, alloc, predictor, cap, config, result):
            continue
        if completed:
            finish = (
                run.finish_s
                if run.finish_s is not None
                else (run.start_s or 0.0) + max(run.wall_seconds, 1e-3)
            )
            heapq.heappush(pending, (finish, index))
            unfinished.setdefault(run.family, Running()).start(index, now_s)
        else:
            learn(run)
    return result
