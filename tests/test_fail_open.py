"""The adaptive machinery never stops a pod: no connection, database down, bad config, blocked ORM."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import models as k8s

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.model import GIB, MemoryRequest
from airflow_adaptive.exceptions import InvalidQuantityError
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
from airflow_adaptive.store import access
from airflow_adaptive.store.access import open_repository
from airflow_adaptive.store.repository import HistoryRepository
from airflow_adaptive.store.spool import Spool
from tests.conftest import DB_URL
from tests.test_store import attempt

USER = MemoryRequest(2 * GIB, 2 * GIB)


def unreachable() -> HistoryRepository:
    # A port where nothing listens: a real connection error, quickly.
    return HistoryRepository(access.engine_for_url("postgresql+psycopg2://nobody@127.0.0.1:9/none", 1.0))


def test_database_down_keeps_the_users_request_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    access._warned.clear()
    advisor = Advisor(get_settings(), unreachable)
    with caplog.at_level(logging.WARNING):
        first = advisor.decide("f", USER)
        second = advisor.decide("f", USER)
    for decision in (first, second):
        assert (decision.memory_request_bytes, decision.adaptive, decision.strategy) == (
            2 * GIB,
            False,
            "user",
        )
        assert "history store unavailable" in decision.explanation
    assert sum("history store unavailable" in r.getMessage() for r in caplog.records) == 1


def test_missing_connection_without_orm_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(access, "airflow_engine", lambda: None)
    with pytest.raises(access.HistoryUnavailableError, match="adaptive_history_default"):
        open_repository("adaptive_history_default", 1.0)
    decision = Advisor(get_settings()).decide("f", USER)
    assert decision.memory_request_bytes == 2 * GIB and not decision.adaptive


def test_connection_url_from_an_airflow_connection(monkeypatch: pytest.MonkeyPatch, engine: Any) -> None:
    """Task processes reach the store through the connection: here, the session's own database."""
    monkeypatch.setattr(access, "airflow_engine", lambda: None)
    monkeypatch.setenv(
        "AIRFLOW_CONN_ADAPTIVE_HISTORY_DEFAULT",
        json.dumps({"conn_type": "generic", "extra": {"sqlalchemy_url": DB_URL}}),
    )
    HistoryRepository(engine).record([attempt(n, peak=GIB) for n in range(3)])
    repo = open_repository("adaptive_history_default", 2.0)
    assert len(repo.history("f")) == 3


def test_connection_parts_become_a_sqlalchemy_url() -> None:
    from airflow.models.connection import Connection

    conn = Connection(
        conn_id="h",
        conn_type="postgres",
        host="db",
        login="adaptive",
        password="s3cr%t",
        port=5432,
        schema="airflow",
    )
    url = access.connection_url(conn)
    assert (url.drivername, url.host, url.username, url.password, url.database) == (
        "postgresql",
        "db",
        "adaptive",
        "s3cr%t",
        "airflow",
    )
    with pytest.raises(access.HistoryUnavailableError, match="http"):
        access.connection_url(Connection(conn_id="x", conn_type="http", host="h"))


def test_unrecorded_attempts_are_spooled_and_written_later(engine: Any) -> None:
    settings = get_settings()
    Spool(settings.spool_dir).folder.mkdir(parents=True, exist_ok=True)
    for leftover in Spool(settings.spool_dir).folder.glob("*.json"):
        leftover.unlink()
    assert Advisor(settings, unreachable).record(attempt(1)) is False
    assert len(Spool(settings.spool_dir).pending()) == 1
    assert Advisor(settings, lambda: HistoryRepository(engine)).record(attempt(2)) is True
    assert Spool(settings.spool_dir).pending() == []
    assert sorted(o.key.run_id for o in HistoryRepository(engine).history("f")) == ["run1", "run2"]


def test_unknown_strategy_in_config_fails_open(monkeypatch: pytest.MonkeyPatch, engine: Any) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__STRATEGY", "no-such-strategy")
    get_settings.cache_clear()
    HistoryRepository(engine).record([attempt(n, peak=GIB) for n in range(5)])
    decision = Advisor(get_settings()).decide("f", USER)
    assert decision.memory_request_bytes == 2 * GIB and "no-such-strategy" in decision.explanation


@pytest.mark.parametrize("bad", ["1.5GB-nonsense", "0", "-1Gi", "lots"])
def test_bad_quantity_is_a_clear_error_when_the_dag_is_parsed(bad: str) -> None:
    with pytest.raises(InvalidQuantityError, match="container_resources memory"):
        AdaptiveKubernetesPodOperator(
            task_id="t", image="busybox",
            container_resources=k8s.V1ResourceRequirements(requests={"memory": bad}),
        )  # fmt: skip


def test_blocked_orm_and_no_connection_still_builds_the_users_pod(tmp_path: Path) -> None:
    """In a real task process Airflow blocks the ORM; with no connection the pod keeps its resources."""
    script = textwrap.dedent(
        """
        from airflow.sdk.execution_time.supervisor import block_orm_access
        block_orm_access()
        from kubernetes.client import models as k8s
        from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
        op = AdaptiveKubernetesPodOperator(task_id="t", image="busybox", cmds=["true"],
            container_resources=k8s.V1ResourceRequirements(requests={"memory": "3Gi"}, limits={"memory": "3Gi"}))
        pod = op.build_pod_request_obj(None, dry_run=True)
        print("LIMIT", pod.spec.containers[0].resources.limits["memory"])
        print("WHY", pod.metadata.annotations["adaptive.airflow.io/decision"])
        """
    )
    env = dict(os.environ)
    env.pop("AIRFLOW_CONN_ADAPTIVE_HISTORY_DEFAULT", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "LIMIT 3Gi" in output  # the user's own quantity, untouched
    assert "WHY history store unavailable" in output
    assert output.count("airflow-adaptive: history store unavailable") == 1
    assert "isn't defined" in output  # the log says why


@pytest.mark.skipif(not DB_URL.startswith("postgresql"), reason="roles need PostgreSQL")
def test_least_privilege_role_from_the_readme_can_record_and_read(engine: Any) -> None:
    """The README's grants are enough for task processes, and nothing more is needed."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    with engine.begin() as conn:
        if conn.execute(text("select 1 from pg_roles where rolname = 'airflow_adaptive_test'")).scalar():
            conn.execute(text("DROP OWNED BY airflow_adaptive_test"))  # left over by an interrupted run
            conn.execute(text("DROP ROLE airflow_adaptive_test"))
        conn.execute(text("CREATE ROLE airflow_adaptive_test LOGIN"))
        database = make_url(DB_URL).database
        conn.execute(text(f'GRANT CONNECT ON DATABASE "{database}" TO airflow_adaptive_test'))
        conn.execute(text("GRANT USAGE ON SCHEMA public TO airflow_adaptive_test"))
        conn.execute(text("GRANT SELECT, INSERT, UPDATE ON adaptive_task_attempt TO airflow_adaptive_test"))
        conn.execute(text("GRANT USAGE ON SEQUENCE adaptive_task_attempt_id_seq TO airflow_adaptive_test"))
    url = make_url(DB_URL).set(username="airflow_adaptive_test", password=None)
    repo = HistoryRepository(access.engine_for_url(url, 3.0))
    repo.record([attempt(n, peak=GIB) for n in range(3)])
    repo.record([attempt(0, peak=2 * GIB)])  # the upsert path needs UPDATE
    assert [o.usage.peak_memory_bytes for o in repo.history("f")] == [2 * GIB, GIB, GIB]
    repo.engine.dispose()
    with engine.begin() as conn:
        conn.execute(text("DROP OWNED BY airflow_adaptive_test"))
        conn.execute(text("DROP ROLE airflow_adaptive_test"))
