"""``airflow-adaptive simulate``: placement, sizing and queue-order policies side by side."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from airflow_adaptive.cli_args import (
    at_least_one,
    failure_share,
    interference,
    plot_folder,
    random_seed,
    require_research,
)


def _workload(spec: str, params: Any, seed: int, runs: int) -> Any:
    """``runs`` concurrent runs of the workload of ``spec``, at most ``MAX_TASKS`` tasks in all; a
    synthetic one whose structure makes another number of tasks than asked says so (montage:100
    makes 95)."""
    from airflow_adaptive.exceptions import SimulationInputError
    from airflow_adaptive.simulation.sources import MAX_TASKS, load_workload
    from airflow_adaptive.simulation.workload import concurrent_runs

    workload = load_workload(spec, params, seed)
    asked = spec.rsplit(":", 1)[-1]
    if spec.startswith("synthetic:") and asked.isdigit() and int(asked) != len(workload.tasks):
        print(
            f"note: {spec} makes {len(workload.tasks)} tasks (the workflow's structure sets how many)",
            file=sys.stderr,
        )
    if len(workload.tasks) * runs > MAX_TASKS:
        raise SimulationInputError(
            f"--runs {runs} of {spec}'s {len(workload.tasks)} tasks: at most {MAX_TASKS} tasks in one simulation"
        )
    return concurrent_runs(workload, runs)


def cmd_simulate(args: argparse.Namespace, out: TextIO) -> int:
    require_research("the simulator", "simpy")  # before the imports below reach the engine
    if args.plot:
        require_research("simulate --plot", "matplotlib")
        plot_folder("simulate", args.plot)
    from airflow_adaptive.console import progress as progress_display
    from airflow_adaptive.exceptions import SimulationInputError
    from airflow_adaptive.kubernetes.quantity import parse_memory_amount
    from airflow_adaptive.simulation.cluster import load_cluster
    from airflow_adaptive.simulation.compare import compare, parse_names
    from airflow_adaptive.simulation.params import SIZINGS, SimParams
    from airflow_adaptive.simulation.placements import ACCEPTED, LOCALITY, PLACEMENTS
    from airflow_adaptive.simulation.queues import QUEUE_ORDERS

    try:
        placements = parse_names(args.placement, ACCEPTED, "placement", everything=PLACEMENTS)
        sizings = parse_names(args.sizing, SIZINGS.names(), "sizing")
        queues = parse_names(args.queue, QUEUE_ORDERS, "queue order")
        params = SimParams(
            time_to_failure=args.time_to_failure,
            interference_per_task=args.interference,
            history=args.history,
            ram_disk_bytes=parse_memory_amount(args.ram_disk, what="--ram-disk") if args.ram_disk else 0,
            size_cpu=args.size_cpu,
        )
        if args.ram_disk and not any(p.endswith(LOCALITY) for p in placements):
            raise SimulationInputError(
                f"--ram-disk stages shared inputs for a {LOCALITY} placement (e.g. --placement "
                f"default,default{LOCALITY}); none was asked for"
            )
    except ValueError as err:
        raise SimulationInputError(str(err)) from None
    cluster = load_cluster(args.cluster)
    workload = _workload(args.workload, params, args.seed, args.runs)
    with progress_display() as progress:
        bar = progress.add_task(
            f"simulating {len(workload.tasks)} tasks", total=len(placements) * len(sizings) * len(queues)
        )
        report, results = compare(
            cluster, workload, placements, sizings, params, args.seed, queues=queues,
            record_timeline=bool(args.plot),
            on_done=lambda name: progress.update(bar, advance=1, description=name),
        )  # fmt: skip
    if args.plot:
        from airflow_adaptive.plots import write_simulation_plots

        for picture in write_simulation_plots(results, args.plot, f"{workload.name} on {cluster.name}"):
            print(f"wrote {picture}", file=sys.stderr)
    if args.json:
        from airflow_adaptive.history_cli import print_json

        print_json(report, out)
        return 0
    print_table(
        results, f"{workload.name} ({len(workload.tasks)} tasks) on {cluster.name}, seed {args.seed}", out
    )
    return 0


def shown_placement(name: str) -> str:
    """A result's name as the table shows it: ``default`` says which policy it ran (``default
    (finish-time)/fifo``); the JSON keeps the name it was asked by."""
    from airflow_adaptive.core.placement import DEFAULT_PLACEMENT
    from airflow_adaptive.simulation.placements import DEFAULT

    placement, sep, rest = name.partition("/")
    if placement == DEFAULT or placement.startswith(DEFAULT + "+"):
        placement = placement.replace(DEFAULT, f"{DEFAULT} ({DEFAULT_PLACEMENT})", 1)
    return placement + sep + rest


def print_table(results: dict[str, Any], title: str, out: TextIO) -> None:
    from rich.table import Table

    from airflow_adaptive.console import print_table as print_rich_table
    from airflow_adaptive.console import significant

    table = Table(title=title)
    columns = (
        "policy",
        "makespan h",
        "mean wait s",
        "OOM kills",
        "waste GB·h",
        "MAQ",
        "failed",
        "shared GB read",
    )
    for column in (*columns, "group: reserved/busy"):
        table.add_column(column, justify="left" if column in ("policy", "group: reserved/busy") else "right")
    for name, r in results.items():
        use = " ".join(
            f"{g}:{u:.0%}/{r.busy_by_group[g]:.0%}" for g, u in sorted(r.utilisation_by_group.items())
        )
        table.add_row(
            shown_placement(name), f"{r.makespan_s / 3600:.3f}", f"{r.mean_wait_s:.1f}", str(r.oom_kills), significant(r.waste_gb_h),
            f"{r.maq:.1%}", str(r.failed + r.never_ran), f"{r.shared_storage_read_bytes / 1e9:.1f}", use,
        )  # fmt: skip
    print_rich_table(table, out)


def add_simulate_command(sub: Any) -> None:
    sim = sub.add_parser("simulate", help="simulate placement and sizing policies on a heterogeneous cluster")
    sim.add_argument(
        "--cluster",
        required=True,
        help="5,5,5 | 5,4,4,2 | lotaru | a YAML/JSON file {nodes: [{name, count, cores, memory, benchmarks}]} "
        "| a JSON file of profile-node --json profiles",
    )
    sim.add_argument(
        "--workload",
        required=True,
        help="wfformat:FILE | lotaru:DIR:WORKFLOW | synthetic:KIND:TASKS | shared:RUNS:SIZE",
    )
    sim.add_argument(
        "--placement",
        default="all",
        help="comma-separated placement policies, or 'all' (the default); 'default' is the provider's default "
        "(what pods get); a '+locality' suffix (tarema+locality) stages shared inputs on nodes and prefers "
        "the nodes that hold them",
    )
    sim.add_argument("--ram-disk", metavar="SIZE", help="per-node RAM disk for staged inputs (e.g. 8Gi)")
    sim.add_argument("--sizing", default="user", help="comma-separated: user (default), adaptive, or 'all'")
    sim.add_argument(
        "--size-cpu", action="store_true", help="adaptive sizing sets CPU requests too ([adaptive] size_cpu)"
    )
    sim.add_argument(
        "--queue",
        default="fifo",
        help="comma-separated queue orders: fifo, lff-persevere, lff-postpone, critical-path, lff-classes "
        "(or 'all'; default fifo)",
    )
    sim.add_argument(
        "--runs", type=at_least_one, default=1, help="concurrent DAG runs of the workload (default 1)"
    )
    sim.add_argument(
        "--seed", type=random_seed, default=0, help="random seed of workloads and noise (default 0)"
    )
    sim.add_argument(
        "--history",
        choices=("prior-run", "online"),
        default="prior-run",
        help="what sizing learns from: a whole earlier run (prior-run, the default) or tasks as they "
        "finish (online)",
    )
    sim.add_argument(
        "--time-to-failure",
        type=failure_share,
        default=0.5,
        help="share of its runtime a task runs before an OOM kill (default 0.5)",
    )
    sim.add_argument(
        "--interference",
        type=interference,
        default=0.05,
        help="slowdown per co-running similar task (default 0.05)",
    )
    sim.add_argument("--json", action="store_true", help="the results as JSON on stdout")
    sim.add_argument("--plot", metavar="DIR", help="write a Gantt chart per policy and a makespan chart here")
    sim.set_defaults(func=cmd_simulate)
