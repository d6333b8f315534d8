"""Workloads from files and specs: ``wfformat:FILE``, ``lotaru:DIR:WORKFLOW``, ``synthetic:KIND:TASKS``,
``shared:RUNS:SIZE``."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from airflow_adaptive.exceptions import SimulationInputError, TraceFormatError
from airflow_adaptive.traces.wfformat import WfInstance, bad_instance, load_instance, number, task_family

from .params import SimParams
from .pegasus import KINDS, pegasus_workload
from .shared import BRANCHES, SEQUENCE, parse_size_bytes, shared_input_workload
from .workload import SimTask, Workload, floor_peak, user_request_bytes

MAX_TASKS = 1_000_000  # in one simulation: more would hold gigabytes for hours, a typo rather than a plan
TASKS_PER_RUN = SEQUENCE + BRANCHES  # of a shared:RUNS:SIZE workload
LOTARU_REFERENCE_MACHINE = "n1"  # an N1 node of the Tarema clusters: speed 1 in the cluster model


def wfformat_workload(path: str, params: SimParams) -> Workload:
    """A WfFormat 1.5 instance: its DAG, each task's runtime, cores busy, peak memory and I/O."""
    instance = load_instance(path)
    try:
        records = {r["id"]: r for r in instance.records}
        tasks = [_wf_task(spec, records.get(spec["id"], {}), instance, params) for spec in instance.specs]
    except (ValueError, KeyError, TypeError) as err:
        raise bad_instance(path, err) from None
    return Workload(os.path.basename(path).removesuffix(".json"), tuple(tasks))


def _wf_task(
    spec: dict[str, Any], record: dict[str, Any], instance: WfInstance, params: SimParams
) -> SimTask:
    peak = floor_peak(number(record, "memoryInBytes"))
    cpu_percent = number(record, "avgCPU")
    return SimTask(
        id=str(spec["id"]),
        family=task_family(spec),
        runtime_s=number(record, "runtimeInSeconds") or 0.0,
        peak_memory_bytes=peak,
        request_memory_bytes=user_request_bytes(peak, params),
        request_cores=params.user_cpu_cores,
        cpu_cores_used=max(cpu_percent / 100.0, 0.01) if cpu_percent else 1.0,
        io_bytes=(number(record, "readBytes") or 0.0) + (number(record, "writtenBytes") or 0.0),
        parents=tuple(str(p) for p in spec.get("parents", [])),
        input_size_bytes=instance.input_size_bytes(spec) or None,
    )


def lotaru_workload(folder: str, workflow: str, params: SimParams) -> Workload:
    """Lotaru's tasks with their measured runtime on every machine; each sample's tasks form a chain.

    Lotaru has no DAG: the tasks of one sample (same ``NumberSequences``) run one after another in
    pipeline order (the order tasks first appear in the report). The reference machine's row gives
    the demand; a machine that lacks a row gets the reference runtime times the family's median
    ratio on that machine.
    """
    if not os.path.isdir(folder):
        raise SimulationInputError(f"{folder}: not a folder (lotaru:DIR:WORKFLOW names Lotaru's data)")
    frames = {}
    for machine in sorted(os.listdir(folder)):
        path = os.path.join(folder, machine, f"{workflow}.csv")
        if os.path.isfile(path):
            frames[machine] = _lotaru_frame(path)
    if LOTARU_REFERENCE_MACHINE not in frames:
        reference = os.path.join(folder, LOTARU_REFERENCE_MACHINE)
        if os.path.isdir(reference):  # the machines are there: the workflow is not
            there = sorted(n.removesuffix(".csv") for n in os.listdir(reference) if n.endswith(".csv"))
            raise SimulationInputError(
                f"{folder}: no Lotaru workflow {workflow!r} (known: {', '.join(there)})"
            )
        raise SimulationInputError(
            f"{folder}: needs {LOTARU_REFERENCE_MACHINE}/{workflow}.csv (found machines: {', '.join(frames) or 'none'})"
        )
    ref = frames[LOTARU_REFERENCE_MACHINE]
    runtime = pd.DataFrame({m: f["Realtime"] / 1000.0 for m, f in frames.items()})
    ratio = runtime.div(runtime[LOTARU_REFERENCE_MACHINE], axis=0).groupby(level="Task").median()
    for machine in runtime.columns:
        guess = (
            runtime[LOTARU_REFERENCE_MACHINE]
            * ratio[machine].reindex(runtime.index.get_level_values("Task")).to_numpy()
        )
        runtime[machine] = runtime[machine].fillna(guess)
    pipeline = list(dict.fromkeys(ref.index.get_level_values("Task")))
    ref = ref.loc[sorted(ref.index, key=lambda k: (k[1], pipeline.index(k[0])))]
    tasks: list[SimTask] = []
    previous: dict[int, str] = {}
    for (task, sample), row in ref.iterrows():
        peak = floor_peak(row["peak_rss"])
        tid = f"{task}/{sample}"
        measured = {m: float(v) for m, v in runtime.loc[(task, sample)].items() if np.isfinite(v)}
        tasks.append(
            SimTask(
                id=tid,
                family=f"{workflow}:{task}",
                runtime_s=measured[LOTARU_REFERENCE_MACHINE],
                peak_memory_bytes=peak,
                request_memory_bytes=user_request_bytes(peak, params),
                request_cores=params.user_cpu_cores,
                cpu_cores_used=max(float(row["%cpu"]) / 100.0, 0.01) if np.isfinite(row["%cpu"]) else 1.0,
                io_bytes=float(np.nansum([row["read_bytes"], row["write_bytes"]])),
                parents=(previous[sample],) if sample in previous else (),
                input_size_bytes=int(row["TaskInputSize"]) if np.isfinite(row["TaskInputSize"]) else None,
                runtime_by_machine=measured,
            )
        )
        previous[sample] = tid
    return Workload(f"lotaru-{workflow}", tuple(tasks))


def _lotaru_frame(path: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
        numeric = ["Realtime", "peak_rss", "%cpu", "read_bytes", "write_bytes", "TaskInputSize"]
        for column in numeric:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
        frame = frame.dropna(subset=["Realtime", "NumberSequences"])
        frame["NumberSequences"] = frame["NumberSequences"].astype(int)
        return frame.set_index(["Task", "NumberSequences"])[numeric]
    except (OSError, ValueError, KeyError) as err:
        raise TraceFormatError(f"{path}: not a Lotaru report ({type(err).__name__}: {err})") from None


def load_workload(spec: str, params: SimParams, seed: int = 0) -> Workload:
    """Parse a workload spec (see the module docstring)."""
    kind, _, rest = spec.partition(":")
    if kind == "wfformat" and rest:
        return wfformat_workload(rest, params)
    if kind == "lotaru" and ":" in rest:
        folder, workflow = rest.rsplit(":", 1)
        return lotaru_workload(folder, workflow, params)
    if kind == "synthetic" and ":" in rest:
        name, count = rest.rsplit(":", 1)
        if name in KINDS and count.isdigit() and 0 < int(count) <= MAX_TASKS:
            return pegasus_workload(name, int(count), params, seed)
        if name in KINDS:
            raise SimulationInputError(
                f"workload {spec!r}: TASKS must be a whole number from 1 to {MAX_TASKS}, not {count!r}"
            )
    if kind == "shared" and ":" in rest:
        runs, size = rest.split(":", 1)
        most = MAX_TASKS // TASKS_PER_RUN
        if runs.isdigit() and 0 < int(runs) <= most:
            return shared_input_workload(int(runs), parse_size_bytes(size), params, seed)
        raise SimulationInputError(
            f"workload {spec!r}: RUNS must be a whole number from 1 to {most} ({TASKS_PER_RUN} tasks each), "
            f"not {runs!r}"
        )
    raise SimulationInputError(
        f"workload {spec!r}: expected wfformat:FILE, lotaru:DIR:WORKFLOW, shared:RUNS:SIZE or synthetic:KIND:TASKS "
        f"(KIND one of {', '.join(KINDS)})"
    )
