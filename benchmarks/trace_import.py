"""Importing a large Nextflow trace through the real CLI: seconds and peak memory against the goals.

    python benchmarks/trace_import.py [--rows 1000000] [--backends sqlite,postgres]

Writes a synthetic Nextflow trace (all of Nextflow's trace fields, raw numbers, 300 processes on
40 hosts, one OOM kill (exit 137) and its retry in every 40 tasks, a few unusable rows) to a
temporary folder, creates the provider's tables in a fresh database, and runs
``airflow-adaptive history import`` on it in a child process, twice (the second time every
attempt is already stored and is replaced). Reported: wall seconds and the child's peak resident
memory, each divided by its goal (60 s, 500 MB), and that every usable row was stored once.
PostgreSQL: the local server (``--postgres-url``), database ``adaptive_bench``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table
from sqlalchemy import create_engine, func, select, text

from airflow_adaptive.store.tables import metadata, task_attempt

GOAL_SECONDS = 60.0
GOAL_MB = 500.0
FIELDS = (  # every field Nextflow can trace
    "task_id", "hash", "native_id", "process", "tag", "name", "status", "exit", "module", "container",
    "cpus", "time", "disk", "memory", "attempt", "submit", "start", "complete", "duration", "realtime",
    "queue", "%cpu", "%mem", "rss", "vmem", "peak_rss", "peak_vmem", "rchar", "wchar", "syscr", "syscw",
    "read_bytes", "write_bytes", "vol_ctxt", "inv_ctxt", "workdir", "scratch", "error_action",
    "hostname",
)  # fmt: skip


def write_trace(path: Path, rows: int, seed: int = 0) -> int:
    """A Nextflow trace of ``rows`` rows; returns how many of them are usable attempts."""
    rng = np.random.default_rng(seed)
    oom = np.arange(rows) % 40 == 39
    retry = np.roll(oom, 1)  # the row after a kill is its retry: same process, attempt 2
    retry[0] = False
    process_no = rng.integers(0, 300, rows)
    process_no[retry] = process_no[np.roll(retry, -1)]
    peak = (rng.lognormal(20, 1.0, 300)[process_no] * rng.uniform(0.7, 1.3, rows)).astype(np.int64)
    status = np.where(oom, "FAILED", "COMPLETED").astype(object)
    status[np.arange(rows) % 997 == 500] = "ABORTED"  # says nothing about resource use: skipped
    realtime_ms = rng.integers(1_000, 3_600_000, rows)
    complete_ms = 1_700_000_000_000 + np.cumsum(rng.integers(0, 2_000, rows))
    frame = pd.DataFrame({name: "-" for name in FIELDS}, index=range(rows))
    frame["task_id"] = np.arange(1, rows + 1)
    frame["hash"] = [f"{h >> 24:02x}/{h & 0xFFFFFF:06x}" for h in rng.integers(0, 2**32, rows).tolist()]
    frame["status"] = status
    frame["exit"] = np.where(oom, 137, 0)
    frame["memory"] = np.int64(8 * 2**30)
    frame["attempt"] = np.where(retry, 2, 1)
    frame["process"] = pd.Series([f"NFCORE_BENCH:STEP_{n:03d}" for n in range(300)])[process_no].to_numpy()
    frame["name"] = frame["process"] + " (sample_" + (np.arange(rows) % 1000).astype(str) + ")"
    frame["complete"] = complete_ms
    frame["realtime"] = realtime_ms
    frame["%cpu"] = np.round(rng.uniform(5, 400, rows), 1)
    frame["peak_rss"] = np.where(oom, 0, peak)
    frame["rchar"] = rng.integers(0, 10**10, rows)
    frame["wchar"] = rng.integers(0, 10**9, rows)
    frame["hostname"] = pd.Series([f"node{n:02d}" for n in range(40)])[rng.integers(0, 40, rows)].to_numpy()
    frame.to_csv(path, index=False)
    return int((status != "ABORTED").sum())


def run_import(trace: Path, url: str) -> tuple[float, float, str]:
    """Seconds, peak resident MB of the child and its last output line."""
    env = {**os.environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "peak_kb=%M", sys.executable, "-m", "airflow_adaptive.cli",
         "history", "import", str(trace)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"import failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    peak_kb = float(done.stderr.rsplit("peak_kb=", 1)[1])  # GNU time: the child's maximum RSS
    return seconds, peak_kb / 1024, (done.stdout.strip().splitlines() or [""])[-1]


def fresh_database(backend: str, folder: Path, postgres_url: str) -> str:
    if backend == "sqlite":
        url = f"sqlite:///{folder / 'bench.db'}"
    else:
        admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("DROP DATABASE IF EXISTS adaptive_bench WITH (FORCE)"))
            conn.execute(text("CREATE DATABASE adaptive_bench"))
        admin.dispose()
        url = postgres_url.rsplit("/", 1)[0] + "/adaptive_bench"
    engine = create_engine(url)
    metadata.create_all(engine)
    engine.dispose()
    return url


def stored_rows(url: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        count = int(conn.execute(select(func.count()).select_from(task_attempt)).scalar_one())
    engine.dispose()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--postgres-url", default="postgresql+psycopg2://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    console = Console()
    table = Table(title=f"history import of a {args.rows:,}-line Nextflow trace")
    for column in ("database, run", "seconds", "÷ 60 s goal", "peak MB", "÷ 500 MB goal", "rows stored"):
        table.add_column(column, justify="left" if column == "database, run" else "right")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trace = folder / "big_trace.csv"
        started = time.perf_counter()
        usable = write_trace(trace, args.rows)
        console.print(f"wrote {trace.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - started:.0f} s")
        for backend in args.backends.split(","):
            url = fresh_database(backend, folder, args.postgres_url)
            for kind in ("import", "import again"):
                seconds, peak_mb, said = run_import(trace, url)
                table.add_row(
                    f"{backend}, {kind}", f"{seconds:.1f}", f"{seconds / GOAL_SECONDS:.2f}", f"{peak_mb:.0f}",
                    f"{peak_mb / GOAL_MB:.2f}", f"{stored_rows(url):,} of {usable:,}",
                )  # fmt: skip
                console.print(f"{backend}, {kind}: {said}")
    console.print(table)


if __name__ == "__main__":
    main()
