"""The retry after an OOM kill: ``adaptive`` with its own retry (``oom_retry_policy = strategy``, the
default) against doubling, on every shared trace, in both histories, through the live decision.

    python benchmarks/retry_policy.py [--data ../shared/data]

Prints, per history, the range and geometric mean of the waste ratio (strategy retry / doubling)
over the traces, and the kills (retries) of each. Measured in this run; nothing stored.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from workloads import gmean

from airflow_adaptive.evaluation.replay import ReplayConfig, replay, replay_cap_bytes, sizing_for
from airflow_adaptive.traces.load import expand_paths, replay_input

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    paths, _ = expand_paths([str(args.data)])
    started = time.perf_counter()
    traces = [runs for runs in (replay_input(path)[0] for path in paths) if runs]  # read once
    for history in ("completed", "sequential"):
        ratios, kills = [], {"strategy": 0, "double": 0}
        config = ReplayConfig(history=history)
        for runs in traces:
            doubling = replace(
                sizing_for("adaptive", config, replay_cap_bytes(config, runs), {}), retry_policy="double"
            )
            own = replay(runs, "adaptive", config)
            doubled = replay(runs, "adaptive", config, deployed=doubling)
            ratios.append(max(own.waste_byte_s, 1e-9) / max(doubled.waste_byte_s, 1e-9))
            kills["strategy"] += own.retries
            kills["double"] += doubled.retries
        print(
            f"{history}: waste, strategy retry / doubling: {min(ratios):.3f}-{max(ratios):.3f}, "
            f"geometric mean {gmean(ratios):.3f} ({len(ratios)} traces); "
            f"kills: {kills['strategy']} against {kills['double']}"
        )
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
