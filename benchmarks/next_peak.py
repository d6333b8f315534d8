"""How far a family's next peak rises above the ones it has shown: the small-sample bound's check.

    python benchmarks/next_peak.py [--data ../shared/data] [--target 0.01] [TRACE ...]

Every family of every trace with two peaks or more, its peaks in the order they finished (trace
order without times): for each task after the first, the ratio of its peak to the largest of the
peaks that finished before it did (what a decision in that order knows; one made when the task
started may know fewer), grouped by how many peaks were known. Printed per group: how many such
tasks, the ratio's median and its ``1 - target`` quantile (how much headroom above the largest
known peak a rule needs to keep the next task's kill chance at the target, judged across the
traces' families), and the share of those tasks above the default's small-sample bound at the
target (``core/sizing/small_samples.py``, fixed prior): calibrated where it is near the target. The bound applies until ``1 / target`` peaks
are known. A measurement of the data and the rule, no parameter is fitted here.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from airflow_adaptive.core.sizing.adaptive import AdaptivePredictor
from airflow_adaptive.core.sizing.small_samples import next_peak_bound
from airflow_adaptive.exceptions import AdaptiveError
from airflow_adaptive.traces.load import expand_paths, replay_input

ROOT = Path(__file__).resolve().parents[1]
GROUPS = ((1, 1), (2, 2), (3, 3), (4, 5), (6, 9), (10, 17), (18, 33), (34, 65), (66, 99))
DEFAULT = AdaptivePredictor()  # the default's prior spread and weight


def families(path: str) -> list[np.ndarray]:
    """Each family's positive peaks in the order they finished."""
    runs, _ = replay_input(path)
    by_family: dict[str, list[tuple[float, int, float]]] = defaultdict(list)
    for i, run in enumerate(runs):
        if run.peak_bytes > 0:
            by_family[run.family].append((run.finish_s if run.finish_s is not None else i, i, run.peak_bytes))
    return [np.array([peak for *_, peak in sorted(rows)], dtype=float) for rows in by_family.values()]


def next_peaks(peak_lists: list[np.ndarray], target: float) -> dict[int, list[tuple[float, bool]]]:
    """Per number of known peaks: (next peak / largest known, whether it passed the bound)."""
    found: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for peaks in peak_lists:
        largest = np.maximum.accumulate(peaks)
        for known in range(1, min(peaks.size, int(1 / target))):
            bound = next_peak_bound(peaks[:known], target, DEFAULT.prior_log_spread, DEFAULT.prior_weight)
            found[known].append((peaks[known] / largest[known - 1], bool(peaks[known] > bound)))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("traces", nargs="*", help="more trace files or folders (not in ../shared/)")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--target", type=float, default=0.01, help="the OOM target (half the 2 %% budget)")
    args = parser.parse_args()
    if not 0.0 < args.target < 0.5:
        parser.error(f"--target {args.target:g} is not in (0, 0.5)")
    paths, _ = expand_paths([str(args.data), *args.traces])
    if not paths:
        parser.error(f"no trace files under {args.data} {' '.join(args.traces)}".rstrip())
    try:
        peak_lists = [peaks for path in paths for peaks in families(path) if peaks.size >= 2]
    except AdaptiveError as err:
        parser.error(str(err))
    found = next_peaks(peak_lists, args.target)
    quantile = 1.0 - args.target
    print(
        f"{len(peak_lists)} families with two peaks or more, of {len(paths)} traces; target {args.target:g}\n"
    )
    print(f"| peaks known | tasks | next / largest known: median | P{quantile * 100:g} | above the bound |")
    print("|---|---:|---:|---:|---:|")
    for low, high in GROUPS:
        rows = [row for known in range(low, high + 1) for row in found.get(known, [])]
        if not rows:
            continue
        high = min(high, max(known for known in found if known <= high))  # the bound ends at 1 / target
        ratios = np.array([ratio for ratio, _ in rows])
        above = np.mean([passed for _, passed in rows])
        span = f"{low}" if low == high else f"{low}-{high}"
        print(
            f"| {span} | {len(rows)} | {np.median(ratios):.3f} | {np.quantile(ratios, quantile):.3g} | "
            f"{above:.2%} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
