"""Queue-order benchmark: least-finished-first against FIFO (Witt et al.), with online sizing.

    python benchmarks/queue_order.py [--data ../shared/data] [--seeds 3] [--runs 1,4] [--workers N]
                                     [--first-seed 0] [--synthetic-tasks 1000]
                                     [--orders fifo,lff-persevere,...] [--per-comparison]

Workloads: the 15 WfInstances DAGs, the 3 Lotaru workflows and 4 Pegasus-style synthetic DAGs,
each as one DAG run and as 4 concurrent runs, on both Tarema clusters, seeds 0-2, at times to
failure 0.1, 0.5 and 0.9. Every scenario runs the provider's defaults (the default placement, adaptive
sizing) learning online (cold start: the store knows nothing when the run starts), once per queue
order. Prints, per time to failure, each order against FIFO: the mean makespan change (mean of
per-scenario ratios minus one, and the geometric mean), the mean MAQ difference in points, OOM
kills, the share of scenarios where the order is no slower, and how many are more than 1 % slower.
Everything is measured in this run; no parameter of the queue orders was tuned on these workloads
(LFF has none). ``--orders fifo,fifo-reshuffled`` measures the noise floor: FIFO again with the
nodes listed in another shuffle (Tarema shuffled them for every run), a change no order should care
about; its ratios say how far one comparison moves by chance alone.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from statistics import mean

from workloads import CLUSTERS, gmean, seeds, workload_parser, workload_specs

from airflow_adaptive.simulation.cluster import preset
from airflow_adaptive.simulation.engine import Simulation
from airflow_adaptive.simulation.params import SimParams
from airflow_adaptive.simulation.sources import load_workload
from airflow_adaptive.simulation.workload import concurrent_runs

TTFS = (0.1, 0.5, 0.9)
QUEUES = ("fifo", "lff-persevere", "lff-postpone", "critical-path")  # lff-classes: --orders
Job = tuple[str, int, str, int, float, tuple[str, ...]]
SLOWER = 1.01  # a scenario counts as slower than FIFO above this ratio
RESHUFFLED = "fifo-reshuffled"  # FIFO with another node shuffle: the noise floor


def one(job: Job) -> tuple[Job, dict[str, tuple[float, float, int]]]:
    """(makespan s, MAQ, OOM kills) of every queue order for one scenario."""
    spec, runs, cluster, seed, ttf, queues = job
    params = SimParams(time_to_failure=ttf, history="online")
    workload = concurrent_runs(load_workload(spec, params, seed), runs)
    cl = preset(cluster)
    out = {}
    for queue in queues:
        # The simulator's seed only shuffles the node list; the workload keeps the scenario's seed.
        shuffle, order = (seed + 1000, "fifo") if queue == RESHUFFLED else (seed, queue)
        r = Simulation(cl, workload, "default", "adaptive", params, shuffle, queue=order).run()
        out[queue] = (r.makespan_s, r.maq, r.oom_kills)
    return job, out


def kind(spec: str) -> str:
    return spec.split(":", 1)[0].replace("wfformat", "wfinstances")


def report(results: dict[Job, dict[str, tuple[float, float, int]]], queues: tuple[str, ...]) -> None:
    print(
        "| TTF | workloads | order | makespan vs FIFO (mean) | (gmean) | MAQ FIFO | MAQ | MAQ - FIFO (points) "
        f"| OOM kills / FIFO's | no slower than FIFO | above {SLOWER:g}x FIFO |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for ttf in TTFS:
        for group in ("all", "wfinstances", "lotaru", "synthetic"):
            rows = [m for k, m in results.items() if k[4] == ttf and group in ("all", kind(k[0]))]
            if not rows:
                continue
            for queue in queues[1:]:
                ratios = [m[queue][0] / m["fifo"][0] for m in rows]
                maq_fifo = mean(m["fifo"][1] for m in rows)
                maq = mean(m[queue][1] for m in rows)
                kills = sum(m[queue][2] for m in rows) / max(1, sum(m["fifo"][2] for m in rows))
                no_slower = sum(r <= 1.0 + 1e-9 for r in ratios) / len(ratios)
                slower = sum(r > SLOWER for r in ratios)
                geometric = gmean(ratios)
                print(
                    f"| {ttf} | {group} ({len(rows)}) | {queue} | {mean(ratios) - 1:+.1%} | {geometric - 1:+.1%} "
                    f"| {maq_fifo:.1%} | {maq:.1%} | {100 * (maq - maq_fifo):+.1f} | {kills:.2f} | {no_slower:.0%} "
                    f"| {slower}/{len(ratios)} |"
                )


def main() -> None:
    parser = workload_parser(__doc__)
    parser.add_argument("--orders", default=",".join(QUEUES), help="queue orders, FIFO first")
    parser.add_argument("--per-comparison", action="store_true", help="print every scenario's ratio to FIFO")
    args = parser.parse_args()
    queues = tuple(args.orders.split(","))
    started = time.perf_counter()
    jobs = [
        (spec, int(runs), cluster, seed, ttf, queues)
        for spec in workload_specs(args.data, args.synthetic_tasks)
        for runs in args.runs.split(",")
        for cluster in CLUSTERS
        for seed in seeds(args)
        for ttf in TTFS
    ]
    with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
        results = dict(pool.map(one, jobs, chunksize=2))
    print(
        f"## Queue order: {len(jobs)} scenarios x {len(queues)} orders, the default placement, adaptive sizing "
        f"learning online ({time.perf_counter() - started:.0f} s)\n"
    )
    report(results, queues)
    if args.per_comparison:
        print_each(results, queues)


def print_each(results: dict[Job, dict[str, tuple[float, float, int]]], queues: tuple[str, ...]) -> None:
    """Every scenario's makespan ratio to FIFO, per order, slowest first."""
    for queue in queues[1:]:
        print(f"\n### {queue} / FIFO, every scenario (slowest first)\n")
        ratios = sorted(((m[queue][0] / m["fifo"][0], k) for k, m in results.items()), reverse=True)
        for ratio, (spec, runs, cluster, seed, ttf, _) in ratios:
            print(f"- {ratio:.3f}  {spec.rsplit('/', 1)[-1]} x{runs}, {cluster}, seed {seed}, TTF {ttf}")


if __name__ == "__main__":
    main()
