"""Runtime per node group (core/runtimes.py) against the Lotaru measured runtimes.

    python benchmarks/runtimes.py [--data ../shared/data]

Every Lotaru task (atacseq, bacass, chipseq) ran on seven machines; six have published benchmark
scores, and each machine is one node group here. Per family, the model learns from some runs and
predicts every task's runtime on the machines it did not learn from, at the task's input size.
Printed per target machine: the median absolute percentage error over all tasks, for
- ``unscaled``: runs on n1, the n1 runtime taken as is (no benchmarks: what a store of runtimes
  without groups would predict);
- ``halves``: runs on n1, scaled by Lotaru's fixed halves of CPU and I/O score ratios;
- ``learnt``: the family's tasks alternately on n1 and c2, the weights learnt from them;
- ``learnt-own``: the same, and each target also has every third task's own run (the model then
  corrects the benchmarks by what the group itself recorded); those tasks are not scored.
The same tasks are learnt and predicted on other machines, as Lotaru predicts from local runs of
the same tasks; the weights and the size line are fitted per family, nothing is tuned on this data.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from airflow_adaptive.core.runtimes import Run, fit_runtimes
from airflow_adaptive.simulation.cluster import LOTARU_SCORES

WORKFLOWS = ("atacseq", "bacass", "chipseq")
MACHINES = tuple(LOTARU_SCORES)  # machines with published scores, one group each
TRAIN = ("n1", "c2")


def scores() -> dict[int, dict[str, float]]:
    out = {}
    for group, (cpu, memory, io) in enumerate(LOTARU_SCORES.values(), start=1):
        out[group] = {"cpu": float(cpu), "io": float(io)} | ({"memory": float(memory)} if memory else {})
    return out


def runtimes(data: Path, workflow: str) -> pd.DataFrame:
    """Seconds per (task, sample) and machine, with the task's input size; measured rows only."""
    frames = []
    for machine in MACHINES:
        frame = pd.read_csv(data / "lotaru" / machine / f"{workflow}.csv")
        frame = frame.groupby(["Task", "NumberSequences"], as_index=False).first()
        frames.append(frame.assign(machine=machine, seconds=frame["Realtime"] / 1000.0))
    long = pd.concat(frames)
    wide = long.pivot_table(index=["Task", "NumberSequences"], columns="machine", values="seconds")
    size = long.groupby(["Task", "NumberSequences"])["TaskInputSize"].first()
    return wide.join(size.rename("size"))


def errors(
    table: pd.DataFrame, protocol: str, group_scores: dict[int, dict[str, float]]
) -> dict[str, list[float]]:
    """Absolute relative errors per target machine, for one protocol, over every family."""
    group = {m: g for g, m in enumerate(MACHINES, start=1)}
    out: dict[str, list[float]] = {m: [] for m in MACHINES}
    for _, family in table.groupby(level="Task"):
        rows = family.reset_index(drop=True)
        size = [int(s) if np.isfinite(s) and s > 0 else None for s in rows["size"]]
        learn = [TRAIN[i % 2] if protocol.startswith("learnt") else "n1" for i in range(len(rows))]
        runs = [
            Run(group[m], float(rows.at[i, m]), size[i])
            for i, m in enumerate(learn)
            if np.isfinite(rows.at[i, m])
        ]
        for target in MACHINES:
            if (target in TRAIN and protocol.startswith("learnt")) or target == "n1":
                continue
            own = [i for i in range(len(rows)) if protocol == "learnt-own" and i % 3 == 0]
            extra = [
                Run(group[target], float(rows.at[i, target]), size[i])
                for i in own
                if np.isfinite(rows.at[i, target])
            ]
            equal = {g: {"cpu": 1.0} for g in group_scores}
            fit_scores = equal if protocol == "unscaled" else group_scores
            model = fit_runtimes(runs + extra, fit_scores)
            if model is None:
                continue
            for i in range(len(rows)):
                truth = rows.at[i, target]
                if i in own or not np.isfinite(truth) or truth <= 0:
                    continue
                predicted = model.expected({group[target]: fit_scores[group[target]]}, size[i])
                out[target].append(abs(predicted[group[target]].seconds - truth) / truth)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    missing = [m for m in MACHINES if not (args.data / "lotaru" / m).is_dir()]
    if missing:
        raise SystemExit(
            f"runtimes.py: no Lotaru data for {', '.join(missing)} under {args.data / 'lotaru'} (--data)"
        )
    group_scores = scores()
    tables = [runtimes(args.data, w) for w in WORKFLOWS]
    protocols = ("unscaled", "halves", "learnt", "learnt-own")
    found: dict[str, dict[str, list[float]]] = {p: {m: [] for m in MACHINES} for p in protocols}
    for table in tables:
        for protocol in protocols:
            for machine, values in errors(table, protocol, group_scores).items():
                found[protocol][machine] += values
    print("Median absolute percentage error of the predicted runtime per target machine (tasks scored)\n")
    print("| machine | " + " | ".join(protocols) + " |")
    print("|---|" + "---:|" * len(protocols))
    for machine in [m for m in MACHINES if any(found[p][m] for p in protocols)]:
        cells = [
            f"{100 * np.median(found[p][machine]):.1f} % ({len(found[p][machine])})"
            if found[p][machine]
            else "-"
            for p in protocols
        ]
        print(f"| {machine} | " + " | ".join(cells) + " |")
    for protocol in protocols:
        values = [v for m in MACHINES for v in found[protocol][m]]
        print(
            f"\n{protocol}: all targets {100 * np.median(values):.1f} % median, {100 * np.mean(values):.1f} % mean"
        )


if __name__ == "__main__":
    main()
