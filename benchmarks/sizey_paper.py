"""Sizey's own protocol (Bader et al., CLUSTER 2024) on the shared nf-core traces it was published
with, to say how close our Sizey comes to the paper's figure.

    python benchmarks/sizey_paper.py [--data ../shared/data] [--seeds 1996] [--strategies ...]

As the paper: the input size is the task's ``rchar`` (bytes it read: known only once it ran, so a
replay through the decision never uses it); per process with at least 34 tasks with a peak and a
runtime, a seeded shuffle trains each strategy on 30 % and sizes the other 70 % one after another,
learning each task once it ran; a killed try costs its allocation for the whole runtime, a
successful one its excess (GB·h). Sizey is compared with the best of the paper's four baselines
(Witt's LR with offsets, Witt's P95, Tovar, Witt's low-wastage regression) per workflow; the paper
reports a median 24.68 % less waste than that best on six nf-core workflows (four are here).
Strategies are called directly (not through the decision): this is the paper's protocol, not ours.
Measured in this run; nothing stored.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pandas as pd
from sklearn.model_selection import train_test_split

from airflow_adaptive.core.sizing import Predictor, Sample, make_predictor
from airflow_adaptive.core.units import GIB

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ("chipseq", "eager", "mag", "methylseq")
BASELINES = ("lr-mean+-", "lr-mean-", "pc95", "tovar-min-waste", "tovar-max-throughput", "low-wastage")
MIN_TASKS = 34  # the paper skips task types with fewer
TRAIN_FRACTION = 0.3


def families(path: Path) -> dict[str, pd.DataFrame]:
    """Per process, its tasks with a peak and a runtime, as the paper reads the trace."""
    frame = pd.read_csv(path, low_memory=False)
    for column in ("peak_rss", "rchar", "realtime", "memory"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame = frame[(frame["peak_rss"] > 0) & frame["rchar"].notna() & frame["realtime"].notna()]
    kept = {}
    for process, tasks in frame.groupby("process"):
        if len(tasks) >= MIN_TASKS and (tasks["realtime"] > 0).all():
            kept[str(process)] = tasks
    return kept


def online_waste(strategy: str, tasks: pd.DataFrame, seed: int) -> tuple[float, int]:
    """GB·h wasted and kills when ``strategy`` sizes the test 70 % of one process, seeded."""
    samples = [
        Sample(int(row.peak_rss), int(row.rchar), float(row.realtime) / 1000.0)
        for row in tasks.itertuples(index=False)
    ]
    train, test = train_test_split(samples, test_size=1.0 - TRAIN_FRACTION, random_state=seed)
    requests = {id(s): int(r) if r == r else None for s, r in zip(samples, tasks["memory"], strict=True)}
    history: list[Sample] = list(train)
    predictor: Predictor = make_predictor(strategy)
    waste_byte_s, kills = 0.0, 0
    for task in test:
        predictor.fit(history)
        size = task.input_size_bytes
        allocation = predictor.predict(size, requests[id(task)])
        while allocation < task.peak_memory_bytes:
            waste_byte_s += allocation * (task.wall_seconds or 0.0)
            kills += 1
            allocation = predictor.retry(allocation, size, requests[id(task)])
        waste_byte_s += (allocation - task.peak_memory_bytes) * (task.wall_seconds or 0.0)
        history.append(task)
    return waste_byte_s / GIB / 3600.0, kills


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", default="1996", help="comma-separated seeds of the split and order")
    parser.add_argument("--strategies", default=",".join(("sizey", *BASELINES)))
    parser.add_argument("--workflows", default=",".join(WORKFLOWS))
    args = parser.parse_args()
    strategies = args.strategies.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    started, changes = time.perf_counter(), []
    print("| workflow | processes | " + " | ".join(strategies) + " | Sizey / best baseline |")
    print("|---|---:|" + "---:|" * len(strategies) + "---:|")
    for workflow in args.workflows.split(","):
        path = args.data / "nextflow-traces" / f"{workflow}.csv"
        if not path.is_file():
            continue
        found = families(path)
        totals = {s: [0.0, 0] for s in strategies}
        for tasks in found.values():
            for seed in seeds:
                for strategy in strategies:
                    waste, kills = online_waste(strategy, tasks, seed)
                    totals[strategy][0] += waste / len(seeds)
                    totals[strategy][1] += kills
        cells = [f"{totals[s][0]:.1f} ({totals[s][1]})" for s in strategies]
        baselines = [s for s in strategies if s != "sizey"]
        ratio = "-"
        if "sizey" in totals and baselines:
            best = min(baselines, key=lambda s: totals[s][0])
            change = totals["sizey"][0] / totals[best][0] - 1.0
            changes.append(change)
            ratio = f"{change:+.1%} against {best}"
        print(f"| {workflow} | {len(found)} | " + " | ".join(cells) + f" | {ratio} |")
    if changes:
        print(
            f"\nSizey against the best baseline, median over workflows: {statistics.median(changes):+.1%} "
            f"(paper: -24.68 % over six nf-core workflows); seeds {seeds}"
        )
    print(f"cells: GB·h wasted (kills, summed over seeds); ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
