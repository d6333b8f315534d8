"""Warm starts by image: each shared trace that records images (Nextflow's ``container``) replayed
with ``adaptive`` after the others were imported, matching donors by task name only (the default),
by qualified names too (similarity 0.5), and by qualified names and images alone (0.5).

    python benchmarks/warm_start_images.py [--data ../shared/data] [--history completed]

Prints waste (GB·h) and OOM kills per 100 tasks per trace. Measured in this run; nothing stored.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from airflow_adaptive.console import significant
from airflow_adaptive.evaluation.replay import ReplayConfig, replay
from airflow_adaptive.evaluation.report import DEFAULT_STRATEGY
from airflow_adaptive.traces.load import expand_paths, read_trace, task_runs
from airflow_adaptive.traces.runs import TaskRun

ROOT = Path(__file__).resolve().parents[1]
# (column, warm starts, min similarity, keep images)
SETTINGS = (
    ("warm starts off", False, 1.0, True),
    ("same task name (default)", True, 1.0, True),
    ("0.5: qualified names", True, 0.5, False),
    ("0.5: qualified names and images alone", True, 0.5, True),
)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--history", choices=["completed", "sequential"], default="completed")
    args = parser.parse_args()
    paths, _ = expand_paths([str(args.data)])
    traces = {path: task_runs(read_trace(path).observations) for path in paths}
    traces = {path: runs for path, runs in traces.items() if any(r.image for r in runs)}
    print("| trace | " + " | ".join(name for name, *_ in SETTINGS) + " |")
    print("|---|" + "---:|" * len(SETTINGS))
    for path, runs in traces.items():
        others = [replace(r, family=f"{o}:{r.family}") for o, rs in traces.items() if o != path for r in rs]
        cells = []
        for _, warm, similarity, images in SETTINGS:
            mine, imported = (runs, others) if images else (_no_images(runs), _no_images(others))
            config = ReplayConfig(history=args.history, warm_starts=warm, min_similarity=similarity)
            metrics = replay(mine, DEFAULT_STRATEGY, config, imported=imported).metrics()
            cells.append(f"{significant(metrics['waste_gb_h'], 4)} ({metrics['retries_per_100']:.1f})")
        print(f"| {Path(path).name} | " + " | ".join(cells) + " |", flush=True)
    return 0


def _no_images(runs: list[TaskRun]) -> list[TaskRun]:
    return [replace(r, image=None) for r in runs]


if __name__ == "__main__":
    raise SystemExit(main())
