"""The history store on the session's real database: migrations, upserts, bad rows, parallel writers."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, func, insert, inspect, select

from airflow_adaptive.core.model import ExitReason, TaskKey
from airflow_adaptive.store.db_manager import HEAD_REVISION
from airflow_adaptive.store.sql import SqlHistoryStore
from airflow_adaptive.store.tables import task_attempt
from tests.conftest import DB_KIND, DB_URL, sql_store
from tests.factories import T0, alembic_config, attempt, split_scores


def test_migrations_upgrade_and_downgrade(tmp_path: Path) -> None:
    url = DB_URL if DB_KIND == "postgres" else f"sqlite:///{tmp_path}/m.db"
    config = alembic_config(url)
    engine = create_engine(url)
    try:
        command.downgrade(config, "base")
        assert not inspect(engine).has_table("adaptive_task_attempt")
        command.upgrade(config, "head")
        inspector = inspect(engine)
        assert inspector.has_table("adaptive_task_attempt")
        assert {"task_family", "peak_memory_bytes", "exit_reason", "strategy"} <= {
            c["name"] for c in inspector.get_columns("adaptive_task_attempt")
        }
        assert "idx_adaptive_task_attempt_family_finished" in {
            i["name"] for i in inspector.get_indexes("adaptive_task_attempt")
        }
        with engine.connect() as conn:
            assert (
                conn.exec_driver_sql("select version_num from alembic_version_adaptive").scalar()
                == HEAD_REVISION
            )
    finally:
        command.upgrade(config, "head")
        engine.dispose()


def test_orm_and_migration_schemas_agree(tmp_path: Path) -> None:
    """create_all (fresh install) and the migration chain give the same columns and indexes."""
    from airflow_adaptive.store.tables import metadata

    by_orm = create_engine(f"sqlite:///{tmp_path}/orm.db")
    metadata.create_all(by_orm)
    by_migration = f"sqlite:///{tmp_path}/mig.db"
    command.upgrade(alembic_config(by_migration), "head")
    a, b = inspect(by_orm), inspect(create_engine(by_migration))
    for table in (
        "adaptive_task_attempt",
        "adaptive_node",
        "adaptive_family",
        "adaptive_aggregate",
        "adaptive_family_day",
    ):
        assert [(c["name"], str(c["type"]), c["nullable"]) for c in a.get_columns(table)] == [
            (c["name"], str(c["type"]), c["nullable"]) for c in b.get_columns(table)
        ]
        assert {i["name"] for i in a.get_indexes(table)} == {i["name"] for i in b.get_indexes(table)}


def test_record_is_idempotent_on_the_attempt_key(engine: Any) -> None:
    repo = sql_store(engine)
    repo.record([attempt(1, peak=100)])
    repo.record([attempt(1, peak=150)])  # the same attempt recorded again, e.g. from the spool
    history = repo.history("f")
    assert [o.usage.peak_memory_bytes for o in history] == [150]


def test_history_is_newest_window_oldest_first(engine: Any) -> None:
    repo = sql_store(engine)
    repo.record([attempt(n, peak=n) for n in range(10)] + [attempt(99, family="other")])
    history = repo.history("f", limit=4)
    assert [o.usage.peak_memory_bytes for o in history] == [6, 7, 8, 9]
    assert history[-1].finished_at == T0 + timedelta(minutes=9)
    third = repo.attempt(TaskKey("dag", "task", "run3", -1, 1))
    assert third is not None and third.usage.peak_memory_bytes == 3
    assert repo.attempt(TaskKey("dag", "task", "run3", -1, 2)) is None
    assert [(r.task_family, r.attempts, r.oom_killed) for r in repo.families()] == [
        ("f", 10, 0),
        ("other", 1, 0),
    ]


def test_malformed_rows_are_skipped_not_read_as_zero(engine: Any) -> None:
    repo = sql_store(engine)
    repo.record([attempt(1, peak=100)])
    base = dict(dag_id="dag", task_id="task", map_index=-1, try_number=1, task_family="f", finished_at=T0,
                exit_reason="Completed")  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(task_attempt).values(run_id="neg", peak_memory_bytes=-5, **base))
        conn.execute(
            insert(task_attempt).values(run_id="kind", peak_memory_bytes=5, peak_kind="bogus", **base)
        )
        conn.execute(insert(task_attempt).values(run_id="reason", peak_memory_bytes=7, exit_reason="Weird",
                                                 **{k: v for k, v in base.items() if k != "exit_reason"}))  # fmt: skip
    history = repo.history("f")
    assert sorted(o.key.run_id for o in history) == ["reason", "run1"]
    assert next(o for o in history if o.key.run_id == "reason").exit_reason is ExitReason.UNKNOWN


def test_a_memory_profile_and_rebound_round_trip_and_malformed_ones_read_as_none(engine: Any) -> None:
    from dataclasses import replace

    repo = sql_store(engine)
    profile = (0.0, 0.5, 1.0, 2.0, 2.0, *[3.0] * 44, 9.5)
    repo.record([
        replace(attempt(1, peak=100), memory_profile_s=profile, memory_rebound_bytes=40), attempt(2, peak=100)
    ])  # fmt: skip
    base = dict(dag_id="dag", task_id="task", map_index=-1, try_number=1, task_family="f", finished_at=T0,
                exit_reason="Completed", peak_memory_bytes=5)  # fmt: skip
    with engine.begin() as conn:
        for run, bad in (("short", [1.0, 2.0]), ("falling", [5.0, *[1.0] * 49]), ("text", ["a"] * 50)):
            conn.execute(insert(task_attempt).values(run_id=run, memory_profile=bad, **base))
        conn.execute(insert(task_attempt).values(run_id="negative", memory_rebound_bytes=-1, **base))
    history = repo.history("f")
    by_run = {o.key.run_id: o.memory_profile_s for o in history}
    assert by_run == {
        "run1": profile,
        "run2": None,
        "short": None,
        "falling": None,
        "text": None,
        "negative": None,
    }
    rebounds = {o.key.run_id: o.memory_rebound_bytes for o in history}
    assert rebounds["run1"] == 40 and rebounds["run2"] is None and rebounds["negative"] is None


SHARED_EVERY = 10  # one attempt in ten is a key every writer records (a retried or replayed attempt)
FAMILIES = 8


def _writer(url: str, worker: int, n: int, batch: int) -> None:
    from airflow_adaptive.core.decide import SizingSettings
    from airflow_adaptive.store.learning import Learning

    engine = create_engine(url, connect_args={"timeout": 60} if url.startswith("sqlite") else {})
    store = SqlHistoryStore(engine, Learning(SizingSettings(strategy="pc95")), timeout_seconds=60)
    pending = []
    for i in range(n):
        run = f"shared-{i // SHARED_EVERY}" if i % SHARED_EVERY == 0 else f"w{worker}-{i}"
        pending.append(attempt(i, family=f"fam{i % FAMILIES}", run=run, peak=1000 + worker * n + i))
        if len(pending) == batch:
            store.record(pending)
            pending = []
    if pending:
        store.record(pending)
    engine.dispose()


def test_concurrent_writers_lose_nothing_duplicate_nothing_and_keep_rollups_exact(engine: Any) -> None:
    """PostgreSQL: 16 processes x 1,000 attempts, 10 % of keys written by all. SQLite (one writer at a
    time): 4 x 250, every writer waits its turn instead of failing."""
    workers, n, batch = (16, 1000, 50) if DB_KIND == "postgres" else (4, 250, 5)
    url = DB_URL if DB_KIND == "postgres" else str(engine.url)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(url, w, n, batch)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(600)
        assert p.exitcode == 0
    shared = n // SHARED_EVERY
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(task_attempt)).scalar()
        distinct_shared = conn.execute(
            select(func.count()).select_from(task_attempt).where(task_attempt.c.run_id.like("shared-%"))
        ).scalar()
    assert total == workers * (n - shared) + shared  # 0 lost, 0 duplicated
    assert distinct_shared == shared
    store = sql_store(engine)
    live = {r.task_family: r for r in store.families()}
    distributions, _ = split_scores(store)
    assert sum(r.attempts for r in live.values()) == total
    store.rebuild()
    for rebuilt in store.families():
        before = live[rebuilt.task_family]
        for field in ("attempts", "completed", "usable_samples", "peak_memory_n", "cpu_cores_n"):
            assert getattr(before, field) == getattr(rebuilt, field)
        assert before.peak_memory_sum == pytest.approx(rebuilt.peak_memory_sum, rel=1e-12)
    assert split_scores(store)[0] == distributions


def test_airflow_db_migrate_and_reset_manage_our_tables(tmp_path: Path) -> None:
    """The real CLI: ``airflow db migrate`` creates our tables, ``db reset -y`` drops and recreates them."""
    import os

    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path))
    url = DB_URL if DB_KIND == "postgres" else f"sqlite:///{tmp_path}/cli.db"
    env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = url
    airflow = [sys.executable, "-m", "airflow"]
    subprocess.run([*airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(insert(task_attempt).values(dag_id="d", task_id="t", run_id="r", try_number=1, task_family="f",
                                                 finished_at=T0, exit_reason="Completed"))  # fmt: skip
    subprocess.run([*airflow, "db", "reset", "-y"], env=env, check=True, capture_output=True, timeout=300)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(task_attempt)).scalar() == 0
        assert (
            conn.exec_driver_sql("select version_num from alembic_version_adaptive").scalar() == HEAD_REVISION
        )
    check = subprocess.run(
        [*airflow, "db", "check-migrations", "-t", "5"], env=env, capture_output=True, timeout=300
    )
    assert check.returncode == 0, check.stderr
    engine.dispose()
