"""The default against every published strategy on waste *and* OOM kills, through the live decision.

    python benchmarks/pareto.py [--data ../shared/data] [--history completed,sequential]
                                [--min-tasks 100] [--json-out DIR] [--strategies a,b] [TRACE ...]
    python benchmarks/pareto.py --merge DIR --merge DIR2   # reports replayed apart, joined (DIR first)

Per history: every strategy and the default's budget sweep replayed on every trace; an anchor's
point (its GB·h, its kills per 100 tasks) is *beaten* when the default has no more of either,
and *beats the default* when it has no more of either (``evaluation/pareto.py``). Prints the counts
per trace group (nf-core, CCTools, Lotaru, WfInstances, others) over traces with at least
``--min-tasks`` tasks, every anchor point that beats the default there, every one no budget of the
sweep beats, and the budget ceiling
(default kills at most 2 per 100 on traces of >= 200 tasks). Extra TRACE paths (files or folders)
are replayed beside the shared ones: the same check on traces not in ``../shared/``. The default's
settings were chosen on the shared traces, so their counts are in-sample. Measured in this run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

from airflow_adaptive.core.sizing import ANCHORS
from airflow_adaptive.evaluation.choices import BUDGETS
from airflow_adaptive.evaluation.pareto import KILLS, WASTE, beaten_by, pareto, pareto_counts
from airflow_adaptive.evaluation.replay import ReplayConfig
from airflow_adaptive.evaluation.report import DEFAULT_STRATEGY, evaluate
from airflow_adaptive.traces.load import expand_paths

ROOT = Path(__file__).resolve().parents[1]
GROUPS = {
    "nextflow-traces": "nf-core",
    "cctools": "CCTools",
    "lotaru": "Lotaru",
    "wfinstances": "WfInstances",
}
CEILING_PER_100, CEILING_TASKS = 2.0, 200


def group(path: str) -> str:
    return next((name for part, name in GROUPS.items() if part in Path(path).parts), "others")


def short(path: str) -> str:
    return "/".join(Path(path).parts[-2:])


def counts_table(traces: list[dict[str, Any]]) -> None:
    print("| group | traces | anchor points | default beats | beat the default (traces) | sweep beats |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in [*GROUPS.values(), "others", "all"]:
        chosen = [t for t in traces if name == "all" or group(t["trace"]) == name]
        if not chosen:
            continue
        c = pareto_counts(chosen)
        share = f"{c['sweep_beats']} ({c['sweep_beats'] / max(c['points'], 1):.0%})"
        print(
            f"| {name} | {len(chosen)} | {c['points']} | {c['default_beats']} | "
            f"{c['beats_default']} ({c['traces_beaten']}) | {share} |"
        )


def winners_list(traces: list[dict[str, Any]]) -> None:
    print(
        f"\nAnchor points that beat {DEFAULT_STRATEGY} (GB·h, kills per 100; {DEFAULT_STRATEGY}'s in brackets):"
    )
    for t in traces:
        ours = t["strategies"][DEFAULT_STRATEGY]
        for name in beaten_by(t):
            p = t["pareto"][name]
            print(
                f"- {short(t['trace'])} ({t['instances']} tasks): {name} {p[WASTE]:.3g}, {p[KILLS]:.1f} "
                f"[{ours[WASTE]:.3g}, {ours[KILLS]:.1f}]; sweep beats it: {p.get('sweep_budgets') or 'no'}"
            )


def sweep_misses(traces: list[dict[str, Any]]) -> None:
    """Per trace, the anchor points no budget of the sweep beats (what keeps it under 95 %)."""
    lines = []
    for t in traces:
        missed = [
            f"{name} {p[WASTE]:.3g}, {p[KILLS]:.1f}"
            for name, p in t["pareto"].items()
            if p.get("sweep_beats") is False
        ]
        if missed:
            lines.append(f"- {short(t['trace'])} ({t['instances']} tasks): {'; '.join(missed)}")
    if lines:
        print("\nAnchor points no budget beats (GB·h, kills per 100):", *lines, sep="\n")


def ceiling_line(traces: list[dict[str, Any]]) -> None:
    large = [t for t in traces if t["instances"] >= CEILING_TASKS and DEFAULT_STRATEGY in t["strategies"]]
    within = [t for t in large if t["strategies"][DEFAULT_STRATEGY][KILLS] <= CEILING_PER_100]
    over = ", ".join(
        f"{short(t['trace'])} {t['strategies'][DEFAULT_STRATEGY][KILLS]:.1f}"
        for t in large
        if t not in within
    )
    print(
        f"\nBudget ceiling: {DEFAULT_STRATEGY} kills at most {CEILING_PER_100:g} per 100 tasks on {len(within)} of "
        f"{len(large)} traces with >= {CEILING_TASKS} tasks" + (f"; over: {over}" if over else "")
    )


def sweep_note(report: dict[str, Any]) -> str:
    swept = sorted({p["max_oom_rate"] for t in report["traces"] for p in t.get("budget_sweep", [])})
    return f", budgets {', '.join(map(str, swept))}" if swept else ", no budget sweep"


def merged(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Reports of the same traces replayed apart (some strategies in each) as one, with each trace's
    anchor points judged again against the joined strategies and sweep. Where several reports hold a
    strategy or a sweep, the first named supplies it (``--merge CHANGED --merge ANCHORS``: the changed
    default, its sweep, and the anchors from the other run)."""
    joined = reports[0]
    by_path = {t["trace"]: t for t in joined["traces"]}
    for other in reports[1:]:
        for trace in other["traces"]:
            into = by_path.setdefault(trace["trace"], trace)
            if into is trace:
                joined["traces"].append(trace)
                continue
            into["strategies"] = {**trace["strategies"], **into["strategies"]}
            if trace.get("budget_sweep") and not into.get("budget_sweep"):
                into["budget_sweep"] = trace["budget_sweep"]
    for trace in joined["traces"]:
        trace["pareto"] = pareto(trace, DEFAULT_STRATEGY, ANCHORS)
    return joined


def merge_inputs(
    parser: argparse.ArgumentParser, folders: list[Path], histories: list[str]
) -> dict[tuple[Path, str], Any]:
    """Every report ``--merge`` names, read before any is printed; one missing or unreadable is one
    line (a report of one history, merged for both, say), not a traceback."""
    reports = {}
    for folder, history in itertools.product(folders, histories):
        path = folder / f"pareto-{history}.json"
        try:
            reports[folder, history] = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            parser.error(
                f"--merge {folder}: cannot read pareto-{history}.json ({err.__class__.__name__}; use --history)"
            )
    return reports


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("traces", nargs="*", help="more trace files or folders (not in ../shared/)")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--history", default="completed,sequential")
    parser.add_argument("--min-tasks", type=int, default=100)
    parser.add_argument("--strategies", default="all", help="comma-separated (default: all)")
    parser.add_argument("--json-out", type=Path, help="write each history's replay report here")
    parser.add_argument("--no-sweep", action="store_true", help="replay no budget sweep")
    parser.add_argument(
        "--merge",
        type=Path,
        action="append",
        help="instead of replaying, join the reports --json-out wrote here",
    )
    args = parser.parse_args()
    sources = ([str(args.data)] if args.data.exists() else []) + args.traces
    paths, _ = expand_paths(sources) if not args.merge else ([], [])
    reports = merge_inputs(parser, args.merge or [], args.history.split(","))
    for history in args.history.split(","):
        started = time.perf_counter()
        if args.merge:
            report = merged([reports[d, history] for d in args.merge])
        else:
            budgets = () if args.no_sweep else BUDGETS
            report = evaluate(
                paths, args.strategies.split(","), ReplayConfig(history=history), budgets=budgets
            )
        seconds = time.perf_counter() - started
        if args.json_out:
            args.json_out.mkdir(parents=True, exist_ok=True)
            report.pop("_allocations", None)
            (args.json_out / f"pareto-{history}.json").write_text(json.dumps(report))
        traces = [t for t in report["traces"] if t["instances"] >= args.min_tasks and t["pareto"]]
        print(
            f"\n## history={history}: {len(traces)} traces with >= {args.min_tasks} tasks "
            f"(of {len(report['traces'])}){sweep_note(report)} ({seconds:.0f} s)\n"
        )
        counts_table(traces)
        winners_list(traces)
        sweep_misses(traces)
        ceiling_line(report["traces"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
