"""``shared:RUNS:SIZE``: many concurrent DAG runs whose tasks all read two shared inputs.

Each run is the paper's "Seq + Branch" workflow (Table 2: four applications in sequence, then four
in parallel), built from its four synthetic applications (Table 5: CPU use 45-99 %, RSS 180-800 MB).
Table 2 gives about 360 s for a run's eight applications: 45 s each on the reference node, with
20 % seeded log-normal noise. Every task reads the same two inputs of SIZE from shared storage (a
reference genome and its index: what bioinformatics steps of one pipeline share across runs).
"""

from __future__ import annotations

import numpy as np
from kubernetes.utils import parse_quantity

from airflow_adaptive.core.units import MB, format_bytes
from airflow_adaptive.exceptions import SimulationInputError

from .params import SimParams
from .workload import SimTask, Workload, user_request_bytes

# Table 5's applications: (CPU use, RSS bytes).
APPLICATIONS = ((0.45, 800 * MB), (0.98, 180 * MB), (0.99, 480 * MB), (0.99, 300 * MB))
RUNTIME_S = 45.0
SEQUENCE, BRANCHES = 4, 4
MAX_INPUT_BYTES = 2**50  # 1 PiB: larger reads would outrun the simulated clock's calendar


def parse_size_bytes(text: str) -> int:
    """A Kubernetes-style quantity (``2Gi``, ``512Ki``, ``1G``) as whole bytes."""
    try:
        size = int(parse_quantity(text))
    except (ValueError, TypeError):
        raise SimulationInputError(f"input size {text!r} is not a quantity such as 2Gi or 512Ki") from None
    if not 0 < size <= MAX_INPUT_BYTES:
        raise SimulationInputError(f"input size {text!r} must be positive and at most 1Pi")
    return size


def shared_input_workload(runs: int, size_bytes: int, params: SimParams, seed: int = 0) -> Workload:
    """``runs`` concurrent runs; every task reads ``reference`` and ``index``, each of ``size_bytes``."""
    if runs < 1:
        raise SimulationInputError("shared:RUNS:SIZE needs at least one run")
    rng = np.random.default_rng(seed)
    inputs = (("reference", size_bytes), ("index", size_bytes))
    tasks = []
    for run in range(runs):
        for position in range(SEQUENCE + BRANCHES):
            cpu, rss = APPLICATIONS[position % len(APPLICATIONS)]
            parent = () if position == 0 else (f"r{run}/app{min(position, SEQUENCE) - 1}",)
            tasks.append(
                SimTask(
                    id=f"r{run}/app{position}",
                    family=f"shared-app{position % len(APPLICATIONS) + 1}",
                    runtime_s=RUNTIME_S * float(rng.lognormal(0.0, 0.2)),
                    peak_memory_bytes=rss,
                    request_memory_bytes=user_request_bytes(rss, params),
                    request_cores=params.user_cpu_cores,
                    cpu_cores_used=cpu,
                    io_bytes=2.0 * size_bytes,
                    parents=parent,
                    inputs=inputs,
                )
            )
    return Workload(f"shared-{format_bytes(size_bytes).replace(' ', '')}", tuple(tasks), runs)
