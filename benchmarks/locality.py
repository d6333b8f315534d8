"""Shared-input locality benchmark: staging shared inputs on nodes against reading them from shared storage.

    python benchmarks/locality.py [--seeds 3] [--runs 50] [--placement tarema] [--sizes 512Ki,512M,1G,2G]

Workload ``shared:RUNS:SIZE`` (simulation/shared.py): RUNS concurrent runs of the paper's
Seq + Branch workflow, every task reading two shared inputs of SIZE. On both Tarema clusters, seeds
0..N-1, the same placement runs blind (every read from shared storage), with locality (staging on
local disk, preferring nodes that hold the inputs) and with locality and an 8 GiB RAM disk per node.
Prints, per input size, each variant against blind: the geometric mean of the makespan ratios and
of the shared-storage bytes read, and the worst makespan ratio. The storage model's parameters are
SimParams' documented defaults; none was chosen on these results.

A second table asks whether the queue order keeps readers of a staged input together while it is
cached: each sequential stage reads its own pair of inputs and a node's local disk holds one pair,
with locality on; least-finished-first and critical path against FIFO.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from workloads import CLUSTERS, gmean

from airflow_adaptive.core.locality import SMALL_BELOW_BYTES
from airflow_adaptive.core.units import GIB
from airflow_adaptive.simulation.cluster import preset
from airflow_adaptive.simulation.engine import Simulation
from airflow_adaptive.simulation.params import SimParams
from airflow_adaptive.simulation.placements import LOCALITY
from airflow_adaptive.simulation.shared import parse_size_bytes, shared_input_workload
from airflow_adaptive.simulation.workload import Workload

RAM_DISK_BYTES = 8 * GIB
ORDERS = ("fifo", "lff-persevere", "critical-path")


def per_stage_inputs(workload: Workload, size_bytes: int) -> Workload:
    """The same runs, but each of the four sequential stages reads its own pair of inputs (the four
    branches share a fifth): which order keeps readers of an input together matters only here."""
    tasks = []
    for t in workload.tasks:
        stage = f"stage{min(int(t.id.rsplit('app', 1)[1]), 4)}"
        tasks.append(replace(t, inputs=((f"{stage}-a", size_bytes), (f"{stage}-b", size_bytes))))
    return Workload(f"{workload.name}-per-stage", tuple(tasks), workload.runs)


def measure_orders(size: str, args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    """Per queue order, (makespan, shared reads) against FIFO, locality on, a local disk that holds
    one stage's two inputs: readers of an input run while it is cached only if the order keeps them
    together."""
    size_bytes = parse_size_bytes(size)
    params = SimParams(local_disk_bytes=2 * size_bytes)
    ratios: dict[str, list[tuple[float, float]]] = {}
    for cluster in CLUSTERS:
        nodes = preset(cluster)
        for seed in range(args.seeds):
            base = shared_input_workload(args.runs, size_bytes, params, seed)
            workload = per_stage_inputs(base, size_bytes)
            results = {
                order: Simulation(
                    nodes, workload, args.placement + LOCALITY, "user", params, seed, queue=order
                ).run()
                for order in ORDERS
            }
            fifo = results["fifo"]
            for order, r in results.items():
                ratios.setdefault(order, []).append(
                    (
                        r.makespan_s / fifo.makespan_s,
                        r.shared_storage_read_bytes / fifo.shared_storage_read_bytes,
                    )
                )
    return ratios


def variants(placement: str) -> dict[str, tuple[str, SimParams]]:
    return {
        "blind": (placement, SimParams()),
        "locality": (placement + LOCALITY, SimParams()),
        "locality+ram": (placement + LOCALITY, SimParams(ram_disk_bytes=RAM_DISK_BYTES)),
    }


def measure(size: str, args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    """Per variant, (makespan ratio, shared-read ratio) against blind for every cluster and seed."""
    ratios: dict[str, list[tuple[float, float]]] = {}
    for cluster in CLUSTERS:
        nodes = preset(cluster)
        for seed in range(args.seeds):
            workload = shared_input_workload(args.runs, parse_size_bytes(size), SimParams(), seed)
            results = {
                name: Simulation(nodes, workload, placement, "user", params, seed).run()
                for name, (placement, params) in variants(args.placement).items()
            }
            blind = results["blind"]
            for name, r in results.items():
                read_ratio = (
                    r.shared_storage_read_bytes / blind.shared_storage_read_bytes
                    if blind.shared_storage_read_bytes
                    else 1.0
                )
                ratios.setdefault(name, []).append((r.makespan_s / blind.makespan_s, read_ratio))
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--placement", default="tarema")
    parser.add_argument("--sizes", default="512Ki,512M,1G,2G")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{args.runs} concurrent runs, {len(CLUSTERS)} clusters x {args.seeds} seeds, {args.placement}")
    print(f"{'inputs':>8} {'variant':>13} {'makespan':>9} {'worst':>7} {'shared reads':>13}")
    for size in args.sizes.split(","):
        for name, pairs in measure(size, args).items():
            if name == "blind":
                continue
            makespans = [m for m, _ in pairs]
            reads = [max(r, 1e-9) for _, r in pairs]
            print(
                f"{'2 x ' + size:>8} {name:>13} {gmean(makespans) - 1:>+9.1%} "
                f"{max(makespans) - 1:>+7.1%} {gmean(reads) - 1:>+13.1%}"
            )
    print("\nqueue order with locality, each stage reading its own inputs, a local disk for one stage's")
    print(f"{'inputs':>8} {'order':>13} {'makespan':>9} {'worst':>7} {'shared reads':>13}")
    for size in args.sizes.split(","):
        if parse_size_bytes(size) < SMALL_BELOW_BYTES:
            continue  # small inputs are never staged: the order cannot matter
        for order, pairs in measure_orders(size, args).items():
            if order == "fifo":
                continue
            makespans, reads = [m for m, _ in pairs], [r for _, r in pairs]
            print(
                f"{'2 x ' + size:>8} {order:>13} {gmean(makespans) - 1:>+9.1%} "
                f"{max(makespans) - 1:>+7.1%} {gmean(reads) - 1:>+13.1%}"
            )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
