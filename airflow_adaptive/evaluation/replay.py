"""Online replay of a trace through the live memory decision, with the metrics of Witt and Phung.

Tasks arrive in submission order (trace order without timestamps). Each try is
sized by the decision a pod gets (``evaluation/live.py``), from a store that
holds the instances that completed before the task started (``completed``) or
every earlier instance (``sequential``), and the tries of the task's own
earlier OOM kills. An allocation below the true peak is an OOM kill that costs
allocation x runtime x time-to-failure, is recorded as the operator records it,
and the decision's retry answers; nothing goes above the cap, and an instance
killed at the cap never succeeds.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.defaults import MAX_OOM_RATE, MIN_MEMORY_MIB
from airflow_adaptive.core.model import Decision, MemoryRequest
from airflow_adaptive.core.sizing.similar import MIN_SIMILARITY
from airflow_adaptive.core.units import MIB
from airflow_adaptive.evaluation.choices import HISTORY_MODES
from airflow_adaptive.evaluation.live import LiveSizing, Try, replay_settings
from airflow_adaptive.exceptions import InvalidSettingError
from airflow_adaptive.traces.runs import TaskRun

GB_H = 1e9 * 3600.0  # byte-seconds in one GB-hour


@dataclass(frozen=True)
class ReplayConfig:
    history: str = "completed"
    time_to_failure: float = 1.0
    cap_bytes: int | None = None  # default: the largest peak rounded up to a power of two
    floor_bytes: int = MIN_MEMORY_MIB * MIB  # as a deployment's default ``min_memory``
    # As the store refits: after every completion while a family has fewer than 20 samples, then each
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
    resizes: int = 0  # in place, memory over time only
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


def replay_cap_bytes(config: ReplayConfig, runs: Iterable[TaskRun]) -> int:
    """The largest node a replay assumes: ``--cap-bytes``, else :func:`default_cap_bytes`, at least
    the floor (a trace of tiny tasks must not assume a node smaller than the least a pod gets)."""
    return config.cap_bytes or max(default_cap_bytes(runs), config.floor_bytes)


def arrival_order(runs: Sequence[TaskRun]) -> list[int]:
    if runs and all(r.start_s is not None for r in runs):
        return sorted(range(len(runs)), key=lambda i: (runs[i].start_s, i))
    return list(range(len(runs)))


def _allocation(decision: Decision, cap: int) -> dict[str, int | None]:
    """What a pod with this decision may use: an unset limit (or request) is the whole node, and
    nothing goes above it (the cap is the trace's largest node: a larger request kept as the user
    asked would run on no node)."""
    limit = min(decision.memory_limit_bytes or decision.memory_request_bytes or cap, cap)
    return {"request": min(decision.memory_request_bytes or limit, limit), "limit": limit}


@dataclass
class _Instance:
    """A task instance being tried: its run and what its tries have been allocated so far."""

    run: TaskRun
    index: int
    allocated_byte_s: float = 0.0


@dataclass(frozen=True)
class TryOutcome:
    """What one try did: whether it fitted, how long it held memory (its runtime, or until the
    kill), the byte-seconds it held and used, the limit in force at its end, and in-place resizes."""

    fitted: bool
    seconds: float
    held_byte_s: float
    used_byte_s: float
    limit_bytes: int
    resizes: int = 0


# How a try of an instance (its index, run and try number) ends under a limit.
TryModel = Callable[[int, TaskRun, int, int], TryOutcome]


def peak_model(time_to_failure: float) -> TryModel:
    """Only the peak is known: a try fits when its limit covers the peak and holds the limit for the
    runtime; a kill holds it for ``time_to_failure`` of the runtime."""

    def outcome(index: int, run: TaskRun, number: int, limit: int) -> TryOutcome:
        t = max(run.wall_seconds, 1e-3)
        if limit >= run.peak_bytes:
            return TryOutcome(True, t, limit * t, run.peak_bytes * t, limit)
        killed_s = t * time_to_failure
        return TryOutcome(False, killed_s, limit * killed_s, 0.0, limit)

    return outcome


def _one_try(
    inst: _Instance, number: int, live: LiveSizing, cap: int, config: ReplayConfig, result: StrategyResult,
    model: TryModel,
) -> TryOutcome | None:  # fmt: skip
    """Try ``number`` of an instance, sized by the live decision at the live clock and noted as started.
    Its outcome when it was OOM-killed and is to be tried again when the kill is recorded; None when it
    fitted, or was killed at the cap or out of attempts."""
    run = inst.run
    user = MemoryRequest(run.user_request_bytes, run.user_request_bytes)
    attempt = Try(run.family, str(inst.index), number, user, run.input_size_bytes, run.image, run.program)
    alloc = _allocation(live.decide(attempt), cap)
    limit = int(alloc["limit"] or cap)
    if number == 1:
        result.first_allocations.append((run.family, limit, run.peak_bytes))
    live.started(attempt)
    out = model(inst.index, run, number, limit)
    inst.allocated_byte_s += out.held_byte_s
    result.resizes += out.resizes
    if out.fitted:
        result.waste_byte_s += out.held_byte_s - out.used_byte_s
        live.ended(attempt, alloc, run.peak_bytes, out.seconds, run.finish_s if number == 1 else None)
        _close(inst, out, cap, config, result)
        return None
    result.waste_byte_s += out.held_byte_s
    result.retries += 1
    killed = {**alloc, "limit": out.limit_bytes, "request": min(alloc["request"] or cap, out.limit_bytes)}
    live.ended(attempt, killed, None, out.seconds, None)
    if out.limit_bytes >= cap or number >= config.max_attempts:
        _close(inst, None, cap, config, result)
        return None
    return out


def _close(
    inst: _Instance, fitted: TryOutcome | None, cap: int, config: ReplayConfig, result: StrategyResult
) -> None:
    """Count a finished instance; ``fitted``: the try that fitted (None: it failed). Its use, and what
    the whole node would have wasted, are read in the try's own model: memory over time uses less than
    its peak for most of a run, so a node held that long wastes more than the peak model says."""
    run = inst.run
    result.instances += 1
    if fitted is None:
        result.failed += 1
        result.whole_node_waste_byte_s += failed_whole_node_byte_s(run, cap, config.time_to_failure)
        return
    result.used_byte_s += fitted.used_byte_s
    result.whole_node_waste_byte_s += cap * fitted.seconds - fitted.used_byte_s
    result.efficiency_sum += fitted.used_byte_s / inst.allocated_byte_s if inst.allocated_byte_s else 0.0


def failed_whole_node_byte_s(run: TaskRun, cap: int, time_to_failure: float) -> float:
    """What the whole node would have wasted on a task that failed here: the node less its peak for
    its runtime, or, above the node, the node until the kill."""
    t = max(run.wall_seconds, 1e-3)
    return (cap - run.peak_bytes) * t if run.peak_bytes <= cap else cap * t * time_to_failure


def sizing_for(strategy: str, config: ReplayConfig, cap: int, params: dict[str, Any]) -> SizingSettings:
    """The decision's settings that a replay under ``config`` stands for."""
    return SizingSettings(
        strategy=strategy,
        min_observations=config.min_observations,
        floor_bytes=config.floor_bytes,
        cap_bytes=cap,
        max_oom_rate=config.max_oom_rate,
        warm_starts=config.warm_starts,
        min_similarity=config.min_similarity,
        guard_unfinished=config.guard_unfinished,
        refit_growth=config.refit_growth,
        params=params,
    )


def replay(
    runs: Sequence[TaskRun],
    strategy: str,
    config: ReplayConfig = ReplayConfig(),
    *,
    imported: Sequence[TaskRun] = (),
    journal: list[tuple[Any, ...]] | None = None,
    deployed: SizingSettings | None = None,
    model: TryModel | None = None,
    **params: Any,
) -> StrategyResult:
    """Replay ``runs`` through the named strategy; deterministic for given runs and parameters.
    ``imported``: history of other families known before the replay starts (another workflow's
    trace, say), which only cold starts draw on; their families should not occur in ``runs``.
    ``journal``: filled with every store write and decision, in order (``evaluation/live.py``).
    ``deployed``: a deployment's own sizing settings (the what-if): the decision then runs with
    them, only the strategy and its parameters replaced, and their cap is the replay's; ``config``
    then gives only the replay's own terms (history, time to failure, tries).
    ``model``: how a try ends under its limit (default: :func:`peak_model`; memory over time:
    ``evaluation/series.py``)."""
    model = model or peak_model(config.time_to_failure)
    cap = deployed.cap_bytes if deployed is not None else replay_cap_bytes(config, runs)
    result = StrategyResult(strategy)
    completed = config.history == "completed" and bool(runs) and all(r.start_s is not None for r in runs)
    sizing = (
        sizing_for(strategy, config, cap, params)
        if deployed is None
        else replace(deployed, strategy=strategy, params=params)
    )
    live = LiveSizing(replay_settings(sizing), journal, completed=completed)
    live.imported(imported)
    if not completed:  # every try of a task at once, in trace order
        for index in arrival_order(runs):
            inst, number = _Instance(runs[index], index), 1
            while _one_try(inst, number, live, cap, config, result, model) is not None:
                number += 1
        return result
    tries = [(runs[i].start_s or 0.0, i, i, 1) for i in range(len(runs))]  # (when, order, index, number)
    heapq.heapify(tries)
    instances = {i: _Instance(run, i) for i, run in enumerate(runs)}
    order = len(runs)
    while tries:
        when_s, _, index, number = heapq.heappop(tries)
        live.advance(when_s)  # what finished by then is recorded first
        killed = _one_try(instances[index], number, live, cap, config, result, model)
        if killed is not None:
            order += 1  # the retry starts when the kill is recorded
            heapq.heappush(tries, (when_s + killed.seconds, order, index, number + 1))
    return result
