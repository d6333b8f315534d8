"""Cost of learning: ``adaptive`` fitted from scratch on a full 500-task window (with and without
input sizes), and one trace replayed through the live decision, in this checkout and, with
``--before REV``, in a git revision of it, side by side.

    python benchmarks/fit.py [--repeats 7] [--before REV] [--trace ../shared/data/lotaru/c2/chipseq.csv]

A family past its 500-attempt window refits from scratch once per 5 % of growth, in the process
that records its attempt; every replayed and simulated try goes through the same fit. Each
measurement runs in a fresh interpreter (a fit: the best of 3 after one warm-up fit), the
checkouts alternating; prints best and median milliseconds, and the ratio now / before of the best. Measured in this run; nothing stored.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from imports import exported

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, time
import numpy as np
from airflow_adaptive.core.sizing.adaptive import AdaptivePredictor
from airflow_adaptive.core.sizing.base import Sample
from airflow_adaptive.evaluation.replay import replay
from airflow_adaptive.traces.load import replay_input

rng = np.random.default_rng(0)
inputs = rng.lognormal(21, 1, 500)
peaks = 2e8 + 0.5 * inputs * rng.lognormal(0, 0.1, 500)  # memory that follows input size
cases = {{
    "fit, 500 tasks with input sizes": [Sample(float(p), int(x), 60.0, False) for p, x in zip(peaks, inputs)],
    "fit, 500 tasks without": [Sample(float(p), None, 60.0, False) for p in peaks],
}}
out = {{}}
AdaptivePredictor().fit(cases["fit, 500 tasks with input sizes"][:50])  # first calls load code
for name, samples in cases.items():
    times = []
    for _ in range(3):
        started = time.perf_counter()
        AdaptivePredictor().fit(samples)
        times.append(time.perf_counter() - started)
    out[name] = min(times)
runs = replay_input({trace!r})[0]
started = time.perf_counter()
replay(runs, "adaptive")
out["replay {label}, adaptive"] = time.perf_counter() - started
print(json.dumps(out))
"""


def measure(env: dict[str, str], trace: str, folder: str) -> dict[str, float]:
    """One fresh interpreter's figures; it runs in a neutral folder, so ``PYTHONPATH`` picks the code."""
    probe = PROBE.format(trace=os.path.abspath(trace), label=Path(trace).name)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=folder,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"fit.py: error: the probe failed: {last}")
    return {name: seconds * 1000 for name, seconds in json.loads(done.stdout.splitlines()[-1]).items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--before", help="a git revision to measure beside this checkout")
    parser.add_argument(
        "--trace", default=str(ROOT.parent / "shared" / "data" / "lotaru" / "c2" / "chipseq.csv")
    )
    args = parser.parse_args()
    if not Path(args.trace).is_file():
        raise SystemExit(f"fit.py: error: no trace at {args.trace} (give one with --trace)")
    inherited = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *inherited]))
    with tempfile.TemporaryDirectory(prefix="adaptive-fit-bench-") as scratch:
        envs = {"now": env}
        if args.before:
            tree = exported(args.before, tempfile.mkdtemp(dir=scratch))
            envs[args.before] = dict(env, PYTHONPATH=os.pathsep.join([tree, *inherited]))
        found: dict[str, list[dict[str, float]]] = {label: [] for label in envs}
        for _ in range(args.repeats):  # alternating, so a busy spell hits both alike
            for label, each in envs.items():
                found[label].append(measure(each, args.trace, scratch))
    before = f" | {args.before} best ms | now / before" if args.before else ""
    print(f"{args.repeats} fresh interpreters per checkout\n")
    print("| what | best ms | median ms" + before + " |")
    print("|---|---:|---:|" + ("---:|---:|" if args.before else ""))
    for name in found["now"][0]:
        now = [run[name] for run in found["now"]]
        cells = f"{min(now):.1f} | {statistics.median(now):.1f}"
        if args.before:
            old = min(run[name] for run in found[args.before])
            cells += f" | {old:.1f} | {min(now) / old:.2f}"
        print(f"| {name} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
