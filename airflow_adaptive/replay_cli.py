"""``airflow-adaptive replay``: trace files replayed through sizing strategies, side by side."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from airflow_adaptive.cli_args import (
    at_least_one,
    failure_share,
    fraction,
    plot_folder,
    require_paths,
    require_research,
    share,
)
from airflow_adaptive.core.normalise import escape_surrogates
from airflow_adaptive.exceptions import (
    AdaptiveError,
    InvalidQuantityError,
    InvalidSettingError,
    TraceFormatError,
)
from airflow_adaptive.history_cli import print_json, trace_files


def _configured(args: argparse.Namespace, name: str) -> Any:
    """A replay option, or the configured ``[adaptive]`` setting of the same name."""
    from airflow_adaptive.config import get_settings

    given = getattr(args, name)
    return given if given is not None else getattr(get_settings().sizing, name)


def _min_memory(args: argparse.Namespace) -> int:
    """``--min-memory`` in bytes, or the configured ``[adaptive] min_memory``."""
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.kubernetes.quantity import parse_memory_amount

    if args.min_memory is None:
        return get_settings().sizing.floor_bytes
    return parse_memory_amount(args.min_memory, what="--min-memory")


def _replay_config(args: argparse.Namespace, **terms: Any) -> Any:
    """The replay's terms from the options; a bad one is a one-line error."""
    from airflow_adaptive.evaluation.replay import ReplayConfig
    from airflow_adaptive.kubernetes.quantity import parse_memory_amount

    try:
        floor_bytes = _min_memory(args)
        cap_bytes = (
            None if args.cap_bytes is None else parse_memory_amount(args.cap_bytes, what="--cap-bytes")
        )
        if cap_bytes is not None and cap_bytes < floor_bytes:
            raise InvalidSettingError(
                f"--cap-bytes {args.cap_bytes} is below the floor, min_memory ({floor_bytes} bytes): "
                "no allocation fits between them"
            )
        return ReplayConfig(
            history=args.history,
            floor_bytes=floor_bytes,
            max_oom_rate=_configured(args, "max_oom_rate"),
            min_observations=_configured(args, "min_observations"),
            cap_bytes=cap_bytes,
            refit_growth=args.refit_growth,
            **terms,
        )
    except (InvalidSettingError, InvalidQuantityError) as err:
        raise AdaptiveError(f"replay: {err}") from None


def strategy_names(args: argparse.Namespace) -> list[str]:
    """``--strategy``'s names (comma-separated, repeatable; default all); one that names none is an error."""
    names = [name.strip() for value in args.strategy or ["all"] for name in value.split(",") if name.strip()]
    if not names:
        raise AdaptiveError(f"replay: --strategy {','.join(args.strategy)!r} names no strategy")
    return names


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    if args.resize_latency and not args.time_series:
        raise AdaptiveError("replay: --resize-latency is for --time-series folders (growth in place)")
    if args.resize_latency:
        _latencies(args.resize_latency)  # a value that cannot be meant is said before the paths
    require_paths(args.traces)
    from airflow_adaptive.console import progress as progress_display
    from airflow_adaptive.evaluation.choices import BUDGETS
    from airflow_adaptive.evaluation.report import DEFAULT_STRATEGY, QUICK, evaluate
    from airflow_adaptive.evaluation.series_report import refuse_over_time_names

    if args.time_series:
        return _cmd_replay_series(args, out)
    if args.plot:  # before the replay, which can take minutes
        require_research("replay --plot", "matplotlib")
        plot_folder("replay", args.plot)
    names = refuse_over_time_names(strategy_names(args)) if args.strategy else [QUICK]
    traces = trace_files(args.traces)
    config = _replay_config(args, time_to_failure=args.time_to_failure)
    with progress_display() as progress:
        bar = progress.add_task("replaying", total=None)
        report = evaluate(
            traces,
            names,
            config,
            fmt=args.format,
            workers=args.workers,
            keep_allocations_for=DEFAULT_STRATEGY if args.plot else None,
            on_progress=lambda done, total: progress.update(bar, completed=done, total=total),
            budgets=BUDGETS if args.budget_sweep else (),
        )
    _leave_out_empty(report)
    if args.plot:
        from airflow_adaptive.plots import write_replay_plots

        for picture in write_replay_plots(report, args.plot):
            print(f"wrote {picture}", file=sys.stderr)
    report.pop("_allocations", None)
    for trace in report["traces"]:
        if trace["history"] != args.history:
            print(
                f"note: {escape_surrogates(trace['trace'])} has no task start times: replayed with history "
                f"{trace['history']}, not {args.history}",
                file=sys.stderr,
            )
    if args.json:
        print_json(report, out)
    else:
        _print_replay(report, out)
    return 0


def _cmd_replay_series(args: argparse.Namespace, out: TextIO) -> int:
    """``replay --time-series``: folders of memory time series (``traces/series.py``)."""
    from airflow_adaptive.console import progress as progress_display
    from airflow_adaptive.evaluation.series_report import evaluate_series
    from airflow_adaptive.traces.series import series_folders

    if args.plot or args.budget_sweep:
        which = "--plot" if args.plot else "--budget-sweep"
        raise AdaptiveError(
            f"replay --time-series: {which} is for peak traces (--plot and --budget-sweep are)"
        )
    folders: dict[str, str] = {}  # by real path: a folder named twice is replayed once
    for path in args.traces:
        found = series_folders(path)
        if not found:
            raise TraceFormatError(
                f"{path}: not a time-series folder nor one holding any (tasks.csv with memory.csv[.gz] "
                "beside it, or <process>/<task>_memory.csv exports)"
            )
        for folder in found:
            folders.setdefault(os.path.realpath(folder), folder)
    config = _replay_config(args)  # a kill's time is in the samples
    names, latencies = _series_strategies(args)
    with progress_display() as progress:
        bar = progress.add_task("replaying", total=None)
        report = evaluate_series(
            list(folders.values()), names, config, latencies, workers=args.workers,
            on_progress=lambda done, total: progress.update(bar, completed=done, total=total),
        )  # fmt: skip
    _leave_out_empty(report)
    if args.json:
        print_json(report, out)
    else:
        _print_replay(report, out)
    return 0


def _series_strategies(args: argparse.Namespace) -> tuple[list[str], tuple[float, ...]]:
    """The strategies and resize latencies ``--time-series`` replays: ``grow`` at every
    ``--resize-latency`` (default 2, 5 and 15 s), and ``grow-<L>s`` (the report's own name) at L."""
    from airflow_adaptive.core.growth_plan import LATENCY_BOUND_S
    from airflow_adaptive.evaluation.series import GROW
    from airflow_adaptive.evaluation.series_report import RESIZE_LATENCIES_S, grow_name, named_latencies

    names, named = named_latencies(strategy_names(args))
    plain = bool({GROW, "all"} & set(names))
    if args.resize_latency and not (plain or named):
        raise AdaptiveError(f"replay: --resize-latency is growth's: add {GROW} to --strategy")
    if any(not 0 <= v < LATENCY_BOUND_S for v in named):
        raise AdaptiveError(f"replay: {GROW}-<L>s takes L in seconds in [0, {LATENCY_BOUND_S:g})")
    latencies = set(named)
    if plain or args.resize_latency:
        latencies |= set(_latencies(args.resize_latency) if args.resize_latency else RESIZE_LATENCIES_S)
    by_name = {grow_name(v): v for v in sorted(latencies)}  # one per name the report gives
    return [*names, *([GROW] if named and not plain else [])], tuple(by_name.values())


def _latencies(values: list[str]) -> tuple[float, ...]:
    from airflow_adaptive.core.growth_plan import LATENCY_BOUND_S

    try:
        latencies = tuple(float(v) for value in values for v in value.split(","))  # '2,,5': refused
    except ValueError:
        raise AdaptiveError(f"replay: --resize-latency takes seconds, not {' '.join(values)!r}") from None
    if not latencies or any(not 0 <= v < LATENCY_BOUND_S for v in latencies):
        raise AdaptiveError(f"replay: --resize-latency must be seconds in [0, {LATENCY_BOUND_S:g})")
    return latencies


def _growth_lines(trace: dict[str, Any]) -> list[str]:
    lines = []
    for name, stand in trace.get("growth", {}).items():
        resizes = trace["strategies"][name]["resizes_per_task"]
        line = f"{name}: {resizes:.2f} resizes per task; beats {len(stand['beats'])} of the others on both waste and kills"
        ties = stand.get("ties", [])
        line += f" ({len(ties)} of them exact ties: {', '.join(ties)})" if ties else ""
        lines.append(line + (f", beaten by {', '.join(stand['beaten_by'])}" if stand["beaten_by"] else ""))
    return lines


def _print_replay(report: dict[str, Any], out: TextIO) -> None:
    """One table per trace: every strategy, cheapest first, and what was left out of the trace."""
    from rich.table import Table

    from airflow_adaptive.console import print_table, significant
    from airflow_adaptive.core.units import format_bytes
    from airflow_adaptive.evaluation.report import DEFAULT_STRATEGY, ratio_to_best_anchor

    for trace in report["traces"]:
        left_out = trace["skipped"]["rows"]
        title = f"{escape_surrogates(trace['trace'])} ({trace['instances']} tasks, history {trace['history']}"
        title += f", largest node {format_bytes(trace['cap_bytes'])}"
        if report.get("min_observations", 1) > 1:  # a warm-up: every strategy keeps the request first
            title += f", the request until {report['min_observations']} tasks finished"
        title += f", {left_out} row{'s' if left_out != 1 else ''} not replayed)" if left_out else ")"
        if not trace["strategies"]:  # e.g. only `user`, on a trace without requests: no empty table
            why = "; ".join(
                f"{name} left out: {reason}" for name, reason in trace.get("left_out", {}).items()
            )
            print(f"{title}: no strategy replayed ({why})", file=out)
            continue
        table = Table(title=title)
        for column in ("strategy", "waste GB·h", "MAQ", "WRR", "ATE", "kills/100", "failed"):
            table.add_column(column, justify="right" if column != "strategy" else "left")
        rows = sorted(trace["strategies"].items(), key=lambda kv: kv[1]["waste_gb_h"])
        for name, m in rows:
            table.add_row(
                name, significant(m["waste_gb_h"]), f"{m['maq']:.3f}", f"{m['wrr']:.3f}", f"{m['ate']:.3f}",
                f"{m['retries_per_100']:.2f}", str(m["failed"]),
            )  # fmt: skip
        ratio = ratio_to_best_anchor(trace)
        caption = f"{DEFAULT_STRATEGY} / best anchor ({ratio[1]}) = {ratio[0]:.3f}" if ratio else None
        reasons = _skipped_reasons(trace)
        sweep = " | ".join(
            f"{p['max_oom_rate']:g}: {significant(p['waste_gb_h'])} GB·h, {p['retries_per_100']:.2f} kills/100"
            for p in trace.get("budget_sweep", [])
        )
        table.caption = "\n".join(
            text
            for text in (
                caption,
                _pareto_line(trace),
                f"{DEFAULT_STRATEGY} by OOM-kill budget: {sweep}" if sweep else "",
                f"not replayed: {reasons}" if reasons else "",
                *(f"{name} left out: {why}" for name, why in trace.get("left_out", {}).items()),
                *_growth_lines(trace),
            )
            if text
        )
        print_table(table, out)


def _skipped_reasons(trace: dict[str, Any]) -> str:
    """Why tasks were left out, with the file line of each unreadable row's reason's first row."""
    first = trace["skipped"].get("first_line", {})
    return "; ".join(
        f"{n} {why}" + (f" (first on line {first[why]})" if why in first else "")
        for why, n in sorted(trace["skipped"]["reasons"].items())
    )


def _leave_out_empty(report: dict[str, Any]) -> None:
    """A trace with no task a strategy can replay is named in one line and left out: its table of
    zeros would read as a result. When no trace has one, there is nothing to replay: an error."""
    empty = [t for t in report["traces"] if not t["instances"]]
    report["traces"] = [t for t in report["traces"] if t["instances"]]
    if empty:  # --json says so too
        report["left_out_traces"] = {t["trace"]: _skipped_reasons(t) or "no rows" for t in empty}
    lines = [
        f"{escape_surrogates(t['trace'])} has no task to replay ({_skipped_reasons(t) or 'no rows'})"
        for t in empty
    ]
    if not report["traces"] and lines:
        raise TraceFormatError("nothing to replay: " + "; ".join(lines))
    for line in lines:
        print(f"note: {line}, left out", file=sys.stderr)


def _pareto_line(trace: dict[str, Any]) -> str:
    """Which anchors the default beats on both waste and kills, and which beat it."""
    from airflow_adaptive.evaluation.pareto import beaten_by, pareto_counts
    from airflow_adaptive.evaluation.report import DEFAULT_STRATEGY

    counts = pareto_counts([trace])
    if not counts["points"]:
        return ""
    line = (
        f"{DEFAULT_STRATEGY} beats {counts['default_beats']} of {counts['points']} anchors "
        "(no more waste and no more kills)"
    )
    ties = [name for name, point in trace["pareto"].items() if point.get("tie")]
    if ties:
        line += (
            f", {len(ties)} of them {'an exact tie' if len(ties) == 1 else 'exact ties'} ({', '.join(ties)})"
        )
    if "sweep_beats" in next(iter(trace["pareto"].values())):
        line += f"; some budget of its sweep beats {counts['sweep_beats']}"
    winners = [name for name in beaten_by(trace) if name not in ties]
    return line + (f"; beaten the same way by {', '.join(winners)}" if winners else "")


def add_replay_command(sub: Any) -> None:
    from airflow_adaptive.evaluation.choices import BUDGETS, HISTORY_MODES
    from airflow_adaptive.traces.formats import FORMATS

    rep = sub.add_parser("replay", help="replay traces through sizing strategies and compare their waste")
    rep.add_argument("traces", nargs="+", metavar="TRACE", help="trace files, or folders to search for them")
    rep.add_argument("--format", choices=FORMATS, default="auto", help="the trace format (default: detected)")
    rep.add_argument(
        "--strategy",
        action="append",
        metavar="NAME[,NAME...]",
        help="strategies to replay, comma-separated or repeated, or 'all' (default: all but those "
        "whose decisions take seconds, Sizey); with --time-series also ks+, grow (at every --resize-latency) "
        "and grow-<L>s (at L seconds)",
    )
    rep.add_argument(
        "--history",
        choices=HISTORY_MODES,
        default="completed",
        help="what a decision may learn from: tasks finished by its start (completed; needs start times) "
        "or every earlier task (sequential)",
    )
    _add_replay_terms(rep)
    rep.add_argument("--workers", type=at_least_one, help="parallel processes (default: one per core)")
    rep.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    rep.add_argument(
        "--budget-sweep",
        action="store_true",
        help=f"also replay adaptive under OOM-kill budgets {', '.join(map(str, BUDGETS))} (--plot draws the curve)",
    )
    rep.add_argument("--plot", metavar="DIR", help="write PNG plots here")
    rep.add_argument(
        "--time-series",
        action="store_true",
        help="the traces are memory time-series folders (tasks.csv, memory.csv[.gz]), or folders holding "
        "them: replay allocation over time, with KS+ and growth in place (grow-<L>s)",
    )
    rep.add_argument(
        "--resize-latency",
        action="append",
        metavar="SECONDS[,SECONDS...]",
        help="with --time-series: seconds from deciding to grow until the new limit is in force "
        "(default: 2,5,15)",
    )
    rep.set_defaults(func=cmd_replay)


def _add_replay_terms(rep: argparse.ArgumentParser) -> None:
    """The options that set the replay's terms: the cost of a kill, the budget, the bounds."""
    rep.add_argument(
        "--time-to-failure",
        type=failure_share,
        default=1.0,
        help="fraction of runtime an OOM kill costs (default 1)",
    )
    rep.add_argument(
        "--max-oom-rate",
        type=fraction,
        metavar="F",
        help="OOM-kill budget per task for adaptive (default: [adaptive] max_oom_rate, 0.02)",
    )
    rep.add_argument(
        "--min-observations",
        type=at_least_one,
        metavar="N",
        help="finished tasks a family needs before it is sized; fewer keep the request "
        "(default: [adaptive] min_observations, 1)",
    )
    rep.add_argument(
        "--min-memory",
        metavar="QUANTITY",
        help="the least memory a decision gives, e.g. 64Mi (default: [adaptive] min_memory, 64Mi)",
    )
    rep.add_argument(
        "--cap-bytes",
        metavar="QUANTITY",
        help="largest node's memory, bytes or e.g. 72Gi "
        "(default: largest peak, next power of two, at least --min-memory)",
    )
    rep.add_argument(
        "--refit-growth",
        type=share,
        default=0.05,
        help="refit after this history growth (default 0.05; 0: always)",
    )
