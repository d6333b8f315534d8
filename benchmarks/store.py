"""History store latency at 10k, 100k and 1M attempts, on PostgreSQL and SQLite, side by side.

    python benchmarks/store.py [--sizes 10000,100000,1000000] [--backends postgres,sqlite] [--calls 300]

Tables are filled with bulk SQL (generate_series / a recursive CTE): 100 attempts per family, so
1M attempts are 10k families, with an OOM kill every 50th attempt. Rollups and distributions come
from ``rebuild`` (no models); one unfinished attempt is noted per ten stored; then 100 families are warmed by recording one attempt each (their
model is fitted), untimed. Timed, each call through a fresh Advisor as a pod would:
decide for a warm family, a cold one and a retry after an OOM kill; place on a 15-node, 3-group
cluster; record (5 attempts on each warm family in turn, so refits happen at their real cadence).
PostgreSQL: the local server (``--postgres-url``), database ``adaptive_bench`` (created if missing).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine, create_engine, text

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.decide import SizingSettings
from airflow_adaptive.core.grouping import NodeProfile, group_nodes
from airflow_adaptive.core.model import ExitReason, MemoryRequest, Observation, PeakKind, TaskKey, Usage
from airflow_adaptive.core.modes import Mode
from airflow_adaptive.core.units import GIB
from airflow_adaptive.store.learning import Learning
from airflow_adaptive.store.sql import SqlHistoryStore
from airflow_adaptive.store.tables import metadata

PER_FAMILY = 100
COLUMNS = (
    "dag_id, task_id, run_id, map_index, try_number, task_family, finished_at, memory_request_bytes, "
    "memory_limit_bytes, peak_memory_bytes, peak_kind, cpu_core_seconds, wall_seconds, read_bytes, "
    "write_bytes, exit_reason, exit_code, node_name"
)
# One generated attempt per g; families f0..f{families-1}; peaks 50 MB .. 4.9 GB; every 50th OOM-killed;
# each on one of the 15 profiled nodes, so placing a warm family fits its runtime per group (finish-time).
POSTGRES_FILL = text(
    f"INSERT INTO adaptive_task_attempt ({COLUMNS}) "
    "SELECT 'dag' || (g % 100), 'f' || (g % :families), 'r' || g, -1, 1, 'f' || (g % :families), "
    "timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second', 8589934592, 8589934592, "
    "CASE WHEN g % 50 = 0 THEN NULL ELSE CAST(1 + (CAST(g AS BIGINT) * 7919) % 97 AS BIGINT) * 50000000 END, 'measured', "
    "100.0 + g % 50, 60.0 + g % 30, 1000000, 1000000, "
    "CASE WHEN g % 50 = 0 THEN 'OOMKilled' ELSE 'Completed' END, 0, 'node-' || (g % 3) || (g % 5) "
    "FROM generate_series(1, :n) AS g"
)
SQLITE_FILL = text(
    f"INSERT INTO adaptive_task_attempt ({COLUMNS}) "
    "WITH RECURSIVE seq(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < :n) "
    "SELECT 'dag' || (g % 100), 'f' || (g % :families), 'r' || g, -1, 1, 'f' || (g % :families), "
    "strftime('%Y-%m-%d %H:%M:%f', '2026-01-01', '+' || g || ' seconds'), 8589934592, 8589934592, "
    "CASE WHEN g % 50 = 0 THEN NULL ELSE CAST(1 + (CAST(g AS BIGINT) * 7919) % 97 AS BIGINT) * 50000000 END, 'measured', "
    "100.0 + g % 50, 60.0 + g % 30, 1000000, 1000000, "
    "CASE WHEN g % 50 = 0 THEN 'OOMKilled' ELSE 'Completed' END, 0, 'node-' || (g % 3) || (g % 5) FROM seq"
)
# One unfinished attempt per ten stored (ten per family), started up to two hours ago.
UNFINISHED = "dag_id, task_id, run_id, map_index, try_number, task_family, started_at"
POSTGRES_UNFINISHED = text(
    f"INSERT INTO adaptive_unfinished_attempt ({UNFINISHED}) "
    "SELECT 'dag', 'f' || (g % :families), 'u' || g, -1, 1, 'f' || (g % :families), "
    "now() - (g % 7200) * interval '1 second' FROM generate_series(1, :n) AS g"
)
SQLITE_UNFINISHED = text(
    f"INSERT INTO adaptive_unfinished_attempt ({UNFINISHED}) "
    "WITH RECURSIVE seq(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < :n) "
    "SELECT 'dag', 'f' || (g % :families), 'u' || g, -1, 1, 'f' || (g % :families), "
    "strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (g % 7200) || ' seconds') FROM seq"
)
T0 = datetime(2027, 1, 1, tzinfo=timezone.utc)
USER = MemoryRequest(8 * GIB, 8 * GIB)


def settings(spool: str) -> AdaptiveSettings:
    return AdaptiveSettings(
        history_conn_id="unused",
        store_timeout_seconds=5.0,
        history_window=500,
        retention_attempts=5000,
        retention_days=0.0,
        mode=Mode.OFF,
        placement_live_load=False,
        lff_failures="persevere",
        priority_classes=True,
        metrics_sample_interval_seconds=10.0,
        spool_dir=spool,
        sizing=SizingSettings(),
    )


def attempt(family: str, n: int, *, oom: bool = False) -> Observation:
    return Observation(
        TaskKey("bench", family, f"new{n}", -1, 1),
        family,
        Usage(None if oom else (1 + n % 40) * 10**8, 120.0, 60.0, 10**6, 10**6, PeakKind.MEASURED),
        ExitReason.OOM_KILLED if oom else ExitReason.COMPLETED,
        0,
        8 * GIB,
        2 * GIB if oom else 8 * GIB,
        finished_at=T0 + timedelta(seconds=n),
        node_name=f"node-{n % 3}{n % 5}",
    )


def cluster() -> list[NodeProfile]:
    profiles = []
    for g, (cpu, mem) in enumerate([(370, 13800), (460, 17500), (524, 19850)]):
        for i in range(5):
            bench = {"cpu_events_per_s": cpu + i, "memory_mib_per_s": mem + 10 * i, "io_seq_read_iops": 480.0}
            profiles.append(NodeProfile(f"node-{g}{i}", bench, 8, 32 * GIB))
    return profiles


def fill(engine: Engine, attempts: int) -> SqlHistoryStore:
    metadata.drop_all(engine)
    metadata.create_all(engine)
    postgres = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        conn.execute(
            POSTGRES_FILL if postgres else SQLITE_FILL, {"n": attempts, "families": attempts // PER_FAMILY}
        )
        notes = {"n": attempts // 10, "families": attempts // PER_FAMILY}
        conn.execute(POSTGRES_UNFINISHED if postgres else SQLITE_UNFINISHED, notes)
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
    store = SqlHistoryStore(engine, Learning(), timeout_seconds=5.0)
    store.rebuild(fit_models=False)
    profiles = cluster()
    store.save_nodes(profiles, group_nodes(profiles))
    return store


def timed(calls: list[Callable[[], object]]) -> list[float]:
    millis = []
    for call in calls:
        start = time.perf_counter()
        call()
        millis.append((time.perf_counter() - start) * 1000.0)
    return millis


def measure(store: SqlHistoryStore, attempts: int, calls: int, spool: str) -> dict[str, list[float]]:
    config = settings(spool)
    families = attempts // PER_FAMILY
    warm = [f"f{i * (families // 100)}" for i in range(100)]
    for n, family in enumerate(warm):  # fits and stores each warm family's model, untimed
        store.record([attempt(family, n)])
        store.record([attempt(family, 10**6 + n, oom=True)])

    def advisor() -> Advisor:
        return Advisor(config, lambda: store)

    picks = [warm[i % len(warm)] for i in range(calls)]
    killed = {f: TaskKey("bench", f, f"new{10**6 + n}", -1, 2) for n, f in enumerate(warm)}
    records = [attempt(warm[i % len(warm)], 1000 + i) for i in range(5 * len(warm))]

    def decide(family: str, retry_of: TaskKey | None = None) -> Callable[[], object]:
        return lambda: advisor().memory.decide(family, USER, retry_of)

    def place(family: str) -> Callable[[], object]:
        return lambda: advisor().placement.place(family, frozenset(), GIB)

    return {
        "decide (warm family)": timed([decide(f) for f in picks]),
        "decide (cold family)": timed([decide(f"cold{i}") for i in range(calls)]),
        "decide (retry after OOM)": timed([decide(f, killed[f]) for f in picks]),
        "place": timed([place(f) for f in picks]),
        "record": timed([partial(store.record, [o]) for o in records]),
    }


def check_decisions_adaptive(store: SqlHistoryStore, spool: str) -> None:
    decision = Advisor(settings(spool), lambda: store).memory.decide("f0", USER)
    assert decision.adaptive and "refitted" not in decision.explanation, decision.explanation


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--backends", default="postgres,sqlite")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--postgres-url", default="postgresql+psycopg2://postgres@127.0.0.1:5432/")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    console = Console(width=140)
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            engine = make_engine(backend, args.postgres_url, Path(tmp))
            results: dict[int, dict[str, list[float]]] = {}
            for size in sizes:
                started = time.perf_counter()
                store = fill(engine, size)
                built = time.perf_counter() - started
                results[size] = measure(store, size, args.calls, str(Path(tmp) / "spool"))
                check_decisions_adaptive(store, str(Path(tmp) / "spool"))
                console.print(f"{backend}: {size:,} attempts built in {built:.1f} s, measured")
            console.print(report(backend, sizes, results))
            engine.dispose()


def make_engine(backend: str, postgres_url: str, tmp: Path) -> Engine:
    if backend == "sqlite":
        return create_engine(f"sqlite:///{tmp}/bench.db", connect_args={"timeout": 30})
    admin = create_engine(postgres_url + "postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if not conn.execute(text("select 1 from pg_database where datname = 'adaptive_bench'")).scalar():
            conn.execute(text("CREATE DATABASE adaptive_bench"))
    admin.dispose()
    return create_engine(postgres_url + "adaptive_bench")


def report(backend: str, sizes: list[int], results: dict[int, dict[str, list[float]]]) -> Table:
    table = Table(title=f"{backend}: milliseconds per call (p50 / p99)")
    table.add_column("operation")
    for size in sizes:
        table.add_column(f"{size:,}", justify="right")
    table.add_column(f"p99 {sizes[-1]:,} / {sizes[0]:,}", justify="right")
    for operation in results[sizes[0]]:
        cells = []
        for size in sizes:
            values = results[size][operation]
            cells.append(f"{statistics.median(values):.2f} / {np.percentile(values, 99):.2f}")
        first, last = (np.percentile(results[s][operation], 99) for s in (sizes[0], sizes[-1]))
        table.add_row(operation, *cells, f"{last / first:.2f}")
    return table


if __name__ == "__main__":
    main()
