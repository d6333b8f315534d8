"""Replay trace files through sizing strategies, side by side, in parallel processes."""

from __future__ import annotations

import functools
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from airflow_adaptive.core.sizing import ANCHORS, predictor_names, quick_predictor_names
from airflow_adaptive.core.sizing.base import PREDICTORS
from airflow_adaptive.evaluation.pareto import pareto
from airflow_adaptive.evaluation.replay import ReplayConfig, replay, replay_cap_bytes
from airflow_adaptive.traces.load import replay_input
from airflow_adaptive.traces.runs import TaskRun

DEFAULT_STRATEGY = "adaptive"


@functools.lru_cache(maxsize=8)
def _trace(path: str, fmt: str) -> tuple[tuple[TaskRun, ...], dict[str, int], dict[str, int]]:
    first_lines: dict[str, int] = {}
    runs, skipped = replay_input(path, fmt, first_lines)
    return tuple(runs), skipped, first_lines


def _runs(path: str, fmt: str) -> tuple[TaskRun, ...]:
    return _trace(path, fmt)[0]


def _job(
    path: str, fmt: str, strategy: str, config: dict[str, Any], keep_allocations: bool, sweep: bool = False
) -> dict[str, Any]:
    result = replay(_runs(path, fmt), strategy, ReplayConfig(**config))
    out: dict[str, Any] = {"trace": path, "strategy": strategy, "metrics": result.metrics()}
    if sweep:
        out["budget"] = config["max_oom_rate"]
    if keep_allocations:
        out["allocations"] = result.first_allocations
    return out


QUICK = "quick"  # every strategy that decides in milliseconds: replay's default
SLOW_LEFT_OUT = "each of its decisions takes seconds (--strategy all replays it)"


def check_strategies(names: Sequence[str]) -> None:
    """A misspelt name is one typed error before any work, not one per trace and process."""
    for name in names:
        if name not in ("all", QUICK):
            PREDICTORS.get(name)


def strategies_for(runs: Sequence[TaskRun], requested: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """``all`` expands to every registered strategy, ``quick`` to those that decide in milliseconds;
    ``user`` only where the trace has requests. With the names, why one is left out."""
    if "all" in requested:
        names = predictor_names()
    elif QUICK in requested:
        names = list(dict.fromkeys([*quick_predictor_names(), *(n for n in requested if n != QUICK)]))
    else:
        names = list(dict.fromkeys(requested))
    slow = {n: SLOW_LEFT_OUT for n in predictor_names() if n not in names} if QUICK in requested else {}
    if any(r.user_request_bytes for r in runs) or "user" not in names:
        return names, slow
    left_out = {"user": "the trace records no memory requests"} if "user" in requested else {}
    return [n for n in names if n != "user"], {**slow, **left_out}


def trace_entry(
    path: str, runs: Sequence[TaskRun], skipped: dict[str, int], history: str, config: ReplayConfig
) -> dict[str, Any]:
    """A trace's part of the report, before its strategies' results are in; ``cap_bytes`` is the
    largest node the replay assumed (``--cap-bytes``, else the largest peak's next power of two, at
    least the floor)."""
    return {
        "trace": path,
        "instances": len(runs),
        "cap_bytes": replay_cap_bytes(config, runs),
        "skipped": {"rows": sum(skipped.values()), "reasons": skipped},
        "history": history,
        "strategies": {},
    }


def evaluate(
    paths: Sequence[str],
    strategies: Sequence[str],
    config: ReplayConfig,
    *,
    fmt: str = "auto",
    workers: int | None = None,
    keep_allocations_for: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    budgets: Sequence[float] = (),
) -> dict[str, Any]:
    """The report ``airflow-adaptive replay --json`` prints (allocations kept for one strategy, for
    plots); with ``budgets``, each trace's ``budget_sweep``: the default strategy's waste and kills
    under each OOM-kill budget, the curve the anchors are points beside; each trace's ``pareto``:
    every anchor's point and whether the default (or its sweep) beats it or it beats the default."""
    check_strategies(strategies)
    jobs = []
    traces: dict[str, dict[str, Any]] = {}
    for path in paths:
        runs, skipped, first_lines = _trace(path, fmt)
        timed = bool(runs) and all(r.start_s is not None for r in runs)
        traces[path] = trace_entry(path, runs, skipped, config.history if timed else "sequential", config)
        traces[path]["skipped"]["first_line"] = first_lines
        if budgets:
            traces[path]["budget_sweep"] = []
        names, left_out = strategies_for(runs, strategies)
        if left_out:
            traces[path]["left_out"] = left_out
        jobs += [(path, name) for name in names]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if not all(os.path.isfile(path) or os.path.isdir(path) for path in paths):  # a folder: the exports
        workers = 1  # a pipe or stdin can be read once: its runs stay in this process's cache
    allocations: dict[str, Any] = {}
    args = [(path, fmt, name, asdict(config), name == keep_allocations_for, False) for path, name in jobs]
    args += [
        (path, fmt, DEFAULT_STRATEGY, {**asdict(config), "max_oom_rate": b}, False, True)
        for path in paths
        for b in budgets
    ]
    for done, out in enumerate(_results(args, workers), start=1):
        if "budget" in out:
            point = {"max_oom_rate": out["budget"], **_curve_point(out["metrics"])}
            traces[out["trace"]]["budget_sweep"].append(point)
        else:
            traces[out["trace"]]["strategies"][out["strategy"]] = out["metrics"]
        if "allocations" in out:
            allocations[out["trace"]] = out["allocations"]
        if on_progress:
            on_progress(done, len(args))
    return {
        "history": config.history,
        "time_to_failure": config.time_to_failure,
        "max_oom_rate": config.max_oom_rate,
        "min_observations": config.min_observations,
        "min_memory_bytes": config.floor_bytes,
        "default_strategy": DEFAULT_STRATEGY,
        "anchor_strategies": list(ANCHORS),
        "traces": [{**t, "pareto": pareto(t, DEFAULT_STRATEGY, ANCHORS)} for t in traces.values()],
        "_allocations": allocations,
    }


def _results(
    args: list[tuple[Any, ...]], workers: int, job: Callable[..., dict[str, Any]] = _job
) -> Iterator[dict[str, Any]]:
    """Every job's result, in the order of ``args``, from ``workers`` processes."""
    if workers <= 1:
        yield from (job(*a) for a in args)
        return
    # spawn, not fork: the caller may hold threads (Airflow, SQLAlchemy pools) a fork would copy mid-lock
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_logs_to_stderr)
    try:
        for future in [pool.submit(job, *a) for a in args]:
            yield future.result()
    except BaseException:  # Ctrl-C, SIGTERM: stop now, not after every queued job has run
        for process in list(getattr(pool, "_processes", {}).values()):  # the executor has no public kill
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _logs_to_stderr() -> None:
    """In a worker: whatever it prints or logs goes to stderr, as in the command's own process, so
    the command's stdout (``--json``) holds only its result (also for a logger that kept the stream)."""
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _curve_point(metrics: dict[str, Any]) -> dict[str, Any]:
    return {"waste_gb_h": metrics["waste_gb_h"], "retries_per_100": metrics["retries_per_100"]}


def ratio_to_best_anchor(trace: dict[str, Any], strategy: str = DEFAULT_STRATEGY) -> tuple[float, str] | None:
    """Waste of ``strategy`` divided by the best anchor's on one trace, and that anchor."""
    results = trace["strategies"]
    anchors = {k: v["waste_gb_h"] for k, v in results.items() if k in ANCHORS}
    if strategy not in results or not anchors:
        return None
    best = min(anchors, key=lambda k: anchors[k])
    return (results[strategy]["waste_gb_h"] / anchors[best] if anchors[best] else float("inf")), best


WARM_START_MODES = ("off", "within", "imported")


def warm_start_comparison(
    paths: Sequence[str], config: ReplayConfig, *, fmt: str = "auto"
) -> list[dict[str, Any]]:
    """The default strategy on each trace with warm starts off, on within the trace, and on after
    every other trace of ``paths`` was imported (its families renamed ``<trace>:<family>``, so they
    are other families: the same tools in other workflows or on other machines)."""
    rows = []
    for path in paths:
        imported = [
            replace(run, family=f"{other}:{run.family}")
            for other in paths
            if other != path
            for run in _runs(other, fmt)
        ]
        row: dict[str, Any] = {"trace": path, "instances": len(_runs(path, fmt))}
        for mode in WARM_START_MODES:
            result = replay(
                _runs(path, fmt),
                DEFAULT_STRATEGY,
                replace(config, warm_starts=mode != "off"),
                imported=imported if mode == "imported" else (),
            )
            row[mode] = _curve_point(result.metrics())
        rows.append(row)
    return rows


def _knob_job(
    path: str, fmt: str, config: dict[str, Any], knobs: dict[str, Any], index: int
) -> dict[str, Any]:
    result = replay(_runs(path, fmt), DEFAULT_STRATEGY, ReplayConfig(**config), **knobs)
    return {"trace": path, "index": index, **_curve_point(result.metrics())}


def knob_metrics(
    paths: Sequence[str], config: ReplayConfig, grid: Sequence[dict[str, Any]], *, fmt: str = "auto"
) -> list[dict[str, dict[str, float]]]:
    """The default strategy's waste (GB·h) and kills per 100 tasks on every trace under each set of
    parameters of ``grid`` (one dict of trace -> both per set), replayed in parallel processes."""
    # trace-major, so that a worker replays one trace under every set while it is cached
    args = [(path, fmt, asdict(config), knobs, i) for path in paths for i, knobs in enumerate(grid)]
    workers = min(len(args), os.cpu_count() or 1)
    metrics: list[dict[str, dict[str, float]]] = [{} for _ in grid]
    for out in _results(args, workers, _knob_job):
        metrics[out["index"]][out["trace"]] = _curve_point(out)
    return metrics


def leave_one_out(ratios: Sequence[dict[str, float]], default: int) -> dict[str, Any]:
    """From each parameter set's ratio to the best anchor per trace: the in-sample choice (the set
    with the lowest geometric mean over all traces) and, for each trace, the ratio under the set
    chosen on the *other* traces only (leave one workflow out), beside the default set's."""
    traces = list(ratios[default])

    def gmean(i: int, skip: str | None = None) -> float:
        values = [max(ratios[i][t], 1e-9) for t in traces if t != skip]
        return float(np.exp(np.mean(np.log(values))))

    in_sample = min(range(len(ratios)), key=gmean)
    held_out = {}
    for trace in traces:
        chosen = min(range(len(ratios)), key=lambda i: gmean(i, trace))
        held_out[trace] = {"chosen": chosen, "ratio": ratios[chosen][trace]}
    return {"in_sample": in_sample, "held_out": held_out, "default": {t: ratios[default][t] for t in traces}}
