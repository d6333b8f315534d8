"""Synthetic Pegasus-style DAGs (seeded): Montage, Epigenomics, CyberShake and LIGO Inspiral shapes.

Shapes follow Bharathi et al. (2008), "Characterization of scientific
workflows", as the Pegasus workflow generator builds them. Per-family
magnitudes (minutes of runtime, 0.2-12 GB peaks, cores busy, I/O) are ours:
each family is CPU-, memory- or I/O-heavy so that placement has something to
match. Peaks follow Witt et al.'s memory models (linear in input with
probability 1/2); runtimes scale with the input and carry 20 % log-normal noise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from airflow_adaptive.core.units import GB, MB
from airflow_adaptive.evaluation.synthetic import WittModel

from .params import SimParams
from .workload import SimTask, Workload, floor_peak, user_request_bytes


@dataclass(frozen=True)
class Family:
    runtime_s: float
    cpu_cores: float
    peak_gb: float
    io_mb_per_s: float


# family -> (mean runtime s on the reference node, cores busy, mean peak GB, I/O MB/s)
FAMILIES: dict[str, Family] = {
    # Montage: reprojection and background fitting are CPU-bound; mAdd is I/O-bound, mBgModel memory-bound.
    "mProjectPP": Family(90, 1.0, 0.8, 5), "mDiffFit": Family(40, 1.0, 0.3, 20), "mConcatFit": Family(120, 1.0, 1.5, 10),
    "mBgModel": Family(300, 1.0, 6.0, 2), "mBackground": Family(45, 1.0, 0.5, 15), "mImgtbl": Family(60, 1.0, 0.4, 40),
    "mAdd": Family(280, 1.0, 3.0, 120), "mShrink": Family(70, 1.0, 1.0, 60), "mJPEG": Family(30, 1.0, 0.3, 10),
    # Epigenomics: mapping is CPU-heavy and multi-threaded; the splits and conversions move data.
    "fastqSplit": Family(120, 1.0, 0.5, 150), "filterContams": Family(60, 1.0, 0.4, 80), "sol2sanger": Family(30, 1.0, 0.3, 90),
    "fast2bfq": Family(40, 1.0, 0.3, 70), "map": Family(600, 3.0, 4.0, 10), "mapMerge": Family(200, 1.0, 2.0, 120),
    "maqIndex": Family(300, 1.0, 8.0, 30), "pileup": Family(400, 1.0, 6.0, 40),
    # CyberShake: strain-Green-tensor extraction is memory- and I/O-heavy, synthesis CPU-heavy.
    "ExtractSGT": Family(500, 1.0, 10.0, 200), "SeismogramSynthesis": Family(150, 2.0, 1.5, 5),
    "PeakValCalcOkaya": Family(20, 1.0, 0.2, 5), "ZipSeis": Family(200, 1.0, 0.5, 150), "ZipPSA": Family(120, 1.0, 0.3, 100),
    # LIGO Inspiral: matched filtering is CPU-heavy; template banks and coincidence are light.
    "TmpltBank": Family(180, 1.0, 1.0, 10), "Inspiral": Family(450, 2.5, 2.0, 5), "Thinca": Family(30, 1.0, 0.5, 20),
    "TrigBank": Family(30, 1.0, 0.3, 20),
}  # fmt: skip

Edges = list[tuple[str, list[int]]]  # (family, parent positions) in creation order


def _montage(n: int) -> Edges:
    w = max(3, (n - 6) // 4)
    tasks: Edges = [("mProjectPP", []) for _ in range(w)]
    diffs = [len(tasks) + k for k in range(2 * w - 3)]
    tasks += [("mDiffFit", [i, i + 1 + k]) for i in range(w) for k in range(2) if i + 1 + k < w]
    concat = len(tasks)
    tasks.append(("mConcatFit", diffs))
    tasks.append(("mBgModel", [concat]))
    backgrounds = [len(tasks) + i for i in range(w)]
    tasks += [("mBackground", [concat + 1, i]) for i in range(w)]
    for family in ("mImgtbl", "mAdd", "mShrink", "mJPEG"):
        tasks.append((family, backgrounds if family == "mImgtbl" else [len(tasks) - 1]))
    return tasks


def _epigenomics(n: int) -> Edges:
    lanes = 4
    chunks = max(1, (n - 2 - 2 * lanes) // (4 * lanes))
    tasks: Edges = []
    merges = []
    for _ in range(lanes):
        split = len(tasks)
        tasks.append(("fastqSplit", []))
        ends = []
        for _ in range(chunks):
            parent = split
            for family in ("filterContams", "sol2sanger", "fast2bfq", "map"):
                tasks.append((family, [parent]))
                parent = len(tasks) - 1
            ends.append(parent)
        merges.append(len(tasks))
        tasks.append(("mapMerge", ends))
    tasks.append(("maqIndex", merges))
    tasks.append(("pileup", [len(tasks) - 1]))
    return tasks


def _cybershake(n: int) -> Edges:
    sites = max(1, (n - 4) // 2)
    tasks: Edges = [("ExtractSGT", []), ("ExtractSGT", [])]
    seis = []
    for i in range(sites):
        seis.append(len(tasks))
        tasks.append(("SeismogramSynthesis", [i % 2]))
        tasks.append(("PeakValCalcOkaya", [len(tasks) - 1]))
    tasks.append(("ZipSeis", seis))
    tasks.append(("ZipPSA", [s + 1 for s in seis]))
    return tasks


def _ligo(n: int) -> Edges:
    group = 5
    blocks = max(1, n // (4 * group + 2))
    tasks: Edges = []
    for _ in range(blocks):
        banks = [len(tasks) + i for i in range(group)]
        tasks += [("TmpltBank", []) for _ in range(group)]
        first = [len(tasks) + i for i in range(group)]
        tasks += [("Inspiral", [b]) for b in banks]
        thinca = len(tasks)
        tasks.append(("Thinca", first))
        trig = [len(tasks) + i for i in range(group)]
        tasks += [("TrigBank", [thinca]) for _ in range(group)]
        second = [len(tasks) + i for i in range(group)]
        tasks += [("Inspiral", [t]) for t in trig]
        tasks.append(("Thinca", second))
    return tasks


KINDS: dict[str, Callable[[int], Edges]] = {
    "montage": _montage,
    "epigenomics": _epigenomics,
    "cybershake": _cybershake,
    "ligo": _ligo,
}


def pegasus_workload(kind: str, tasks: int, params: SimParams, seed: int = 0) -> Workload:
    """A ``kind`` DAG of about ``tasks`` task instances (the shape decides the exact count)."""
    shape = KINDS[kind](tasks)
    rng = np.random.default_rng(seed)
    models = {f: WittModel.draw(rng, FAMILIES[f].peak_gb * GB) for f in sorted({f for f, _ in shape})}
    out = []
    for i, (family, parents) in enumerate(shape):
        spec, model = FAMILIES[family], models[family]
        x, peak = model.sample(rng)
        scale = max(x, 1.0) / (model.mean_bytes / model.slope)  # input relative to the family's mean
        runtime = spec.runtime_s * scale * float(rng.lognormal(0.0, 0.2))
        peak_bytes = floor_peak(max(peak, 0.05 * spec.peak_gb * GB))
        out.append(
            SimTask(
                id=f"{family}_{i}",
                family=family,
                runtime_s=runtime,
                peak_memory_bytes=peak_bytes,
                request_memory_bytes=user_request_bytes(peak_bytes, params),
                request_cores=params.user_cpu_cores,
                cpu_cores_used=spec.cpu_cores,
                io_bytes=spec.io_mb_per_s * MB * runtime,
                parents=tuple(f"{shape[p][0]}_{p}" for p in parents),
                input_size_bytes=int(max(x, 1.0)),
            )
        )
    return Workload(f"synthetic-{kind}-{len(out)}", tuple(out))
