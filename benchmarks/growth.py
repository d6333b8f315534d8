"""Growth in place against KS+ and static sizing, over memory time series, per resize latency.

    python benchmarks/growth.py [--history completed,sequential] [--latency 2,5,15]
                                [--families N] [--json-out FILE] [FOLDER ...]

Each FOLDER holds a k-Segments ``tasks.csv`` and ``memory.csv[.gz]`` (default: the shared
nf-core/eager set), or is a workflow's folder of long2mao1/k-segments-traces as published.
Every folder is replayed by ``replay --time-series`` (``evaluation/series_report.py``): every
quick static strategy, KS+, and ``grow`` at each latency. Per folder, history and latency it
prints grow's waste and kills per 100 tasks beside KS+'s and the static default's, the ratios of
waste, and whether grow meets the goal: at most 1 kill per 100 tasks and less waste than both at
no more kills than either. It also names every static strategy that beats grow on both waste and
kills. ``--families N`` adds, where the goal is not met, the N families where grow holds most
more than KS+ (each replayed again, per family: about twice the time). Growth's constants (the default headroom share, the step in headrooms) were set on the
shared eager set, so its figures are in-sample; a folder not in ``../shared/`` is not. Measured
in this run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from airflow_adaptive.core.growth import GrowthRule
from airflow_adaptive.evaluation.pareto import KILLS, WASTE
from airflow_adaptive.evaluation.replay import GB_H, ReplayConfig, TryOutcome, replay, replay_cap_bytes
from airflow_adaptive.evaluation.report import DEFAULT_STRATEGY
from airflow_adaptive.evaluation.series import KSPLUS, grow_tries, replay_ksplus
from airflow_adaptive.evaluation.series_report import cached_trace, evaluate_series, grow_name
from airflow_adaptive.exceptions import AdaptiveError

ROOT = Path(__file__).resolve().parents[1]
EAGER = ROOT.parent / "shared" / "data" / "k-segments" / "eager"
GOAL_KILLS_PER_100 = 1.0


def verdict(strategies: dict[str, dict[str, Any]], name: str) -> tuple[bool, str]:
    """Whether growth meets the goal, and a line saying where it stands."""
    grow, ks, static = strategies[name], strategies[KSPLUS], strategies[DEFAULT_STRATEGY]
    met = (
        grow[KILLS] <= GOAL_KILLS_PER_100
        and all(grow[WASTE] < other[WASTE] and grow[KILLS] <= other[KILLS] for other in (ks, static))
        and grow["failed"] == 0
    )
    line = (
        f"  {name:>9}: {grow[WASTE]:9.2f} GB·h {grow[KILLS]:5.2f} kills/100 {grow['resizes_per_task']:5.2f} resizes/task"
        f" | /KS+ {grow[WASTE] / ks[WASTE]:.3f} (KS+ {ks[KILLS]:.2f} kills/100)"
        f" | /{DEFAULT_STRATEGY} {grow[WASTE] / static[WASTE]:.3f} ({static[KILLS]:.2f} kills/100)"
        f" | {'met' if met else 'NOT met'}"
    )
    return met, line


def family_gaps(folder: str, config: ReplayConfig, latency_s: float, top: int) -> list[str]:
    """The ``top`` families where grow holds most more than KS+ (GB·h and kills, each), replayed as
    the benchmark replays them: grow over the whole trace (each try's waste summed by family), KS+
    per family (its model is per family) with the trace's cap."""
    series = cached_trace(folder).runs
    runs, inner = grow_tries(series, config, GrowthRule(latency_s=latency_s))
    grown: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])

    def model(index: int, run: Any, number: int, limit: int) -> TryOutcome:
        out = inner(index, run, number, limit)
        grown[run.family][0] += (out.held_byte_s - (out.used_byte_s if out.fitted else 0.0)) / GB_H
        grown[run.family][1] += not out.fitted
        return out

    replay(runs, "adaptive", config, model=model)
    cap, lines = replay_cap_bytes(config, runs), []
    for family in grown:
        ks = replay_ksplus([s for s in series if s.run.family == family], config, cap)
        ks_gb_h = ks.waste_byte_s / GB_H
        lines.append((grown[family][0] - ks_gb_h, f"{family[:48]:48} grow {grown[family][0]:8.1f} GB·h "
                      f"{grown[family][1]:3.0f} kills | KS+ {ks_gb_h:8.1f} GB·h {ks.retries:5d} kills"))  # fmt: skip
    return [line for _, line in sorted(lines, reverse=True)[:top]]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--history", default="completed,sequential")
    parser.add_argument("--latency", default="2,5,15", help="resize latencies, seconds")
    parser.add_argument(
        "--families", type=int, default=0, help="where not met, the N families furthest above KS+"
    )
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    folders = [str(f) for f in (args.folders or [EAGER])]
    latencies = [float(v) for v in args.latency.split(",")]
    reports, unmet = {}, 0
    for history in args.history.split(","):
        started = time.perf_counter()
        try:
            report = evaluate_series(folders, ["all", "grow"], ReplayConfig(history=history), latencies)
        except AdaptiveError as err:  # a folder that is missing or holds no series
            parser.error(str(err))
        reports[history] = report
        print(f"history {history} ({time.perf_counter() - started:.0f} s)")
        for trace in report["traces"]:
            results = trace["strategies"]
            print(f" {trace['trace']} ({trace['instances']} tasks)")
            for latency in latencies:
                met, line = verdict(results, grow_name(latency))
                unmet += not met
                print(line)
                if not met and args.families:
                    config = ReplayConfig(history=history)
                    for gap in family_gaps(trace["trace"], config, latency, args.families):
                        print(f"             {gap}")
                beaten_by = trace["growth"][grow_name(latency)]["beaten_by"]
                if beaten_by:
                    print(f"             beaten on both waste and kills by {', '.join(beaten_by)}")
    print(f"goal met in {len(folders) * len(latencies) * len(reports) - unmet} of "
          f"{len(folders) * len(latencies) * len(reports)} (folder, history, latency) cases")  # fmt: skip
    if args.json_out:
        args.json_out.write_text(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
