"""Writes the example traces beside this script: synthetic, seeded, one per format ``history import``,
``replay`` and ``simulate`` read. Run it again and the files come out the same byte for byte.

    python docs/examples/make_traces.py

- ``nextflow/chipseq_trace.txt``: an nf-core/chipseq-like run as Nextflow writes its trace by default
  (tab-separated, ``72 GB``, ``4m 3s``, ``98.3%``, dates); ``nextflow/chipseq_trace_raw.csv`` the same
  rows as ``trace.raw = true`` writes them. Values are kept at the precision of the readable form,
  so both import to the same attempts.
- ``cctools/workqueue_tasks.txt``: a Work Queue task summary (`` -- `` columns, memory in MB).
- ``lotaru/<machine>/bacass.csv``: the same nf-core/bacass-like tasks measured on each of Lotaru's
  machines, their runtimes scaled by the machine's published CPU or I/O score.
- ``wfformat/chipseq_instance.json``: a WfFormat 1.5 instance (DAG, files, execution records).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
GB, MB = 1024.0**3, 1024.0**2
UNITS = ("B", "KB", "MB", "GB", "TB")
START_MS = 1_709_542_800_000  # 2024-03-04 09:00 UTC
PREFIX = "NFCORE_CHIPSEQ:CHIPSEQ:"
# nf-core labels: (cpus, memory GB); Nextflow retries a kill with memory x attempt.
LABELS = {"single": (1, 6), "low": (2, 12), "medium": (6, 36), "high": (12, 72)}
# process, label, tasks, median peak GB, spread (log-normal sigma), median runtime s, %cpu per cpu, image
PROCESSES = (
    ("INPUT_CHECK:SAMPLESHEET_CHECK", "single", 1, 0.03, 0.1, 4, 90, "python:3.8.3"),
    ("FASTQC_TRIMGALORE:FASTQC", "medium", 24, 0.35, 0.15, 140, 60, "fastqc:0.11.9--0"),
    ("FASTQC_TRIMGALORE:TRIMGALORE", "high", 24, 0.9, 0.3, 600, 45, "trim-galore:0.6.7--hdfd78af_0"),
    ("ALIGN_BWA_MEM:BWA_MEM", "high", 48, 8.6, 0.22, 1900, 85, "bwa:0.7.17--hed695b0_7"),
    ("ALIGN_BWA_MEM:BAM_SORT_SAMTOOLS:SAMTOOLS_SORT", "medium", 48, 1.6, 0.25, 300, 70, "samtools:1.15.1--h1170115_0"),
    ("ALIGN_BWA_MEM:BAM_SORT_SAMTOOLS:SAMTOOLS_INDEX", "low", 48, 0.02, 0.2, 40, 95, "samtools:1.15.1--h1170115_0"),
    ("ALIGN_BWA_MEM:BAM_SORT_SAMTOOLS:BAM_STATS_SAMTOOLS:SAMTOOLS_FLAGSTAT", "low", 24, 0.01, 0.2, 25, 95,
     "samtools:1.15.1--h1170115_0"),
    ("PICARD_MERGESAMFILES", "medium", 24, 2.1, 0.2, 420, 80, "picard:2.27.4--hdfd78af_0"),
    ("MARK_DUPLICATES_PICARD:PICARD_MARKDUPLICATES", "medium", 24, 5.2, 0.18, 900, 95, "picard:2.27.4--hdfd78af_0"),
    ("PRESEQ_LCEXTRAP", "single", 24, 3.0, 0.45, 700, 98, "preseq:3.1.2--h445547b_2"),
    ("PHANTOMPEAKQUALTOOLS", "medium", 12, 3.4, 0.2, 1500, 99, "phantompeakqualtools:1.2.2--0"),
    ("MACS2_CALLPEAK", "medium", 12, 0.8, 0.3, 480, 99, "macs2:2.2.7.1--py38h4a8c8d9_3"),
    ("DEEPTOOLS_COMPUTEMATRIX", "high", 12, 2.2, 0.15, 260, 700, "deeptools:3.5.1--py_0"),
    ("MULTIQC", "medium", 1, 1.1, 0.1, 95, 98, "multiqc:1.13--pyhdfd78af_0"),
)  # fmt: skip


def exact_bytes(size: float) -> float:
    """A size at a tenth of its unit, as Nextflow's readable form keeps it (``1.2 GB``)."""
    if not size > 0:
        return size
    unit = 1024.0 ** int(math.log(size, 1024))
    return math.floor(round(size / unit, 1) * unit + 0.5)


def exact_ms(ms: float) -> float:
    """A duration at the precision Nextflow writes it: ms below 1 s, tenths below 1 min, else seconds."""
    return round(ms) if ms < 1000 else round(ms / 100) * 100 if ms < 60_000 else round(ms / 1000) * 1000


def nf_memory(size: float) -> str:
    if size != size:
        return "-"
    if size <= 0:
        return "0"
    group = int(math.log10(size) / math.log10(1024))
    return f"{size / 1024**group:.1f}".removesuffix(".0") + " " + UNITS[group]


def nf_duration(ms: float) -> str:
    if ms != ms:
        return "-"
    if ms < 1000:
        return f"{int(ms)}ms"
    if ms < 60_000:
        return f"{round(ms / 100) / 10:.1f}".removesuffix(".0") + "s"
    seconds = round(ms / 1000)
    parts = (
        (seconds // 86400, "d"),
        (seconds // 3600 % 24, "h"),
        (seconds // 60 % 60, "m"),
        (seconds % 60, "s"),
    )
    return " ".join(f"{n}{unit}" for n, unit in parts if n)


def nf_date(ms: float) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.")
        + f"{int(ms) % 1000:03d}"
    )


def _attempt(rng: np.random.Generator, spec: tuple, tag: str, attempt: int, clock: float) -> dict:
    """One task attempt of a process; killed (exit 137) when its peak exceeds its request."""
    process, label, _, peak_gb, sigma, runtime_s, cpu_pct, image = spec
    cpus, memory_gb = LABELS[label]
    request = memory_gb * GB * attempt
    peak = exact_bytes(peak_gb * GB * rng.lognormal(0, sigma))
    killed = peak > request
    realtime = exact_ms(runtime_s * 1000 * rng.lognormal(0, 0.3) * (0.4 if killed else 1))
    start = clock + float(rng.integers(0, 600_000))
    submit = start - float(rng.integers(200, 20_000))
    return {
        "process": PREFIX + process, "tag": tag, "name": f"{PREFIX}{process} ({tag})",
        "status": "FAILED" if killed else "COMPLETED", "exit": 137 if killed else 0,
        "container": "quay.io/biocontainers/" + image, "cpus": cpus, "memory": request, "attempt": attempt,
        "submit": submit, "start": start, "complete": start + realtime,
        "duration": exact_ms(start + realtime - submit), "realtime": realtime,
        "%cpu": round(min(cpu_pct, 100 * cpus) * rng.uniform(0.8, 1.05), 1),
        "peak_rss": math.nan if killed else peak,
        "peak_vmem": math.nan if killed else exact_bytes(peak * rng.uniform(1.05, 1.6)),
        "rchar": exact_bytes(peak * rng.uniform(0.5, 20)), "wchar": exact_bytes(peak * rng.uniform(0.1, 5)),
        "read_bytes": exact_bytes(peak * rng.uniform(0.1, 10)), "write_bytes": exact_bytes(peak * rng.uniform(0.1, 5)),
        "hostname": f"worker-{int(rng.integers(1, 5)):02d}",
    }  # fmt: skip


def nextflow_rows(seed: int = 31) -> pd.DataFrame:
    """The run's attempts in completion order; a killed attempt is followed by its retry."""
    rng = np.random.default_rng(seed)
    rows, clock = [], float(START_MS)
    for spec in PROCESSES:
        for n in range(spec[2]):
            tag = (
                "samplesheet.csv"
                if spec[2] == 1
                else f"SPT5_{('T0', 'T8', 'INPUT')[n % 3]}_REP{n % 4 + 1}_T{n // 12 + 1}"
            )
            attempt = 1
            while True:
                row = _attempt(rng, spec, tag, attempt, clock)
                rows.append(row)
                if row["exit"] != 137:
                    break
                attempt += 1
        clock += 900_000  # the next process's tasks start once inputs are ready
    frame = pd.DataFrame(rows).sort_values("complete", kind="stable").reset_index(drop=True)
    frame.insert(0, "task_id", np.arange(1, len(frame) + 1))
    frame.insert(
        1, "hash", [f"{h >> 24:02x}/{h & 0xFFFFFF:06x}" for h in rng.integers(0, 2**32, len(frame)).tolist()]
    )
    frame.insert(2, "native_id", rng.integers(100_000, 999_999, len(frame)))
    return frame


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows as Nextflow writes them without ``trace.raw = true``."""
    text = frame.astype(object)
    for column in ("memory", "peak_rss", "peak_vmem", "rchar", "wchar", "read_bytes", "write_bytes"):
        text[column] = frame[column].map(nf_memory)
    for column in ("duration", "realtime"):
        text[column] = frame[column].map(nf_duration)
    for column in ("submit", "start", "complete"):
        text[column] = frame[column].map(nf_date)
    text["%cpu"] = frame["%cpu"].map("{:.1f}%".format)
    return text


def write_nextflow(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = nextflow_rows()
    raw = rows.copy()
    for column in ("submit", "start", "complete", "duration", "realtime", "memory", "peak_rss", "peak_vmem",
                   "rchar", "wchar", "read_bytes", "write_bytes"):  # fmt: skip
        raw[column] = raw[column].map(lambda v: "-" if v != v else str(int(v)))
    raw.to_csv(folder / "chipseq_trace_raw.csv", index=False)
    readable(rows).to_csv(folder / "chipseq_trace.txt", sep="\t", index=False)


def write_cctools(folder: Path, seed: int = 32, tasks: int = 160) -> None:
    """Work Queue summaries of three task categories (tag 0, 1, 2), memory and disk in MB."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    categories = ((1, 2400, 0.12, 180.0), (2, 6100, 0.05, 260.0), (4, 900, 0.6, 45.0))  # cores, MB, sigma, s
    lines = ["taskid -- core -- memory -- virtual_memory -- disk -- time -- average_cores -- tag"]
    for task_id in range(1, tasks + 1):
        tag = int(rng.choice(3, p=(0.5, 0.3, 0.2)))
        cores, memory_mb, sigma, seconds = categories[tag]
        memory = int(memory_mb * rng.lognormal(0, sigma))
        time_s = seconds * rng.lognormal(0, 0.25)
        busy = cores * rng.uniform(0.55, 0.95)
        lines.append(
            f"{task_id} -- {cores} -- {memory} -- {int(memory * rng.uniform(40, 60))} -- "
            f"{int(rng.integers(1, 40))} -- {time_s:.6f} -- {busy:.3f} -- {tag}"
        )
    (folder / "workqueue_tasks.txt").write_text("\n".join(lines) + "\n")


# Lotaru's machines with the scores they were published with (cpu events/s, fio score); "local" has none.
MACHINES = {"local": (300, 400), "asok01": (223, 303), "asok02": (223, 339), "n1": (369, 483),
            "n2": (467, 483), "c2": (523, 483), "wallyRedCpu": (437, 415)}  # fmt: skip
# task, seconds per million reads on n1, bound by "cpu" or "io", peak MB at 1M reads, MB per 1M reads
BACASS_TASKS = (
    ("FASTQC", 9.0, "io", 560, 5), ("SKEWER", 390.0, "cpu", 9, 1.2), ("UNICYCLER", 2100.0, "cpu", 2200, 900),
    ("PROKKA", 600.0, "cpu", 780, 60), ("KRAKEN2", 160.0, "io", 5200, 40),
)  # fmt: skip
LOTARU_COLUMNS = [
    "Label",
    "Machine",
    "Workflow",
    "NumberSequences",
    "Task",
    "WorkflowInputSize",
    "Realtime",
    "%cpu",
    "rss",
    "rchar",
    "wchar",
    "cpus",
    "read_bytes",
    "write_bytes",
    "vmem",
    "memory",
    "peak_rss",
    "TaskInputSize",
    "TaskInputSizeUncompressed",
    "WorkflowInputUncompressed",
]


def write_lotaru(folder: Path, seed: int = 33) -> None:
    """The same samples' tasks on every machine: runtime scales with reads and the machine's score."""
    rng = np.random.default_rng(seed)
    samples = [("train-1", n) for n in (13_400, 53_000, 106_000, 212_000, 424_000, 847_800)]
    samples += [("train-2", n) for n in (26_500, 318_000)] + [("test", n) for n in (1_695_400, 3_390_800)]
    demand = {(t[0], n): rng.lognormal(0, 0.08) for t in BACASS_TASKS for _, n in samples}
    for machine, (cpu_score, io_score) in MACHINES.items():
        rows = []
        for label, reads in samples:
            size = int(reads * 200.7)  # gzipped FASTQ bytes
            for task, per_million, bound, peak_mb, mb_per_million in BACASS_TASKS:
                speed = (cpu_score if bound == "cpu" else io_score) / MACHINES["n1"][
                    0 if bound == "cpu" else 1
                ]
                seconds = max(
                    1.0, per_million * reads / 1e6 * demand[task, reads] / speed * rng.lognormal(0, 0.04)
                )
                peak = int((peak_mb + mb_per_million * reads / 1e6) * MB * rng.lognormal(0, 0.05))
                rchar, wchar = int(size * rng.uniform(2, 8)), int(size * rng.uniform(0.5, 3))
                rows.append([label, machine, "bacass", reads, f"NFCORE_BACASS:BACASS:{task}", size,
                             int(round(seconds) * 1000), round(float(rng.uniform(95, 260)), 1), peak, rchar, wchar, 8,
                             int(rchar * 0.3), int(wchar * 0.6), int(peak * 1.4), 8 * 1024**3, peak, size,
                             int(size * 2.67), int(size * 2.67)])  # fmt: skip
        (folder / machine).mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows, columns=LOTARU_COLUMNS).to_csv(folder / machine / "bacass.csv", index=False)


def write_wfformat(folder: Path, seed: int = 34, samples: int = 6) -> None:
    """A chipseq-like DAG per sample (FASTQC and TRIMGALORE → BWA_MEM → SAMTOOLS_SORT → MACS2) and one MULTIQC."""
    rng = np.random.default_rng(seed)
    steps = (("FASTQC", 0.3, 140), ("TRIMGALORE", 0.9, 600), ("BWA_MEM", 8.6, 1900),
             ("SAMTOOLS_SORT", 1.6, 300), ("MACS2_CALLPEAK", 0.8, 480))  # fmt: skip
    parents_of = {"FASTQC": (), "TRIMGALORE": (), "BWA_MEM": ("TRIMGALORE",), "SAMTOOLS_SORT": ("BWA_MEM",),
                  "MACS2_CALLPEAK": ("SAMTOOLS_SORT",)}  # fmt: skip
    tasks: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    number = 0
    ids: dict[tuple[str, int], str] = {}
    outputs: dict[str, str] = {}
    for sample in range(samples):
        reads = f"/data/sample_{sample + 1}.fastq.gz"
        files.append({"id": reads, "sizeInBytes": int(rng.integers(400, 2400) * MB)})
        for step, peak_gb, seconds in steps:
            number += 1
            ids[step, sample] = task_id = f"NFCORE_CHIPSEQ.CHIPSEQ.{step}_{number}"
            output = f"/work/{number:02x}/{step.lower()}_{sample + 1}.out"
            files.append({"id": output, "sizeInBytes": int(rng.integers(10, 2000) * MB)})
            outputs[task_id] = output
            parents = [ids[p, sample] for p in parents_of[step]]
            tasks.append({"name": f"NFCORE_CHIPSEQ.CHIPSEQ.{step}", "id": task_id, "parents": parents, "children": [],
                          "inputFiles": [outputs[p] for p in parents] or [reads], "outputFiles": [output]})  # fmt: skip
            records.append(_wf_record(rng, task_id, peak_gb, seconds))
    multiqc = "NFCORE_CHIPSEQ.CHIPSEQ.MULTIQC_" + str(number + 1)
    peaks = [ids["MACS2_CALLPEAK", s] for s in range(samples)]
    tasks.append({"name": "NFCORE_CHIPSEQ.CHIPSEQ.MULTIQC", "id": multiqc, "parents": peaks, "children": [],
                  "inputFiles": [outputs[p] for p in peaks], "outputFiles": []})  # fmt: skip
    records.append(_wf_record(rng, multiqc, 1.1, 95))
    by_id = {t["id"]: t for t in tasks}
    for task in tasks:
        for parent in task["parents"]:
            by_id[parent]["children"].append(task["id"])
    instance = {
        "name": "chipseq-synthetic", "description": "synthetic example written by docs/examples/make_traces.py",
        "createdAt": "2024-03-04T09:00:00+00:00", "schemaVersion": "1.5",
        "workflow": {"specification": {"tasks": tasks, "files": files},
                     "execution": {"makespanInSeconds": sum(r["runtimeInSeconds"] for r in records),
                                   "executedAt": "20240304T090000+0000", "tasks": records,
                                   "machines": [{"nodeName": "worker-01", "cpu": {"coreCount": 12}}]}},
    }  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chipseq_instance.json").write_text(json.dumps(instance, indent=1) + "\n")


def _wf_record(rng: np.random.Generator, task_id: str, peak_gb: float, seconds: float) -> dict:
    peak = int(peak_gb * GB * rng.lognormal(0, 0.2))
    return {"id": task_id, "runtimeInSeconds": round(seconds * float(rng.lognormal(0, 0.3)), 1), "coreCount": 4,
            "avgCPU": round(float(rng.uniform(60, 380)), 1), "readBytes": int(peak * rng.uniform(1, 6)),
            "writtenBytes": int(peak * rng.uniform(0.2, 2)), "memoryInBytes": peak, "machines": ["worker-01"]}  # fmt: skip


def main(folder: Path = HERE) -> None:
    write_nextflow(folder / "nextflow")
    write_cctools(folder / "cctools")
    write_lotaru(folder / "lotaru")
    write_wfformat(folder / "wfformat")


if __name__ == "__main__":
    main()
