"""``replay --time-series``: memory time-series folders replayed through static strategies, KS+ and
growth in place at each resize latency, side by side, in parallel processes."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.core.sizing import ANCHORS
from airflow_adaptive.core.sizing.base import quick_predictor_names
from airflow_adaptive.evaluation.pareto import no_worse, pareto
from airflow_adaptive.evaluation.replay import ReplayConfig
from airflow_adaptive.evaluation.report import DEFAULT_STRATEGY, _results, check_strategies, trace_entry
from airflow_adaptive.evaluation.series import GROW, KSPLUS, replay_series
from airflow_adaptive.exceptions import UnknownStrategyError
from airflow_adaptive.traces.series import SeriesTrace, read_series

RESIZE_LATENCIES_S = (2.0, 5.0, 15.0)


def grow_name(latency_s: float) -> str:
    return f"{GROW}-{latency_s:g}s"


def named_latencies(names: Sequence[str]) -> tuple[list[str], tuple[float, ...]]:
    """``names`` without the ``grow-<L>s`` ones (the names the report gives growth), and their
    latencies: ``grow-5s`` asks for growth at 5 s, as ``grow`` with ``--resize-latency 5`` does."""
    matches = [re.fullmatch(rf"{GROW}-(\d+(?:\.\d+)?)s", name) for name in names]
    latencies = tuple(float(m[1]) for m in matches if m)
    return [name for name, m in zip(names, matches, strict=True) if not m], latencies


@functools.lru_cache(maxsize=4)
def cached_trace(path: str) -> SeriesTrace:
    """A series folder, read once for every strategy and latency replayed on it."""
    return read_series(path)


def _job(path: str, strategy: str, config: dict[str, Any], latency_s: float | None) -> dict[str, Any]:
    series = cached_trace(path).runs
    rule = GrowthRule(latency_s=latency_s) if latency_s is not None else None
    result = replay_series(series, GROW if rule else strategy, ReplayConfig(**config), rule)
    metrics = result.metrics()
    metrics["resizes_per_task"] = result.resizes / max(result.instances, 1)
    name = grow_name(latency_s) if latency_s is not None else strategy
    return {"trace": path, "strategy": name, "metrics": metrics}


def series_strategies(requested: Sequence[str]) -> list[str]:
    """Static strategies and KS+ (``all``: every quick registered strategy and KS+); ``grow`` is
    added per latency by :func:`evaluate_series`."""
    names = [n for n in requested if n not in (GROW, KSPLUS, "all")]
    try:
        check_strategies(names)
    except UnknownStrategyError as err:  # the series' own names are known here too
        raise UnknownStrategyError(
            f"{err}; over time series also {GROW} (at every --resize-latency), {GROW}-<L>s, {KSPLUS}"
        ) from None
    if "all" in requested:
        return [*quick_predictor_names(), KSPLUS]
    return [*names, *([KSPLUS] if KSPLUS in requested else [])]


def evaluate_series(
    paths: Sequence[str],
    strategies: Sequence[str],
    config: ReplayConfig,
    latencies_s: Sequence[float] = RESIZE_LATENCIES_S,
    *,
    workers: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The report ``replay --time-series --json`` prints: per trace, every strategy's waste, kills
    and resizes per task, with ``grow-<L>s`` per latency, and which strategies each growth beats on
    both waste and kills (and which beat it)."""
    static = series_strategies(strategies)
    with_grow = GROW in strategies or "all" in strategies
    if with_grow and DEFAULT_STRATEGY not in static:
        static.append(DEFAULT_STRATEGY)  # growth is measured against the decision it starts from
    traces: dict[str, dict[str, Any]] = {}
    for path in paths:
        runs = cached_trace(path)
        traces[path] = trace_entry(path, [s.run for s in runs.runs], runs.skipped, config.history, config)
    args: list[tuple[Any, ...]] = [(p, name, asdict(config), None) for p in paths for name in static]
    if with_grow:
        args += [(p, GROW, asdict(config), latency) for p in paths for latency in latencies_s]
    workers = workers or min(len(args), os.cpu_count() or 1)
    for done, out in enumerate(_results(args, workers, _job), start=1):
        traces[out["trace"]]["strategies"][out["strategy"]] = out["metrics"]
        if on_progress:
            on_progress(done, len(args))
    anchors = [*ANCHORS, KSPLUS]
    for trace in traces.values():
        trace["pareto"] = pareto(trace, DEFAULT_STRATEGY, anchors)
        trace["growth"] = {
            grow_name(latency): growth_against(trace["strategies"], grow_name(latency))
            for latency in latencies_s
            if with_grow
        }
    return {
        "history": config.history,
        "max_oom_rate": config.max_oom_rate,
        "min_memory_bytes": config.floor_bytes,
        "resize_latencies_s": list(latencies_s) if with_grow else [],
        "default_strategy": DEFAULT_STRATEGY,
        "anchor_strategies": anchors,
        "traces": list(traces.values()),
    }


def growth_against(results: dict[str, dict[str, Any]], name: str) -> dict[str, list[str]]:
    """Which other static or KS+ strategies growth beats on both waste and kills, and which beat it."""
    ours = results[name]
    others = [n for n in results if not n.startswith(GROW)]
    beats = {n for n in others if no_worse(ours, results[n])}
    beaten_by = {n for n in others if no_worse(results[n], ours)}
    return {  # an exact tie is both by definition; it is named as a tie, not as a winner
        "beats": sorted(beats),
        "beaten_by": sorted(beaten_by - beats),
        "ties": sorted(beats & beaten_by),
    }


def refuse_over_time_names(names: list[str]) -> list[str]:
    """KS+ and growth in place replay memory over time: named without ``--time-series``, say so
    (else they read as unknown strategies)."""
    over_time = [n for n in names if n in (GROW, KSPLUS) or re.fullmatch(rf"{GROW}-[^,]*s", n)]
    if over_time:
        raise UnknownStrategyError(
            f"replay: --strategy {over_time[0]} replays memory over time: add --time-series"
        )
    return names
