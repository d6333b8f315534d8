"""Memory sizing benchmark: every strategy replayed on the shared traces and the synthetic sets
(every one that decides in milliseconds: Sizey, seconds per decision, is in benchmarks/pareto.py).

    python benchmarks/sizing.py [--data ../shared/data] [--history completed]

Prints the waste of every strategy on every trace (GB·h), then for each trace
our default's waste divided by the best published (anchor) strategy's and by
the users' own requests, then Phung's synthetic sets beside the paper's
Table I/II. All numbers are measured in this run; nothing is stored.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from synthetic_sets import synthetic_section

from airflow_adaptive.console import significant
from airflow_adaptive.core.sizing import ANCHORS, quick_predictor_names
from airflow_adaptive.core.sizing.adaptive import AdaptivePredictor
from airflow_adaptive.evaluation.choices import BUDGETS
from airflow_adaptive.evaluation.pareto import against
from airflow_adaptive.evaluation.replay import ReplayConfig
from airflow_adaptive.evaluation.report import (
    DEFAULT_STRATEGY,
    WARM_START_MODES,
    evaluate,
    knob_metrics,
    leave_one_out,
    ratio_to_best_anchor,
    warm_start_comparison,
)
from airflow_adaptive.traces.load import expand_paths

ROOT = Path(__file__).resolve().parents[1]


def geometric_mean(ratios: list[float]) -> float:
    """Of ratios to the best anchor; a zero (ours wasted nothing) counts as 1e-9."""
    return statistics.geometric_mean([max(r, 1e-9) for r in ratios])


def short(path: str) -> str:
    parts = Path(path).parts
    return "/".join(parts[-2:]) if len(parts) > 1 else path


def traces_section(data: Path, history: str) -> dict[str, Any]:
    traces, _ = expand_paths([str(data)])
    started = time.perf_counter()
    report = evaluate(traces, quick_predictor_names(), ReplayConfig(history=history))  # Sizey: pareto.py
    seconds = time.perf_counter() - started
    names = sorted({n for t in report["traces"] for n in t["strategies"]})
    print(f"## Waste (GB·h) of every strategy, history={history} ({len(traces)} traces, {seconds:.0f} s)\n")
    print("| trace | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for t in report["traces"]:
        cells = [significant(t["strategies"][n]["waste_gb_h"]) if n in t["strategies"] else "" for n in names]
        print(f"| {short(t['trace'])} | " + " | ".join(cells) + " |")
    print(f"\n## {DEFAULT_STRATEGY} against the best anchor and the users' requests\n")
    print(
        "| trace | tasks | history | ours GB·h | best anchor | its GB·h | ours / best | ours / user | retries/100 |"
    )
    print("|---|---:|---|---:|---|---:|---:|---:|---:|")
    ratios, user_ratios, retries = [], [], []
    for t in report["traces"]:
        found = ratio_to_best_anchor(t)
        if found is None:
            continue
        ratio, anchor = found
        ours = t["strategies"][DEFAULT_STRATEGY]
        user = t["strategies"].get("user", {}).get("waste_gb_h")
        ratios.append(ratio)
        retries.append(ours["retries_per_100"])
        user_ratio = ours["waste_gb_h"] / user if user else None
        if user_ratio is not None:
            user_ratios.append(user_ratio)
        print(
            f"| {short(t['trace'])} | {t['instances']} | {t['history']} | {significant(ours['waste_gb_h'])} | {anchor} | "
            f"{significant(t['strategies'][anchor]['waste_gb_h'])} | {ratio:.2f} | "
            f"{'' if user_ratio is None else f'{user_ratio:.2f}'} | {ours['retries_per_100']:.1f} |"
        )
    print(
        f"\nours / best anchor: median {statistics.median(ratios):.3f}, geometric mean "
        f"{geometric_mean(ratios):.3f}, at most 1 on {sum(r <= 1 for r in ratios)} "
        f"of {len(ratios)} traces, worst {max(ratios):.2f}; retries per 100 tasks: median {statistics.median(retries):.1f}"
    )
    if user_ratios:
        print(
            f"ours / users' requests (traces with requests): median {statistics.median(user_ratios):.3f} "
            f"(waste removed: {1 - statistics.median(user_ratios):.0%}), worst {max(user_ratios):.2f}"
        )
    return report


def budget_section(report: dict[str, Any], history: str) -> None:
    """The default strategy under each OOM-kill budget: waste against the best anchor (whose own
    kills are not bounded) and the kills it measured, a waste-vs-kills curve over all traces."""
    print(f"\n## {DEFAULT_STRATEGY} under an OOM-kill budget (max_oom_rate), history={history}\n")
    print(
        "| budget | ours / best: median | worst | at most 1 | kills/100: median | traces ≥ 200 tasks within budget "
        "| within 2 % |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    by_history: dict[str, list[int]] = {}
    for budget in BUDGETS:  # 1.0 among them: no budget
        config = ReplayConfig(history=history, max_oom_rate=budget)
        keep = DEFAULT_STRATEGY if budget == ReplayConfig().max_oom_rate else None
        run = evaluate(
            [t["trace"] for t in report["traces"]], [DEFAULT_STRATEGY], config, keep_allocations_for=keep
        )
        if keep:
            by_history = kills_by_family_history(run["_allocations"])
        label = "none" if budget >= 1.0 else f"{budget:g}"
        print(f"| {label} | " + summary_cells(report, run, (100 * budget, 2.0), worst=True) + " |")
    print(
        "\nFirst tries OOM-killed at the default budget, by how many earlier tasks the family had "
        "(all traces): "
        + ", ".join(
            f"{band}: {k} of {n} ({100 * k / max(n, 1):.1f} %)" for band, (k, n) in by_history.items()
        )
    )


def summary_cells(
    report: dict[str, Any], run: dict[str, Any], kills_per_100: tuple[float, ...], worst: bool = False
) -> str:
    """Table cells for one replay of the default strategy (``run``), against the best anchor of the
    full ``report``: median ratio (geometric mean, or the worst), at most 1, median kills per 100
    tasks, and the traces of 200 or more tasks with at most each of ``kills_per_100``."""
    anchors = {
        t["trace"]: t["strategies"][b[1]]["waste_gb_h"]
        for t in report["traces"]
        if (b := ratio_to_best_anchor(t))
    }
    big = {t["trace"] for t in report["traces"] if t["instances"] >= 200}
    ratios, kills, big_kills = [], [], []
    for t in run["traces"]:
        ours = t["strategies"][DEFAULT_STRATEGY]
        kills.append(ours["retries_per_100"])
        if t["trace"] in anchors:
            ratios.append(ours["waste_gb_h"] / anchors[t["trace"]] if anchors[t["trace"]] else 1.0)
        if t["trace"] in big:
            big_kills.append(ours["retries_per_100"])
    spread = f"{max(ratios):.2f}" if worst else f"{geometric_mean(ratios):.3f}"
    return (
        f"{statistics.median(ratios):.3f} | {spread} | {sum(r <= 1 for r in ratios)} of {len(ratios)} | "
        f"{statistics.median(kills):.1f} | "
        + " | ".join(f"{sum(k <= limit for k in big_kills)} of {len(big_kills)}" for limit in kills_per_100)
    )


WARM_UPS = (1, 3, 10, 25, 50)  # min_observations: finished tasks before a family is sized


def warm_up_section(report: dict[str, Any], history: str) -> None:
    """Fewer kills for more memory: the user's request kept until a family has N finished tasks."""
    print(
        f"\n## {DEFAULT_STRATEGY} keeping the request for a family's first tasks (min_observations), history={history}\n"
    )
    print(
        "| min_observations | ours / best: median | geometric mean | at most 1 | kills/100: median | traces ≥ 200 tasks within 2 % |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for n in WARM_UPS:
        run = evaluate(
            [t["trace"] for t in report["traces"]],
            [DEFAULT_STRATEGY],
            ReplayConfig(history=history, min_observations=n),
        )
        print(f"| {n} | " + summary_cells(report, run, (2.0,)) + " |")


def kills_by_family_history(allocations: dict[str, list[tuple[str, int, int]]]) -> dict[str, list[int]]:
    """Killed first tries and all first tries, by the family's earlier tasks (0, 1-9, 10-49, 50+)."""
    bands = {"0": [0, 0], "1-9": [0, 0], "10-49": [0, 0], "50+": [0, 0]}
    for firsts in allocations.values():
        seen: dict[str, int] = {}
        for family, allocated, peak in firsts:
            n = seen.get(family, 0)
            seen[family] = n + 1
            band = bands["0" if n == 0 else "1-9" if n < 10 else "10-49" if n < 50 else "50+"]
            band[0] += allocated < peak
            band[1] += 1
    return bands


def warm_start_section(report: dict[str, Any], history: str) -> None:
    """Cold starts borrowed from similar families (the same task name), within each workflow and
    after every other workflow was imported; CCTools' categories have no task names to share."""
    paths = [t["trace"] for t in report["traces"] if "/cctools/" not in t["trace"]]
    started = time.perf_counter()
    rows = warm_start_comparison(paths, ReplayConfig(history=history))
    seconds = time.perf_counter() - started
    print(
        f"\n## Warm starts across families, {DEFAULT_STRATEGY}, history={history} ({len(rows)} traces, {seconds:.0f} s)\n"
    )
    print(
        "| trace | tasks | off GB·h | kills/100 | within: GB·h | kills/100 | imported: GB·h | kills/100 | imported / off |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios: dict[str, list[float]] = {"within": [], "imported": []}
    for row in rows:
        off = row["off"]["waste_gb_h"]
        for mode in ratios:
            ratios[mode].append(row[mode]["waste_gb_h"] / off if off else 1.0)
        cells = " | ".join(
            f"{significant(row[m]['waste_gb_h'])} | {row[m]['retries_per_100']:.1f}" for m in WARM_START_MODES
        )
        print(f"| {short(row['trace'])} | {row['instances']} | {cells} | {ratios['imported'][-1]:.3f} |")
    for mode, values in ratios.items():
        kills = statistics.median(r[mode]["retries_per_100"] for r in rows)
        print(
            f"\n{mode} / off: waste median {statistics.median(values):.3f}, geometric mean "
            f"{geometric_mean(values):.3f}, worst {max(values):.2f}, better on "
            f"{sum(v < 1 for v in values)} and worse on {sum(v > 1 for v in values)} of {len(values)}; kills/100 "
            f"median {kills:.1f} (off: {statistics.median(r['off']['retries_per_100'] for r in rows):.1f})"
        )


def unfinished_section(report: dict[str, Any]) -> None:
    """The default with and without its guard against a family's unfinished tasks, on the traces
    whose timestamps give a ``completed`` history (the guard needs tasks still running)."""
    timed = [t for t in report["traces"] if t["history"] == "completed"]
    if not timed:
        return
    # The report already replayed the default with the guard (it is on by default): replay it off only.
    blind = evaluate([t["trace"] for t in timed], [DEFAULT_STRATEGY], ReplayConfig(guard_unfinished=False))
    print(f"\n## {DEFAULT_STRATEGY} with and without the unfinished-task guard, history=completed\n")
    print("| trace | tasks | off GB·h | kills/100 | on GB·h | kills/100 | on / off |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for off, on in zip(blind["traces"], timed, strict=True):
        a, b = off["strategies"][DEFAULT_STRATEGY], on["strategies"][DEFAULT_STRATEGY]
        ratio = b["waste_gb_h"] / a["waste_gb_h"] if a["waste_gb_h"] else 1.0
        print(
            f"| {short(off['trace'])} | {off['instances']} | {significant(a['waste_gb_h'], 4)} | {a['retries_per_100']:.1f} | "
            f"{significant(b['waste_gb_h'], 4)} | {b['retries_per_100']:.1f} | {ratio:.3f} |"
        )


TARGETS = (1.0, 0.75, 0.5, 0.33, 0.25)  # adaptive's target_fraction: the share of the budget rules aim at
WITHIN_SHARE = 0.9  # of the traces of 200 or more tasks that must keep within the budget


def largest_target(kills: dict[float, dict[str, float]], traces: list[str], limit: float) -> float:
    """The largest target fraction that keeps ``WITHIN_SHARE`` of ``traces`` within ``limit``
    kills per 100 (the smallest when none does)."""
    for fraction in TARGETS:
        if sum(kills[fraction][t] <= limit for t in traces) >= WITHIN_SHARE * len(traces):
            return fraction
    return TARGETS[-1]


def target_section(report: dict[str, Any], history: str) -> None:
    """The share of the budget that ``adaptive``'s rules aim at, chosen as the largest that keeps
    90 % of the traces of 200 or more tasks within the default budget: on all of them (in-sample)
    and, for each, on the others only (leave one workflow out)."""
    anchors = {t["trace"]: b for t in report["traces"] if (b := ratio_to_best_anchor(t))}
    best = {t["trace"]: t["strategies"][anchors[t["trace"]][1]]["waste_gb_h"] for t in report["traces"]}
    big = [t["trace"] for t in report["traces"] if t["instances"] >= 200]
    limit = 100 * ReplayConfig().max_oom_rate
    started = time.perf_counter()
    found = knob_metrics(list(best), ReplayConfig(history=history), [{"target_fraction": f} for f in TARGETS])
    kills = {
        f: {t: m["retries_per_100"] for t, m in run.items()} for f, run in zip(TARGETS, found, strict=True)
    }
    ratios = {
        f: {t: m["waste_gb_h"] / best[t] if best[t] else 1.0 for t, m in run.items()}
        for f, run in zip(TARGETS, found, strict=True)
    }
    print(
        f"\n## {DEFAULT_STRATEGY}'s target (the share of the {limit:g} % budget its rules aim at), "
        f"history={history} ({time.perf_counter() - started:.0f} s)\n"
    )
    print(
        "| target fraction | ours / best: median | geometric mean | kills/100: median | traces ≥ 200 tasks within the budget |"
    )
    print("|---:|---:|---:|---:|---:|")
    for f in TARGETS:
        values = list(ratios[f].values())
        print(
            f"| {f:g} | {statistics.median(values):.3f} | {geometric_mean(values):.3f} | "
            f"{statistics.median(kills[f].values()):.1f} | {sum(kills[f][t] <= limit for t in big)} of {len(big)} |"
        )
    chosen = {t: largest_target(kills, [o for o in big if o != t], limit) for t in big}
    in_sample = largest_target(kills, big, limit)
    held = [ratios[chosen.get(t, in_sample)][t] for t in best]
    print(
        f"\nIn-sample: {in_sample:g} (the default is {AdaptivePredictor().target_fraction:g}). Leave one workflow "
        f"out, each trace of 200 or more tasks under the fraction chosen on the others "
        f"({', '.join(f'{f:g}' for f in sorted(set(chosen.values()), reverse=True))}): "
        f"{sum(kills[chosen[t]][t] <= limit for t in big)} of {len(big)} within the budget; "
        f"ours / best anchor median {statistics.median(held):.3f}, geometric mean {geometric_mean(held):.3f}."
    )


# The default's knobs (core/sizing/adaptive.py): the first rule's margin, how much cheaper another
# rule must be to replace it, and the scores' half-life. The defaults are the middle values.
KNOB_GRID = [
    {"margins": (margin, 0.0, 0.05, 0.3), "switch_ratio": switch, "half_life_tasks": half_life}
    for margin in (0.05, 0.15, 0.3)
    for switch in (0.6, 0.8, 1.0)
    for half_life in (25.0, 50.0, 100.0)
]
DEFAULT_KNOBS = next(  # the set equal to the strategy's defaults
    i
    for i, knobs in enumerate(KNOB_GRID)
    if all(getattr(AdaptivePredictor(), k) == v for k, v in knobs.items())
)


def describe(knobs: dict[str, Any]) -> str:
    return f"margin {knobs['margins'][0]:g}, switch {knobs['switch_ratio']:g}, half-life {knobs['half_life_tasks']:g}"


def out_of_sample_section(report: dict[str, Any], history: str) -> None:
    """The default's knobs chosen on all traces (in-sample) and, for each trace, on the other
    traces only (leave one workflow out): its ratio to the best anchor either way."""
    best = {
        t["trace"]: t["strategies"][b[1]]["waste_gb_h"]
        for t in report["traces"]
        if (b := ratio_to_best_anchor(t))
    }
    paths = [path for path, waste in best.items() if waste > 0]
    started = time.perf_counter()
    metrics = knob_metrics(paths, ReplayConfig(history=history), KNOB_GRID)
    ratios = [{path: m[path]["waste_gb_h"] / best[path] for path in paths} for m in metrics]
    found = leave_one_out(ratios, DEFAULT_KNOBS)
    seconds = time.perf_counter() - started
    print(
        f"\n## {DEFAULT_STRATEGY}'s knobs in-sample and leave-one-workflow-out, history={history} "
        f"({len(KNOB_GRID)} settings x {len(paths)} traces, {seconds:.0f} s)\n"
    )
    held = {t: v["ratio"] for t, v in found["held_out"].items()}
    rows = [
        ("defaults (chosen on these traces earlier)", found["default"]),
        (f"best on all traces: {describe(KNOB_GRID[found['in_sample']])}", ratios[found["in_sample"]]),
        ("leave one workflow out (chosen on the others)", held),
    ]
    print("| knobs | ours / best anchor: median | geometric mean | worst | at most 1 |")
    print("|---|---:|---:|---:|---:|")
    for label, values in rows:
        v = list(values.values())
        print(
            f"| {label} | {statistics.median(v):.3f} | {geometric_mean(v):.3f} | "
            f"{max(v):.2f} | {sum(x <= 1 for x in v)} of {len(v)} |"
        )
    chosen = statistics.multimode(v["chosen"] for v in found["held_out"].values())
    print(
        f"\nSettings chosen most often when one trace is held out: {'; '.join(describe(KNOB_GRID[i]) for i in chosen)}"
    )
    anchor_points = {t["trace"]: list(t.get("pareto", {}).values()) for t in report["traces"]}
    for label, choice in (("defaults", {t: DEFAULT_KNOBS for t in paths}), ("held out", {
        t: v["chosen"] for t, v in found["held_out"].items()
    })):  # fmt: skip
        beats, beaten = zip(*(against(metrics[choice[t]][t], anchor_points[t]) for t in paths), strict=True)
        print(
            f"Anchor points on waste and kills, knobs {label}: {DEFAULT_STRATEGY} beats {sum(beats)} of "
            f"{sum(map(len, (anchor_points[t] for t in paths)))}, {sum(beaten)} beat it "
            f"(on {sum(b > 0 for b in beaten)} traces)"
        )
    worse = sorted((r, short(t)) for t, r in held.items() if r > 1)
    print(
        f"Held-out traces above the best anchor ({len(worse)}): "
        + ", ".join(f"{t} {r:.2f}" for r, t in reversed(worse))
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--history", choices=["completed", "sequential"], default="completed")
    args = parser.parse_args()
    if args.data.exists():
        report = traces_section(args.data, args.history)
        budget_section(report, args.history)
        target_section(report, args.history)
        warm_up_section(report, args.history)
        warm_start_section(report, args.history)
        if args.history == "completed":
            unfinished_section(report)
        out_of_sample_section(report, args.history)
    else:
        print(f"{args.data} not found: trace section skipped")
    synthetic_section()
    print(f"\nanchor strategies: {', '.join(ANCHORS)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
