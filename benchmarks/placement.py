"""Placement benchmark: every workload on both Tarema clusters, several seeds, every policy.

    python benchmarks/placement.py [--data ../shared/data] [--seeds 3] [--runs 1,4] [--workers N]
                                   [--first-seed 0] [--synthetic-tasks 1000] [--per-comparison]
                                   [--size-cpu] [--sizing-only] [--no-scale]

``--first-seed 5 --synthetic-tasks 700 --runs 1,3`` checks the same outside the benchmark:
seeds, DAG sizes and run counts no design choice was compared on.

Workloads: the 15 WfInstances DAGs, the 3 Lotaru workflows (measured runtimes
per machine) and 4 Pegasus-style synthetic DAGs of about 1,000 tasks, each as
one DAG run and as several concurrent runs. Prints, per cluster and overall,
the geometric mean over workloads and seeds of each policy's makespan divided
by round-robin's and by SJFN's (and of the lower bound no policy can beat), and for the
default placement (the one pods get, whichever it is), tarema and tarema-idle, and finish-time
(without and with live load) how many comparisons are no
slower than SJFN and how many more than 2 % slower, and the noise floor: SJFN and the default
against themselves with the nodes in another shuffle (how many comparisons pass 1.02x by chance);
then the same with the interference model switched off. Then our
placement with the users' memory requests against adaptive sizing, and the
scale run: 150,000 task instances on 100 nodes. The Lotaru workflows also run on
the ``lotaru`` cluster (two nodes of each Lotaru machine, measured runtimes).
Everything is measured in this run.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import cast

from workloads import CLUSTERS, gmean, seeds, workload_parser, workload_specs

from airflow_adaptive.core.placement import DEFAULT_PLACEMENT
from airflow_adaptive.simulation.bounds import lower_bound_s
from airflow_adaptive.simulation.cluster import load_cluster, preset
from airflow_adaptive.simulation.engine import Simulation
from airflow_adaptive.simulation.params import SimParams
from airflow_adaptive.simulation.placements import PLACEMENTS
from airflow_adaptive.simulation.sources import load_workload
from airflow_adaptive.simulation.workload import concurrent_runs

# The default (what pods get), then ours by name (each once): tarema, tarema with live load (idle
# groups), placement by predicted finish time without and with live load.
OURS = tuple(dict.fromkeys((DEFAULT_PLACEMENT, "tarema", "tarema-idle", "finish-time", "finish-time-live")))
LIVE_OF = {"tarema": "tarema-idle", "finish-time": "finish-time-live"}  # what placement_live_load changes
SLOWER = 1.02  # a comparison counts as slower than SJFN above this ratio
SJFN = "sjfn"
RESHUFFLED = "@reshuffled"  # the same policy with the nodes in another shuffle: the noise floor
SCALE_CLUSTER = """nodes:
  - {name: e2, count: 34, cores: 6, memory: 16Gi, benchmarks: {cpu_events_per_s: 370, memory_mib_per_s: 13500}}
  - {name: n2, count: 33, cores: 8, memory: 32Gi, benchmarks: {cpu_events_per_s: 465, memory_mib_per_s: 17600}}
  - {name: c2, count: 33, cores: 16, memory: 64Gi, benchmarks: {cpu_events_per_s: 523, memory_mib_per_s: 19800}}
"""


Job = tuple[str, int, str, int, float, bool]  # workload, runs, cluster, seed, interference, size_cpu


def one(job: Job) -> tuple[Job, dict[str, float]]:
    """Makespan of every placement policy for one (workload, runs, cluster, seed, interference);
    with size_cpu, under adaptive sizing with CPU requests sized (else the users' requests)."""
    spec, runs, cluster, seed, interference, size_cpu = job
    params = SimParams(interference_per_task=interference, size_cpu=size_cpu)
    sizing = "adaptive" if size_cpu else "user"
    workload = concurrent_runs(load_workload(spec, params, seed), runs)
    cl = preset(cluster)
    makespans = {p: Simulation(cl, workload, p, sizing, params, seed).run().makespan_s for p in PLACEMENTS}
    # The noise floor: SJFN and the default again with the nodes listed in another shuffle (the
    # simulator's seed only shuffles nodes; the workload keeps the comparison's seed).
    for p in (SJFN, OURS[0]):
        makespans[p + RESHUFFLED] = Simulation(cl, workload, p, sizing, params, seed + 1000).run().makespan_s
    return job, {**makespans, "bound": lower_bound_s(cl, workload, params)}


def table(
    results: dict[Job, dict[str, float]],
    interference: float,
    clusters: tuple[str, ...] = CLUSTERS,
    per_comparison: bool = False,
) -> None:
    print(f"\n### interference {interference:g} per similar co-running task\n")
    ours = " | ".join(f"{o} / SJFN | {o} <= SJFN | {o} > {SLOWER:g}x SJFN" for o in OURS)
    print("| cluster | runs | " + " | ".join(f"{p} / RR" for p in PLACEMENTS) + f" | bound / RR | {ours} |")
    print("|---|---|" + "---:|" * (len(PLACEMENTS) + 1 + 3 * len(OURS)))
    run_counts = sorted({k[1] for k in results})
    chosen = {k: m for k, m in results.items() if k[4] == interference and k[2] in clusters}
    for cluster in (*clusters, "both") if len(clusters) > 1 else clusters:
        for runs in (*run_counts, "all"):
            rows = [m for k, m in chosen.items() if cluster in (k[2], "both") and runs in (k[1], "all")]
            if not rows:
                continue
            cells = [f"{gmean([m[p] / m['round-robin'] for m in rows]):.3f}" for p in PLACEMENTS]
            cells.append(f"{gmean([m['bound'] / m['round-robin'] for m in rows]):.3f}")
            for o in OURS:
                cells.append(f"{gmean([m[o] / m['sjfn'] for m in rows]):.3f}")
                cells.append(f"{sum(m[o] <= m['sjfn'] * 1.0001 for m in rows)}/{len(rows)}")
                cells.append(f"{sum(m[o] > m['sjfn'] * SLOWER for m in rows)}/{len(rows)}")
            print(f"| {cluster} | {runs} | " + " | ".join(cells) + " |")
    for o in OURS:
        (spec, runs, cluster, seed, *_), m = max(chosen.items(), key=lambda kv: kv[1][o] / kv[1]["sjfn"])
        print(
            f"\nworst {o}/SJFN: {m[o] / m['sjfn']:.3f} on {Path(spec).name} x{runs}, {cluster}, seed {seed}"
        )
        if per_comparison:
            for (spec, runs, cluster, seed, *_), m in sorted(chosen.items()):
                print(f"  {o}/SJFN {m[o] / m['sjfn']:.3f}  {Path(spec).name} x{runs}, {cluster}, seed {seed}")
    noise_floor(chosen)
    with_live = LIVE_OF.get(OURS[0])
    if with_live:
        live = [m[with_live] / m[OURS[0]] for m in chosen.values()]
        print(
            f"\n{with_live} <= {OURS[0]} in {sum(r <= 1.0001 for r in live)}/{len(live)} comparisons, "
            f"worst {max(live):.3f}"
        )


def noise_floor(chosen: dict[Job, dict[str, float]]) -> None:
    """How far a comparison moves by chance: a policy against itself with the nodes listed in
    another shuffle (Tarema shuffled them for every run), a change no placement should care about."""
    for p in (SJFN, OURS[0]):
        ratios = [m[p + RESHUFFLED] / m[p] for m in chosen.values()]
        print(
            f"\nnoise floor, {p} with another node shuffle / {p}: {gmean(ratios):.3f}, "
            f"above {SLOWER:g}x in {sum(r > SLOWER for r in ratios)}/{len(ratios)}, worst {max(ratios):.3f}"
        )


def sizing_job(job: tuple[str, str, str]) -> tuple[tuple[str, str, str], dict[str, dict[str, float]]]:
    """Our placement with the users' requests, with adaptive memory sizing, and with CPU requests
    sized too (size_cpu) (4 concurrent runs, seed 0)."""
    spec, cluster, history = job
    params = SimParams(history=history)
    workload = concurrent_runs(load_workload(spec, params, 0), 4)
    out = {}
    for name, sizing, size_cpu in (
        ("user", "user", False),
        ("adaptive", "adaptive", False),
        ("cpu", "adaptive", True),
    ):
        run_params = replace(params, size_cpu=size_cpu)
        r = Simulation(preset(cluster), workload, OURS[0], sizing, run_params, 0).run()
        out[name] = {
            "makespan_s": r.makespan_s,
            "waste_gb_h": r.waste_gb_h,
            "oom": r.oom_kills,
            "failed": r.failed,
        }
    out["tasks"] = len(workload.tasks)  # type: ignore[assignment]
    return job, out


def sizing_table(results: dict[tuple[str, str, str], dict[str, dict[str, float]]]) -> None:
    print(
        "\n## Sizing under our placement: adaptive vs the users' requests (4 concurrent runs per workload)\n"
    )
    print(
        "| cluster | history | waste adaptive / user (gmean) | makespan adaptive / user (gmean) | makespan adaptive + size_cpu / user (gmean) | OOM kills per 100 tasks | failed tasks |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for cluster, history in sorted({(k[1], k[2]) for k in results}):
        rows = [m for k, m in results.items() if (k[1], k[2]) == (cluster, history)]
        waste = gmean(
            [max(m["adaptive"]["waste_gb_h"], 1e-9) / max(m["user"]["waste_gb_h"], 1e-9) for m in rows]
        )
        span = gmean([m["adaptive"]["makespan_s"] / m["user"]["makespan_s"] for m in rows])
        cpu_span = gmean([m["cpu"]["makespan_s"] / m["user"]["makespan_s"] for m in rows])
        tasks = sum(cast(int, m["tasks"]) for m in rows)
        oom = 100.0 * sum(m["adaptive"]["oom"] for m in rows) / tasks
        failed = sum(m["adaptive"]["failed"] for m in rows)
        print(f"| {cluster} | {history} | {waste:.3f} | {span:.3f} | {cpu_span:.3f} | {oom:.2f} | {failed} |")


def scale() -> None:
    params = SimParams()
    started = time.perf_counter()
    workload = concurrent_runs(load_workload("synthetic:montage:1500", params, 0), 100)
    built = time.perf_counter() - started
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as handle:
        handle.write(SCALE_CLUSTER)
        handle.flush()
        cluster = load_cluster(handle.name)
    print(
        f"\n## Scale: {len(workload.tasks)} task instances on {len(cluster.nodes)} nodes (workload built in {built:.1f} s)\n"
    )
    for placement, sizing in ((OURS[0], "user"), ("round-robin", "user"), (OURS[0], "adaptive")):
        started = time.perf_counter()
        result = Simulation(cluster, workload, placement, sizing, params, 0).run()
        seconds = time.perf_counter() - started
        print(
            f"- {placement} + {sizing} sizing: {seconds:.1f} s wall, makespan {result.makespan_s / 3600:.2f} h, {result.succeeded} succeeded, {result.oom_kills} OOM kills"
        )


def placement_tables(
    jobs: list[Job],
    interferences: tuple[float, float],
    workers: int | None,
    size_cpu: bool,
    started: float,
    per_comparison: bool = False,
) -> None:
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        results = dict(pool.map(one, jobs, chunksize=4))
    print(
        f"## Placement: makespan relative to round-robin and to SJFN (geometric means; {len(jobs)} simulations x {len(PLACEMENTS)} policies, {time.perf_counter() - started:.0f} s)"
        + (" with adaptive sizing and size_cpu" if size_cpu else "")
    )
    for interference in interferences:
        table(results, interference, per_comparison=per_comparison)
    print("\n## The Lotaru workflows on the Lotaru cluster (2 nodes of each machine, measured runtimes)")
    for interference in interferences:
        table(results, interference, ("lotaru",), per_comparison)


def main() -> None:
    parser = workload_parser(__doc__)
    parser.add_argument("--no-scale", action="store_true")
    parser.add_argument(
        "--sizing-only",
        action="store_true",
        help="only the sizing table and the scale run (the placement tables under the users' requests "
        "do not go through the memory decision)",
    )
    parser.add_argument(
        "--size-cpu", action="store_true", help="every policy under adaptive sizing with size_cpu on"
    )
    parser.add_argument(
        "--per-comparison", action="store_true", help="print every comparison's ratio to SJFN"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    interferences = (SimParams().interference_per_task, 0.0)
    jobs = [
        (spec, int(runs), cluster, seed, interference, bool(args.size_cpu))
        for spec in workload_specs(args.data, args.synthetic_tasks)
        for runs in args.runs.split(",")
        for cluster in (*CLUSTERS, *(["lotaru"] if spec.startswith("lotaru:") else []))
        for seed in seeds(args)
        for interference in interferences
    ]
    if not args.sizing_only:
        placement_tables(jobs, interferences, args.workers, args.size_cpu, started, args.per_comparison)
    sizing_jobs = [
        (spec, cluster, h)
        for spec in workload_specs(args.data, args.synthetic_tasks)
        for cluster in CLUSTERS
        for h in ("prior-run", "online")
    ]
    with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
        sizing_table(dict(pool.map(sizing_job, sizing_jobs, chunksize=2)))
    if not args.no_scale:
        scale()
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
