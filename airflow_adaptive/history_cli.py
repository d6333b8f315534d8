"""``airflow-adaptive history …``: import traces, show, prune and rebuild the history store."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from airflow_adaptive.cli_args import at_least_one, count, keep_days, require_paths, task_family
from airflow_adaptive.core.normalise import escape_surrogates
from airflow_adaptive.core.units import counted
from airflow_adaptive.exceptions import AdaptiveError

if TYPE_CHECKING:
    from airflow_adaptive.core.model import Observation
    from airflow_adaptive.core.rollup import FamilyRollup

SKIPPED_SHOWN = 20  # skipped rows of an import named one by one; the rest are counted


def open_cli_store() -> Any:
    """The history store; unavailable is an AdaptiveError, printed as one line by ``main``."""
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.store.access import open_store

    return open_store(get_settings())


def print_json(data: Any, out: TextIO) -> None:
    json.dump(data, out, indent=2, default=str)
    out.write("\n")


def cmd_history_import(args: argparse.Namespace, out: TextIO) -> int:
    from rich.progress import SpinnerColumn, TextColumn

    from airflow_adaptive.console import progress
    from airflow_adaptive.traces.load import iter_trace

    require_paths(args.files)
    files = trace_files(args.files)  # a folder: its traces, a k-Segments folder's tasks.csv
    store = open_cli_store()
    store.family_count()  # an unavailable store is said before a long trace is parsed
    total = 0
    for path in files:
        counts = {"attempts": 0, "skipped": 0}

        def batches(path: str = path, counts: dict[str, int] = counts) -> Iterator[list[Any]]:
            for chunk in iter_trace(path, args.format):
                for skipped in chunk.skipped[: max(0, SKIPPED_SHOWN - counts["skipped"])]:
                    print(f"skipped {skipped}", file=sys.stderr)
                counts["attempts"] += len(chunk.observations)
                counts["skipped"] += len(chunk.skipped)
                yield chunk.observations

        with progress(SpinnerColumn(), TextColumn("{task.description}")) as display:
            display.add_task(f"recording the attempts of {escape_surrogates(path)}")
            recorded = store.record_batches(batches())  # one transaction: the whole file or nothing
        total += counts["attempts"]
        print(
            f"{escape_surrogates(path)}: {counted(counts['attempts'], 'attempt')} imported ({recorded.new} new, "
            f"{recorded.replaced} already there), {counted(counts['skipped'], 'row')} skipped"
            + (f" (the first {SKIPPED_SHOWN} named above)" if counts["skipped"] > SKIPPED_SHOWN else "")
            + (
                f", {recorded.repeated} repeated keys (the file's last row of each kept)"
                if recorded.repeated
                else ""
            ),
            file=out,
        )
    return 0 if total else 1


def trace_files(paths: list[str]) -> list[str]:
    """The traces ``paths`` name (``traces.load.expand_paths``), saying on stderr each file of a
    folder that is no trace; none at all is an error naming ``paths``."""
    from airflow_adaptive.exceptions import TraceFormatError
    from airflow_adaptive.traces.load import expand_paths, ignored_lines

    traces, ignored = expand_paths(paths)
    for line in ignored_lines(ignored):
        print(line, file=sys.stderr)
    if not traces:
        raise TraceFormatError(f"no trace files found in {', '.join(paths)}")
    return traces


NAMES_COMPARED = 100_000  # stored family names a mistyped one is compared with (most attempts first)


def unknown_family(command: str, task_family: str, store: Any) -> AdaptiveError:
    """The error for a family the store has no attempt of, naming the closest stored names."""
    import difflib

    from airflow_adaptive.core.sizing.similar import task_name

    known = [identity.family for identity, _ in store.donor_candidates(limit=NAMES_COMPARED)]
    close = difflib.get_close_matches(task_family, known, n=3, cutoff=0.8)
    if not close:  # a task's own name (BWA_MEM of NFCORE_SAREK:…:BWA_MEM), in any case
        by_name: dict[str, list[str]] = {}
        for family in known:
            by_name.setdefault(task_name(family), []).append(family)
        named = difflib.get_close_matches(task_name(task_family), list(by_name), n=3, cutoff=0.8)
        close = [family for name in named for family in by_name[name]][:3]
    hint = (
        f"; did you mean {', '.join(map(repr, close))}?"
        if close
        else "; 'airflow-adaptive history families' lists them"
    )
    return AdaptiveError(f"{command}: no task family {task_family!r} in the history store{hint}")


NUMERIC_COLUMNS = frozenset(
    (
        "request",
        "limit",
        "peak",
        "wall s",
        "attempts",
        "completed",
        "OOM-killed",
        "median peak",
        "mean wall s",
    )
)  # right-aligned, so that sizes and counts line up by their units


def cmd_history_show(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_adaptive.core.units import format_bytes
    from airflow_adaptive.store.spool import to_json

    store = open_cli_store()
    history = store.history(args.task_family, limit=args.limit)
    if not history:  # with --json too: a script is told of a typo as a person is
        raise unknown_family("history show", args.task_family, store)
    if args.json:
        print_json([json.loads(to_json(o)) for o in history], out)
        return 0
    from rich.table import Table

    from airflow_adaptive.console import print_table

    table = Table(title=f"{args.task_family}: last {counted(len(history), 'attempt')}")
    for column in ("finished", "run / try", "exit", "request", "limit", "peak", "wall s", "node"):
        table.add_column(column, justify="right" if column in NUMERIC_COLUMNS else "left")
    for o in history:
        table.add_row(
            str(o.finished_at)[:19], f"{o.key.run_id} / {o.key.try_number}", o.exit_reason.value,
            format_bytes(o.memory_request_bytes), format_bytes(o.memory_limit_bytes),
            _peak_text(o),
            f"{o.usage.wall_seconds:.1f}" if o.usage.wall_seconds is not None else "-", o.node_name or "-",
        )  # fmt: skip
    print_table(table, out)
    return 0


def cmd_history_families(args: argparse.Namespace, out: TextIO) -> int:
    """The stored task families, most attempts first: the names ``show`` and ``decide`` take."""
    from airflow_adaptive.core.units import format_bytes

    store = open_cli_store()
    rows, total = store.families(limit=args.limit), store.family_count()
    if args.json:
        print_json([_family_json(r) for r in rows], out)
        return 0
    if not total:
        print("no task families in the history store yet: import a trace, or run a task", file=out)
        return 0
    from rich.table import Table

    from airflow_adaptive.console import print_table

    shown = f"the {len(rows)} with most attempts of {total}" if len(rows) < total else f"all {total}"
    table = Table(title=f"task families in the history store: {shown}")
    columns = ("task family", "attempts", "completed", "OOM-killed", "median peak", "mean wall s", "last")
    for column in columns:
        table.add_column(column, overflow="fold", justify="right" if column in NUMERIC_COLUMNS else "left")
    for r in rows:
        wall, median = r.mean_wall_seconds, _median_peak_bytes(r)
        table.add_row(
            escape_surrogates(r.task_family), str(r.attempts), str(r.completed), str(r.oom_killed),
            "-" if median is None else format_bytes(median), "-" if wall is None else f"{wall:.1f}",
            str(r.last_finished_at)[:19] if r.last_finished_at else "-",
        )  # fmt: skip
    print_table(table, out)
    return 0


def _median_peak_bytes(r: FamilyRollup) -> int | None:
    """The completed attempts' median peak, to the rollup histogram's resolution (None: none)."""
    median = r.peaks.quantile(0.5)
    return None if median is None else round(median)


def _family_json(r: FamilyRollup) -> dict[str, Any]:
    return {
        "task_family": r.task_family, "attempts": r.attempts, "completed": r.completed,
        "oom_killed": r.oom_killed, "median_peak_bytes": _median_peak_bytes(r),
        "mean_wall_seconds": None if r.mean_wall_seconds is None else round(r.mean_wall_seconds, 3),
        "last_finished_at": r.last_finished_at.isoformat() if r.last_finished_at else None,
    }  # fmt: skip


def _peak_text(o: Observation) -> str:
    """The peak as a person reads it: an OOM-killed attempt's is at least the limit it was killed at."""
    from airflow_adaptive.core.model import PeakKind
    from airflow_adaptive.core.units import format_bytes

    peak = o.usage.peak_memory_bytes
    if o.usage.peak_kind is PeakKind.CENSORED:
        at_least = peak if peak is not None else o.memory_limit_bytes
        return f">= {format_bytes(at_least)} (OOM-killed)" if at_least is not None else "unknown (OOM-killed)"
    return f"{format_bytes(peak)} ({o.usage.peak_kind.value})"


def cmd_history_prune(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_adaptive.config import get_settings

    settings = get_settings()
    keep = settings.retention_attempts if args.keep_attempts is None else args.keep_attempts
    days = settings.retention_days if args.keep_days is None else args.keep_days  # both checked
    result = open_cli_store().prune(keep_attempts=keep, keep_days=days, dry_run=args.dry_run)
    verb = "would remove" if result.dry_run else "removed"
    within = days and math.isfinite(days)
    newest = f"the newest {keep} attempts per family" if keep else "every attempt per family"
    limits = f"keeping {newest}" + (f" of the last {days:g} days" if within else "")
    print(f"{verb} {result.attempts} attempts of {result.families} task families ({limits})", file=out)
    return 0


def cmd_history_rebuild(args: argparse.Namespace, out: TextIO) -> int:
    families = open_cli_store().rebuild(fit_models=not args.without_models)
    what = "rollups" if args.without_models else "rollups and models"
    print(f"rebuilt the {what} of {families} task families from their attempts", file=out)
    if args.without_models:  # the bound's calibration reads the stored models' scores
        print(
            "models are fitted again by each family's next recorded attempt; until then decisions refit "
            "them and draw young families' bounds at the uncalibrated level ('history rebuild' restores it)",
            file=out,
        )
    return 0


def add_history_commands(sub: Any) -> None:
    from airflow_adaptive.traces.formats import FORMATS

    history = sub.add_parser("history", help="import or show task attempt history").add_subparsers(
        dest="history_command", metavar="SUBCOMMAND", required=True
    )
    imp = history.add_parser("import", help="load a trace file into the history store")
    imp.add_argument("--format", choices=FORMATS, default="auto", help="the trace format (default: detected)")
    imp.add_argument(
        "files", nargs="+", metavar="FILE",
        help="trace files, or folders of them (a k-Segments folder; - reads stdin)",
    )  # fmt: skip
    imp.set_defaults(func=cmd_history_import)
    families = history.add_parser("families", help="the stored task families, most attempts first")
    families.add_argument(
        "--limit", type=at_least_one, default=50, help="the N with most attempts (default 50; --json too)"
    )
    families.add_argument("--json", action="store_true", help="the families as JSON on stdout")
    families.set_defaults(func=cmd_history_families)
    show = history.add_parser("show", help="recent attempts of a task family")
    show.add_argument(
        "--task-family", required=True, type=task_family, help="the family whose attempts to list"
    )
    show.add_argument("--limit", type=at_least_one, default=50, help="the newest N attempts (default 50)")
    show.add_argument("--json", action="store_true", help="the attempts as JSON on stdout")
    show.set_defaults(func=cmd_history_show)

    prune = history.add_parser("prune", help="remove old attempts (rollups keep their totals)")
    prune.add_argument(
        "--keep-attempts", type=count, help="newest attempts kept per family ([adaptive] retention_attempts)"
    )
    prune.add_argument(
        "--keep-days",
        type=keep_days,
        help="remove attempts that finished more than this many days ago; imported traces keep the dates "
        "they ran on, so try --dry-run first ([adaptive] retention_days)",
    )
    prune.add_argument("--dry-run", action="store_true", help="count, remove nothing")
    prune.set_defaults(func=cmd_history_prune)
    rebuild = history.add_parser("rebuild", help="recompute every rollup and model from the stored attempts")
    rebuild.add_argument(
        "--without-models", action="store_true", help="leave models to be fitted by the next decision"
    )
    rebuild.set_defaults(func=cmd_history_rebuild)
