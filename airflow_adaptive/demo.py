"""The main job on the embedded default: warm the store, then show each task's adaptive pod and why."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, TextIO

import numpy as np

from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.sizing.similar import Identity
from airflow_adaptive.core.units import GIB
from airflow_adaptive.exceptions import DagFileError

# Typical peak (GiB) and spread of each example task family: the history a cluster would have.
EXAMPLE_PEAKS_GIB = {
    "genomics.index_reference": (5.2, 0.05),
    "genomics.align": (9.5, 0.12),
    "genomics.call_variants": (1.6, 0.25),
    "genomics.merge_variants": (0.9, 0.10),
    "genomics.report": (0.25, 0.05),
}
# What each family runs (as the example DAG's operators record it): image, program
EXAMPLE_TOOLS = {
    "genomics.index_reference": ("biocontainers/bwa:v0.7.17_cv1", "bwa index"),
    "genomics.align": ("biocontainers/bwa:v0.7.17_cv1", "bwa mem"),
    "genomics.call_variants": ("biocontainers/bcftools:v1.9-1-deb_cv1", "bcftools mpileup"),
    "genomics.merge_variants": ("biocontainers/bcftools:v1.9-1-deb_cv1", "bcftools merge"),
    "genomics.report": ("python:3.12-slim", "python"),
}
EXAMPLE_REQUEST_GIB = {"genomics.index_reference": 8, "genomics.align": 16, "genomics.call_variants": 8,
                       "genomics.merge_variants": 4, "genomics.report": 2}  # fmt: skip


def generated_history(runs: int = 12, seed: int = 7) -> list[Observation]:
    """Seeded history for the example DAG, one run a day: lognormal peaks, one OOM kill of an
    alignment and its retry; from the seventh run on, requests as adaptive sizing would give (P95 + 15 %)."""
    rng = np.random.default_rng(seed)
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    observations = []
    for run in range(runs):
        for family, (peak_gib, spread) in EXAMPLE_PEAKS_GIB.items():
            peak = int(peak_gib * GIB * rng.lognormal(0.0, spread))
            oom = family == "genomics.align" and run == 3  # a try someone squeezed to 8 GiB
            request = (8 if oom else EXAMPLE_REQUEST_GIB[family]) * GIB
            if run >= runs // 2:  # sized from the history so far, as the operator would
                request = min(request, int(peak_gib * GIB * np.exp(1.645 * spread) * 1.15))
            observations.append(
                Observation(
                    key=TaskKey("adaptive_genomics", family.split(".", 1)[1], f"history__{run:03d}", -1, 1),
                    task_family=family,
                    usage=Usage(
                        peak_memory_bytes=None if oom else min(peak, request),
                        wall_seconds=float(rng.uniform(60, 900)),
                        peak_kind=PeakKind.CENSORED if oom else PeakKind.MEASURED,
                    ),
                    exit_reason=ExitReason.OOM_KILLED if oom else ExitReason.COMPLETED,
                    exit_code=137 if oom else 0,
                    memory_request_bytes=request,
                    memory_limit_bytes=request,
                    user_request_bytes=EXAMPLE_REQUEST_GIB[family] * GIB,
                    node_name=f"node-{run % 3}{run % 2}",  # six nodes, in three groups when profiled
                    finished_at=start + timedelta(days=run),
                    strategy="adaptive" if run >= runs // 2 else "user",
                    explanation="generated example history",
                    image=EXAMPLE_TOOLS[family][0],
                    program=EXAMPLE_TOOLS[family][1],
                )
            )
            if oom:  # its retry, at the user's request, an hour later
                killed = observations[-1]
                observations.append(
                    replace(
                        killed,
                        key=replace(killed.key, try_number=2),
                        usage=replace(killed.usage, peak_memory_bytes=peak, peak_kind=PeakKind.MEASURED),
                        exit_reason=ExitReason.COMPLETED,
                        exit_code=0,
                        memory_request_bytes=EXAMPLE_REQUEST_GIB[family] * GIB,
                        memory_limit_bytes=EXAMPLE_REQUEST_GIB[family] * GIB,
                        finished_at=start + timedelta(days=run, hours=1),
                    )
                )
    return observations


def _load_dag(dag_file: str | None) -> Any:
    if dag_file is None:
        from airflow_adaptive.example_dags.adaptive_genomics import dag

        return dag
    dags = _dags_in(dag_file)
    if not dags:
        raise DagFileError(
            f"{dag_file} defines no DAG (Airflow finds a DAG at module level, made in `with DAG(...)`, "
            "or returned by a called @dag function)"
        )
    return dags[0]


def _dags_in(dag_file: str) -> list[Any]:
    """The DAGs Airflow's own file importer finds in ``dag_file`` (module-level DAG objects and those
    a ``with DAG(...)`` block or a called ``@dag`` function registered), checked as the DAG processor
    checks them; anything wrong is one line."""
    import logging

    from airflow.dag_processing.importers import base

    from airflow_adaptive.demo_pods import quieted

    if os.path.isdir(dag_file):
        raise DagFileError(f"{dag_file} is a folder: --dag-file takes one DAG file")
    if not os.path.isfile(dag_file):
        raise DagFileError(f"no such DAG file: {dag_file}")
    importer = base.get_importer_registry().get_importer(dag_file)
    if importer is None:
        raise DagFileError(f"{dag_file} is not a file Airflow reads DAGs from (a .py file or a .zip of them)")
    importer_log = logging.getLogger(base.__name__.rpartition(".")[0])
    with quieted(importer_log, logging.CRITICAL):  # it logs the traceback; the error below is one line
        result = importer.import_file(dag_file, safe_mode=False)
    if result.errors:
        error = result.errors[0]
        raise DagFileError(f"{dag_file} cannot be imported: {_first_line(error.message)}")
    for dag in result.dags:
        try:
            dag.validate()
            dag.check_cycle()
        except Exception as err:  # Airflow's own checks: the DAG processor would refuse this file too
            raise DagFileError(f"{dag_file}: DAG {dag.dag_id!r}: {_first_line(str(err))}") from None
    return list(result.dags)


def _first_line(message: str) -> str:
    return next((line for line in message.splitlines() if line.strip()), message)[:300]


def _matched(observations: list[Observation], tasks: list[Identity], sizing: SizingSettings) -> bool:
    """Whether the history can size any of the DAG's tasks: the same family, or a donor for a warm
    start (the same task name, or the same image and program), as the decision finds one."""
    from collections import Counter

    from airflow_adaptive.core.sizing.similar import pick_donor

    samples = Counter(o.task_family for o in observations)
    if any(t.family in samples for t in tasks):
        return True
    newest = {o.task_family: Identity(o.task_family, o.image, o.program) for o in observations}  # as stored
    donors = [(newest[family], n) for family, n in samples.items()]
    return sizing.warm_starts and any(
        pick_donor(t, donors, min_similarity=sizing.min_similarity) for t in tasks
    )


def _unmatched_note(observations: list[Observation], kubernetes: list[Any], rows: list[dict[str, Any]],
                    sizing: SizingSettings, trace: str | None) -> str | None:  # fmt: skip
    """What the demo says when the history it recorded sizes none of the DAG's tasks (None: it does)."""
    from airflow_adaptive.kubernetes.pods import tool_of

    tools = [tool_of(t.image, t.cmds, t.arguments) for t in kubernetes]
    asked = [Identity(row["task_family"], *tool) for row, tool in zip(rows, tools, strict=True)]
    if _matched(observations, asked, sizing):
        return None
    return (
        f"demo: {trace or 'the generated history'} sizes none of the DAG's tasks (no family matches "
        "theirs by name, task name or image and program): they are sized from what the history store "
        "already held"
    )


def _no_pod_task(dag: Any, mapped: list[str]) -> DagFileError:
    some = f" (mapped: {', '.join(mapped)}; their pods exist per map index at run time)" if mapped else ""
    first = f"{dag.dag_id}.{dag.tasks[0].task_id}" if dag.tasks else f"{dag.dag_id}.<task>"
    return DagFileError(
        f"demo: DAG {dag.dag_id!r} has no KubernetesPodOperator task to show{some}; a KubernetesExecutor "
        f"task's decision: airflow-adaptive decide --task-family {first} --new-family --request 2Gi"
    )


def run_demo(
    out: TextIO, trace: str | None = None, dag_file: str | None = None, as_json: bool = False
) -> int:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    from airflow_adaptive.config import check_sizing_names, get_settings
    from airflow_adaptive.demo_pods import mapped_kubernetes_tasks, operator_row, plain_row
    from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
    from airflow_adaptive.store.access import open_store

    settings = get_settings()
    check_sizing_names(settings)  # the demo shows decisions: a typo in their strategy is an error
    dag = _load_dag(dag_file)  # a mistake in the file is said before the store is written
    kubernetes = [t for t in dag.tasks if isinstance(t, KubernetesPodOperator)]
    mapped = mapped_kubernetes_tasks(dag)
    if not kubernetes:
        raise _no_pod_task(dag, mapped)
    repo = open_store(settings)
    if trace:
        from airflow_adaptive.traces.load import read_trace
        from airflow_adaptive.traces.source import STDIN

        observations = read_trace(trace, "nextflow").observations  # "-": stdin, as history import reads
        trace = "stdin" if trace == STDIN else trace  # as the demo names it from here on
        source = f"trace {trace}"
    else:
        observations = generated_history()
        source = "generated history (seed 7)"
    recorded = repo.record(observations)
    print(
        f"demo: {len(observations)} attempts from {source} recorded in the history store "
        f"({recorded.new} new, {len(observations) - recorded.new} already there)",
        file=sys.stderr,
    )
    rows = [
        operator_row(t) if isinstance(t, AdaptiveKubernetesPodOperator) else plain_row(t) for t in kubernetes
    ]
    if mapped:
        print(
            f"demo: mapped tasks not shown ({', '.join(mapped)}): their pods exist per map index",
            file=sys.stderr,
        )
    unmatched = _unmatched_note(observations, kubernetes, rows, settings.sizing, trace)
    if unmatched:
        print(unmatched, file=sys.stderr)
        source = "the history store"  # what sizes them is whatever it held before
    if as_json:
        json.dump(
            {"source": source, "dag_id": dag.dag_id, "tasks": rows, "mapped_not_shown": mapped}, out, indent=2
        )
        out.write("\n")
        return 0
    _print_rows(out, f"{dag.dag_id}: adaptive pods from {source}", rows)
    return 0


def _print_rows(out: TextIO, title: str, rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    from airflow_adaptive.console import print_table
    from airflow_adaptive.core.normalise import escape_surrogates
    from airflow_adaptive.core.units import format_bytes

    # A family's tasks share one explanation of a few hundred characters: said once under the table,
    # by number, so that the table stays a screen high in an 80-column terminal.
    notes: dict[str, int] = {}
    table = Table(title=title)
    for column in ("task", "family", "mode", "user asked", "pod's request / limit", "strategy", "why"):
        table.add_column(column, overflow="fold")
    for row in rows:
        why = row["explanation"] or ""
        cells = (
            row["task_id"], row["task_family"], row["mode"] or "", format_bytes(row["user_request_bytes"]),
            f"{format_bytes(row['memory_request_bytes'])} / {format_bytes(row['memory_limit_bytes'])}",
            row["strategy"] or "", f"[{notes.setdefault(why, len(notes) + 1)}]" if why else "",
        )  # fmt: skip
        table.add_row(*cells)
    print_table(table, out)
    for why, number in notes.items():
        print(f"\n[{number}] {escape_surrogates(why)}", file=out)
