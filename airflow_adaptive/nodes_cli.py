"""``airflow-adaptive profile-node`` and ``groups``: benchmark this machine, group the profiled nodes."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING, Any, TextIO

from airflow_adaptive.cli_args import random_seed
from airflow_adaptive.core.units import format_bytes
from airflow_adaptive.exceptions import AdaptiveError
from airflow_adaptive.history_cli import open_cli_store, print_json

if TYPE_CHECKING:
    from airflow_adaptive.nodebench.profiler import ProfilerSettings


def cmd_profile_node(args: argparse.Namespace, out: TextIO) -> int:
    import socket

    from airflow_adaptive.console import progress as progress_display
    from airflow_adaptive.core.units import format_duration
    from airflow_adaptive.nodebench.profiler import (
        BENCHMARKS,
        benchmark_seconds,
        check_fits,
        profile_node,
        steps,
    )

    settings = _profiler_settings(args)
    check_fits(settings)  # before the line that says how long it runs
    total = steps(args.repeats)
    # Said first and on stderr (stdout may be --json): the defaults run for minutes.
    print(
        f"profiling for about {format_duration(benchmark_seconds(settings))} ({BENCHMARKS} benchmarks x "
        f"{args.repeats} runs x {args.seconds:g} s, and fio writes a {args.fio_size} file), "
        f"stopped at --timeout {args.timeout:g} s",
        file=sys.stderr,
    )
    with progress_display() as progress:
        bar = progress.add_task("profiling", total=total)
        done = 0

        def step(name: str) -> None:
            nonlocal done
            done += 1
            progress.update(bar, advance=1, description=name)
            if progress.disable and name != "done":  # no bar off a terminal: a line per run
                print(f"[{done}/{total - 1}] {name}", file=sys.stderr, flush=True)

        profile = profile_node(args.node or socket.gethostname(), settings, on_step=step)
    if args.json:
        print_json(profile, out)
    else:
        print(f"{'benchmark':24s} {'mean':>12s} {'CV':>7s}  ({args.repeats} runs each)", file=out)
        for feature, value in profile["benchmarks"].items():
            print(f"{feature:24s} {value:12.1f} {profile['benchmark_cv'][feature]:7.1%}", file=out)
    if args.output:  # after the profile is shown: a file that went away loses nothing
        try:
            with open(args.output, "a", encoding="utf-8") as handle:  # e.g. the pod's termination message
                handle.write(json.dumps(profile, separators=(",", ":")))
        except OSError as err:
            raise AdaptiveError(f"profile-node: --output {args.output}: {err.strerror or err}") from None
    return 0


def _profiler_settings(args: argparse.Namespace) -> ProfilerSettings:
    from airflow_adaptive.nodebench.profiler import ProfilerSettings

    if args.repeats < 1:
        raise AdaptiveError(f"profile-node: --repeats must be at least 1, not {args.repeats}")
    if not (args.seconds >= 1 and float(args.seconds).is_integer() and args.timeout > 0):
        raise AdaptiveError(  # sysbench counts whole seconds, and --time=0 would never end
            f"profile-node: --seconds must be a whole number >= 1 and --timeout positive, "
            f"not {args.seconds:g} and {args.timeout:g}"
        )
    _check_profile_paths(args)
    return ProfilerSettings(
        seconds_per_benchmark=args.seconds,
        fio_directory=args.fio_dir,
        fio_size=args.fio_size,
        total_timeout_seconds=args.timeout,
        repeats=args.repeats,
    )


FIO_SIZE = re.compile(r"(\d+)([kmgtp]?)i?b?", re.IGNORECASE)  # fio's sizes: 256M, 1g, 512KiB (base 2)


def _check_profile_paths(args: argparse.Namespace) -> None:
    """What would fail only after minutes of benchmarks is said before the first."""
    size = FIO_SIZE.fullmatch(args.fio_size.strip())
    shift_bits = 10 * ("", "k", "m", "g", "t", "p").index(size[2].lower()) if size else 0  # no unit: bytes
    if size is None or int(size[1]) << shift_bits < 1 << 20:
        raise AdaptiveError(
            f"profile-node: --fio-size {args.fio_size!r} is not a size of at least 1M (e.g. 256M)"
        )
    if args.fio_dir and not (os.path.isdir(args.fio_dir) and os.access(args.fio_dir, os.W_OK | os.X_OK)):
        raise AdaptiveError(f"profile-node: --fio-dir {args.fio_dir}: not a folder this user can write in")
    folder = args.fio_dir or tempfile.gettempdir()
    free_bytes = shutil.disk_usage(folder).free
    if int(size[1]) << shift_bits > free_bytes:  # fio would fill the disk, then fail
        raise AdaptiveError(
            f"profile-node: --fio-size {args.fio_size} is more than the {format_bytes(free_bytes)} free in "
            f"{folder} (--fio-dir)"
        )
    if args.output:
        _check_output(args.output)


def _check_output(path: str) -> None:
    """Opened for appending, as the profile will be (e.g. /dev/termination-log): only trying says
    whether this user may, even as root; a file made here for the try is removed again."""
    there = os.path.lexists(path)  # a dangling link too: opening it made its target, removed with it
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as err:
        raise AdaptiveError(
            f"profile-node: --output {path}: not a file this user can write ({err.strerror or err})"
        ) from None
    if not there:
        os.remove(path)


def cmd_groups(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_adaptive.core.grouping import group_nodes
    from airflow_adaptive.nodebench.files import grouping_json, load_profiles
    from airflow_adaptive.traces.source import STDIN

    stored = open_cli_store().nodes() if args.store or not args.profiles else []
    if args.profiles:
        if args.profiles.count(STDIN) > 1:  # the second would read an emptied stdin
            raise AdaptiveError("groups --profiles: - (stdin) may be named once")
        profiles = [p for path in args.profiles for p in load_profiles(path)]
    else:
        profiles = [n.profile for n in stored]
        if not profiles:
            raise AdaptiveError(
                "no node profiles in the store: pass --profiles FILE or run the profiling DAG"
            )
    previous = {n.name: n.group_id for n in stored if n.group_id is not None}  # ids kept: no label churn
    grouping = group_nodes(
        profiles, random_state=args.seed, previous=previous
    )  # InvalidProfileError: one line
    if args.store:
        open_cli_store().save_nodes(profiles, grouping)
        print(f"stored {len(profiles)} node profiles in {len(grouping.groups)} groups", file=sys.stderr)
    if args.json:
        print_json(grouping_json(grouping), out)
        return 0
    from rich.table import Table

    from airflow_adaptive.console import print_table

    table = Table(title=f"node groups ({grouping.reason})")
    table.add_column("group")
    table.add_column("members", overflow="fold")
    for feature in grouping.features:
        table.add_column(f"{feature} rank", justify="right")
    for group in grouping.groups:
        table.add_row(
            str(group.id), ", ".join(group.members), *(str(group.ranks[f]) for f in grouping.features)
        )
    print_table(table, out)
    return 0


def add_node_commands(sub: Any) -> None:
    prof = sub.add_parser("profile-node", help="run the node microbenchmarks (sysbench, fio) on this machine")
    prof.add_argument("--node", help="node name (default: the host name)")
    prof.add_argument("--seconds", type=float, default=10.0, help="seconds per benchmark (default 10)")
    prof.add_argument("--fio-dir", help="folder for the fio test file (default: a temporary folder)")
    prof.add_argument("--fio-size", default="256M", help="fio test file size, fio syntax (default 256M)")
    prof.add_argument(
        "--timeout", type=float, default=900.0, help="bound on the whole profile, seconds (default 900)"
    )
    prof.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs per benchmark: the profile has their mean and CV (default 3)",
    )
    prof.add_argument(
        "--output", metavar="FILE", help="also write the compact JSON here (a termination message)"
    )
    prof.add_argument("--json", action="store_true", help="the profile as JSON on stdout")
    prof.set_defaults(func=cmd_profile_node)

    groups = sub.add_parser("groups", help="group nodes by their benchmark profiles (Tarema)")
    groups.add_argument(
        "--profiles",
        metavar="FILE",
        nargs="+",
        help="node profiles: JSON lists, or profile-node --json files, one per node; - reads stdin "
        "(default: the store's)",
    )
    groups.add_argument("--store", action="store_true", help="save the profiles and groups in the store")
    groups.add_argument("--seed", type=random_seed, default=0, help="k-means seed (default 0)")
    groups.add_argument("--json", action="store_true", help="the groups as JSON on stdout")
    groups.set_defaults(func=cmd_groups)
