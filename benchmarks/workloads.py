"""What the simulator benchmarks share: the workloads, the clusters and their command-line options."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTERS = ("5,5,5", "5,4,4,2")
SYNTHETIC = ("montage", "epigenomics", "cybershake", "ligo")


def workload_specs(data: Path, synthetic_tasks: int = 1000) -> list[str]:
    """The 15 WfInstances DAGs, the 3 Lotaru workflows and 4 Pegasus-style synthetic DAGs."""
    specs = [f"wfformat:{p}" for p in sorted((data / "wfinstances").glob("*.json"))]
    if (data / "lotaru").is_dir():
        specs += [f"lotaru:{data / 'lotaru'}:{w}" for w in ("atacseq", "bacass", "chipseq")]
    return specs + [f"synthetic:{kind}:{synthetic_tasks}" for kind in SYNTHETIC]


def seeds(args: argparse.Namespace) -> range:
    """The seeds a benchmark runs: ``--seeds`` of them from ``--first-seed``."""
    return range(args.first_seed, args.first_seed + args.seeds)


def gmean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def workload_parser(description: str | None) -> argparse.ArgumentParser:
    """A parser with the options every simulator benchmark takes."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="seeds from this one on (another: outside the benchmark)"
    )
    parser.add_argument(
        "--synthetic-tasks",
        type=int,
        default=1000,
        help="tasks per synthetic DAG (another: outside the benchmark)",
    )
    parser.add_argument("--runs", default="1,4", help="concurrent DAG runs per workload, comma-separated")
    parser.add_argument("--workers", type=int, default=None)
    return parser
