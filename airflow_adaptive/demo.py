"""The main job on the embedded default: warm the store, then show each task's adaptive pod and why."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, TextIO

import numpy as np

from airflow_adaptive.core.model import GIB, ExitReason, Observation, PeakKind, TaskKey, Usage

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
                    node_name=f"node-{run % 3}",
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
    spec = importlib.util.spec_from_file_location("adaptive_demo_dag", dag_file)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(dag_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from airflow.sdk import DAG

    dags = [v for v in vars(module).values() if isinstance(v, DAG)]
    if not dags:
        raise ValueError(f"{dag_file} defines no DAG")
    return dags[0]


def _pod_row(task: Any) -> dict[str, Any]:
    """The pod the operator would create now, beside the user's request."""
    from kubernetes.client import ApiClient

    from airflow_adaptive.kubernetes.pods import (
        DECISION_ANNOTATION,
        STRATEGY_ANNOTATION,
        find_container,
        memory_of,
    )

    pod = task.build_pod_request_obj(None, dry_run=True)
    container = find_container(pod, task.base_container_name)
    decided = memory_of(container.resources if container else None)
    annotations = pod.metadata.annotations or {}
    return {
        "task_id": task.task_id,
        "task_family": task.family,
        "user_request_bytes": memory_of(task.container_resources).request_bytes,
        "memory_request_bytes": decided.request_bytes,
        "memory_limit_bytes": decided.limit_bytes,
        "strategy": annotations.get(STRATEGY_ANNOTATION),
        "explanation": annotations.get(DECISION_ANNOTATION),
        "pod": ApiClient().sanitize_for_serialization(pod),
    }


def run_demo(
    out: TextIO, trace: str | None = None, dag_file: str | None = None, as_json: bool = False
) -> int:
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.core.units import format_bytes
    from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
    from airflow_adaptive.store.access import open_store

    repo = open_store(get_settings())
    if trace:
        from airflow_adaptive.traces.nextflow import read_nextflow

        repo.record(read_nextflow(trace).observations)
        source = f"trace {trace}"
    else:
        repo.record(generated_history())
        source = "generated history (seed 7)"
    dag = _load_dag(dag_file)
    rows = [_pod_row(task) for task in dag.tasks if isinstance(task, AdaptiveKubernetesPodOperator)]
    if as_json:
        json.dump({"source": source, "dag_id": dag.dag_id, "tasks": rows}, out, indent=2)
        out.write("\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{dag.dag_id}: adaptive pods from {source}", show_lines=True)
    for column in ("task", "family", "user asked", "decided request / limit", "strategy", "why"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["task_id"], row["task_family"], format_bytes(row["user_request_bytes"]),
            f"{format_bytes(row['memory_request_bytes'])} / {format_bytes(row['memory_limit_bytes'])}",
            row["strategy"], row["explanation"],
        )  # fmt: skip
    Console(file=out, width=160).print(table)
    return 0
