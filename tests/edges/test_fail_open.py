"""The adaptive machinery never stops a pod: no connection, database down, bad config, blocked ORM."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import models as k8s

from airflow_adaptive.advisor import Advisor
from airflow_adaptive.config import get_settings
from airflow_adaptive.core.grouping import NodeProfile, group_nodes
from airflow_adaptive.core.locality import InputUse
from airflow_adaptive.core.model import MemoryRequest
from airflow_adaptive.core.units import GIB
from airflow_adaptive.exceptions import HistoryRejectedError, HistoryUnavailableError, InvalidQuantityError
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
from airflow_adaptive.store import access
from airflow_adaptive.store.access import open_store
from airflow_adaptive.store.spool import Spool
from airflow_adaptive.store.sql import SqlHistoryStore
from tests.conftest import DB_URL, sql_store
from tests.factories import T0, attempt
from tests.memory_store import InMemoryHistoryStore

USER = MemoryRequest(2 * GIB, 2 * GIB)


def down_store() -> InMemoryHistoryStore:
    store = InMemoryHistoryStore()
    store.faults.down = True
    return store


def unreachable() -> SqlHistoryStore:
    # A port where nothing listens: a real connection error, quickly.
    return SqlHistoryStore(access.engine_for_url("postgresql+psycopg2://nobody@127.0.0.1:9/none", 1.0))


@pytest.mark.parametrize("factory", [down_store, unreachable], ids=["in-memory down", "sql unreachable"])
def test_store_down_keeps_the_users_request_and_warns_once(
    factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = factory()
    with caplog.at_level(logging.WARNING):
        first = Advisor(get_settings(), lambda: store).memory.decide("f", USER)
        second = Advisor(get_settings(), lambda: store).memory.decide("f", USER)
    for decision in (first, second):
        assert (decision.memory_request_bytes, decision.adaptive, decision.strategy) == (
            2 * GIB,
            False,
            "user",
        )
        assert "history store unavailable" in decision.explanation
    assert sum("history store unavailable" in r.getMessage() for r in caplog.records) == 1


def test_an_unavailable_store_is_asked_once_per_pod() -> None:
    """decide, then place, then the previous try: one wait for a store that does not answer."""
    store = down_store()
    advisor = Advisor(get_settings(), lambda: store)
    advisor.memory.decide("f", USER)
    placement = advisor.placement.place("f", frozenset(), 2 * GIB)
    assert advisor.memory.previous_try(attempt(1, try_number=2).key) is None
    assert store.calls == 1
    assert "node groups unavailable" in placement.explain()


def test_a_slow_store_still_answers() -> None:
    store = InMemoryHistoryStore()
    store.record([attempt(n, peak=GIB) for n in range(5)])
    store.faults.slow_seconds = 0.05
    decision = Advisor(get_settings(), lambda: store).memory.decide("f", USER)
    assert decision.adaptive and decision.memory_request_bytes is not None
    assert decision.memory_request_bytes < 2 * GIB


def test_a_corrupt_stored_model_is_refitted_and_says_so() -> None:
    store = InMemoryHistoryStore()
    store.record([attempt(n, peak=GIB) for n in range(5)])
    healthy = Advisor(get_settings(), lambda: store).memory.decide("f", USER)
    store.faults.corrupt_models = True
    refitted = Advisor(get_settings(), lambda: store).memory.decide("f", USER)
    assert refitted.memory_request_bytes == healthy.memory_request_bytes
    assert "refitted now: stored model unreadable" in refitted.explanation
    assert "refitted" not in healthy.explanation


def test_a_failing_predictor_fails_open(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_adaptive.advice import memory_advice as memory_advice

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OverflowError("cannot convert float infinity to integer")

    store = InMemoryHistoryStore()
    store.record([attempt(n, peak=GIB) for n in range(5)])
    monkeypatch.setattr(memory_advice, "decide_with", broken)
    decision = Advisor(get_settings(), lambda: store).memory.decide("f", USER)
    assert (
        decision.memory_request_bytes == 2 * GIB and "decision failed (OverflowError)" in decision.explanation
    )


def test_missing_connection_without_orm_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(access, "airflow_engine", lambda: None)
    with pytest.raises(HistoryUnavailableError, match="adaptive_history_default"):
        open_store(get_settings())
    decision = Advisor(get_settings()).memory.decide("f", USER)
    assert decision.memory_request_bytes == 2 * GIB and not decision.adaptive


def test_connection_url_from_an_airflow_connection(monkeypatch: pytest.MonkeyPatch, engine: Any) -> None:
    """Task processes reach the store through the connection: here, the session's own database."""
    monkeypatch.setattr(access, "airflow_engine", lambda: None)
    monkeypatch.setenv(
        "AIRFLOW_CONN_ADAPTIVE_HISTORY_DEFAULT",
        json.dumps({"conn_type": "generic", "extra": {"sqlalchemy_url": DB_URL}}),
    )
    sql_store(engine).record([attempt(n, peak=GIB) for n in range(3)])
    assert len(open_store(get_settings()).history("f")) == 3


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
    with pytest.raises(HistoryUnavailableError, match="http"):
        access.connection_url(Connection(conn_id="x", conn_type="http", host="h"))


def _empty_spool() -> Spool:
    spool = Spool(get_settings().spool_dir)
    spool.folder.mkdir(parents=True, exist_ok=True)
    for leftover in spool.folder.rglob("*.*"):
        leftover.unlink()
    return spool


@pytest.mark.parametrize("kind", ["in-memory", "sql"])
def test_unrecorded_attempts_are_spooled_and_written_later(kind: str, engine: Any) -> None:
    spool = _empty_spool()
    store = InMemoryHistoryStore() if kind == "in-memory" else sql_store(engine)
    assert Advisor(get_settings(), down_store).recording.record(attempt(1)) is False
    assert (
        Advisor(get_settings(), down_store).recording.record(attempt(1)) is False
    )  # spooled twice: same key
    assert len(spool.pending()) == 2
    assert Advisor(get_settings(), lambda: store).recording.record(attempt(2)) is True
    assert spool.pending() == []
    assert sorted(o.key.run_id for o in store.history("f")) == ["run1", "run2"]
    assert store.family("f").rollup.attempts == 2  # type: ignore[union-attr]


def test_a_poison_attempt_is_quarantined_and_the_rest_drain(engine: Any) -> None:
    """An attempt the database refuses for good never blocks the spooled ones behind it."""
    spool = _empty_spool()
    poison = attempt(1, try_number=2**70)  # part of the key, beyond any integer column: refused
    Advisor(get_settings(), down_store).recording.record(poison)
    Advisor(get_settings(), down_store).recording.record(attempt(2))
    store = sql_store(engine)
    assert Advisor(get_settings(), lambda: store).recording.record(attempt(3)) is True
    assert sorted(o.key.run_id for o in store.history("f")) == ["run2", "run3"]
    assert spool.pending() == [] and spool.quarantined() == 1
    reason = next((spool.folder / "quarantine").glob("*.reason")).read_text()
    assert "refused" in reason


def test_a_spool_that_cannot_be_written_or_read_never_stops_recording(
    engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A spool_dir that is a file, and a spool holding a folder named like an attempt: the attempt
    is said lost or left in place, and recording goes on."""
    store = sql_store(engine)
    blocked = tmp_path / "spool-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__SPOOL_DIR", str(blocked))
    get_settings.cache_clear()
    poison = attempt(1, try_number=2**70)  # refused by the database: quarantined in the spool
    with caplog.at_level(logging.WARNING):
        assert Advisor(get_settings(), lambda: store).recording.record(poison) is False
    assert any("rejected, lost (spool:" in r.getMessage() for r in caplog.records)
    spool = tmp_path / "spool"
    (spool / "x.json").mkdir(parents=True)  # unreadable as an attempt
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__SPOOL_DIR", str(spool))
    get_settings.cache_clear()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert Advisor(get_settings(), lambda: store).recording.record(attempt(2)) is True
    assert [o.key.run_id for o in store.history("f")] == ["run2"] and (spool / "x.json").is_dir()
    assert any("unreadable spooled attempt" in r.getMessage() for r in caplog.records)
    # a rejected attempt whose values JSON cannot hold either: said lost, not raised
    odd = replace(attempt(3), input_size_bytes=Decimal(5))  # type: ignore[arg-type]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert Advisor(get_settings(), down_store).recording.record(odd) is False  # spooled: cannot be
        assert Advisor(get_settings(), rejecting_store).recording.record(odd) is False
    assert any("rejected, lost (spool: Object of type Decimal" in r.getMessage() for r in caplog.records)


def rejecting_store() -> InMemoryHistoryStore:
    class Rejecting(InMemoryHistoryStore):
        def record(self, observations: Any) -> Any:
            raise HistoryRejectedError("the history store refused the data: bad value")

    return Rejecting()


def test_what_no_option_reads_is_said_once_with_what_was_meant(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A typo in an option's name would leave its default (mode: off) in force without a word."""
    from airflow.configuration import conf

    monkeypatch.setenv("AIRFLOW__ADAPTIVE__MODES", "enforce")
    monkeypatch.setenv("AIRFLOW__adaptive__MODE", "enforce")  # Airflow reads only the upper-case name
    monkeypatch.setenv(
        "AIRFLOW__ADAPTIVE__MODE_CMD", "echo enforce"
    )  # Airflow runs _CMD for sensitive options only
    conf.set("adaptive", "famliy_modes", "a.*=observe")
    try:
        get_settings.cache_clear()
        with caplog.at_level(logging.WARNING):
            assert get_settings().mode.value == "off"
            get_settings.cache_clear()
            get_settings()  # read again: said once per process
    finally:
        conf.remove_option("adaptive", "famliy_modes")
    said = sorted(r.getMessage() for r in caplog.records)
    assert said == [
        "airflow-adaptive: AIRFLOW__ADAPTIVE__MODES names no [adaptive] option (did you mean 'mode'?); ignored",
        "airflow-adaptive: AIRFLOW__ADAPTIVE__MODE_CMD names no [adaptive] option (did you mean 'mode'?); ignored",
        "airflow-adaptive: AIRFLOW__adaptive__MODE is not read (Airflow reads AIRFLOW__ADAPTIVE__MODE); ignored",
        "airflow-adaptive: [adaptive] famliy_modes is no option (did you mean 'family_modes'?); ignored",
    ]


def test_unknown_strategy_in_config_fails_open(monkeypatch: pytest.MonkeyPatch, engine: Any) -> None:
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__STRATEGY", "no-such-strategy")
    get_settings.cache_clear()
    store = InMemoryHistoryStore()
    store.record([attempt(n, peak=GIB) for n in range(5)])
    decision = Advisor(get_settings(), lambda: store).memory.decide("f", USER)
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


def readme_grants(database: str, role: str) -> list[str]:
    """The least-privilege role's statements in the README, for the test role and database."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("CREATE ROLE airflow_adaptive LOGIN", 1)[1].split("```", 1)[0]
    statements = [" ".join(part.split()) for part in block.split(";") if "GRANT" in part]
    return [
        g.replace("TO airflow_adaptive", f'TO "{role}"').replace(
            "DATABASE airflow ", f'DATABASE "{database}" '
        )
        for g in statements
    ]


@pytest.fixture
def readme_role(engine: Any) -> Iterator[Any]:
    """An engine logged in as a role with only the README's grants. Roles are the server's, not a
    database's: one per database, so test runs side by side on one server do not share it, dropped
    afterwards even when the test fails."""
    import re

    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    database = make_url(DB_URL).database or ""
    role = "adaptive_test_" + re.sub(r"[^a-z0-9_]", "_", database.lower())

    def drop() -> None:
        with engine.begin() as conn:
            if conn.execute(text("select 1 from pg_roles where rolname = :r"), {"r": role}).scalar():
                conn.execute(text(f'DROP OWNED BY "{role}"'))
                conn.execute(text(f'DROP ROLE "{role}"'))

    drop()  # left over by an interrupted run
    with engine.begin() as conn:
        conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        for grant in readme_grants(database, role):
            conn.execute(text(grant))
    role_engine = access.engine_for_url(make_url(DB_URL).set(username=role, password=None), 3.0)
    try:
        yield role_engine
    finally:
        role_engine.dispose()
        drop()


@pytest.mark.skipif(not DB_URL.startswith("postgresql"), reason="roles need PostgreSQL")
def test_least_privilege_role_from_the_readme_can_record_and_read(readme_role: Any) -> None:
    """The README's grants are enough for task processes, and nothing more is needed."""
    role_engine = readme_role
    repo = SqlHistoryStore(role_engine)
    repo.mark_unfinished(attempt(0).key, "f", T0)
    repo.mark_unfinished(replace(attempt(1).key, try_number=2), "f", T0)
    repo.mark_unfinished(replace(attempt(1).key, try_number=3), "f", T0)  # replaces try 2's note
    repo.record([attempt(n, peak=GIB) for n in range(3)])  # removes run0's note
    repo.record([attempt(0, peak=2 * GIB)])  # the upsert path needs UPDATE
    repo.unmark_unfinished(replace(attempt(1).key, try_number=3))
    assert (
        repo.count_unfinished("f", started_after=T0 - timedelta(days=1), started_before=T0 + timedelta(1))
        == 0
    )
    repo.record_inputs("node-a", [InputUse("s3://b/ref.fa", 10 * GIB, "k1", cached=True)], (), "dag_a")
    repo.record_inputs("node-a", [], ["k1"])  # an eviction deletes
    assert [o.usage.peak_memory_bytes for o in repo.history("f")] == [2 * GIB, GIB, GIB]
    assert repo.family("f").rollup.attempts == 3  # type: ignore[union-attr]
    Advisor(get_settings(), lambda: repo).placement.place("f", frozenset(), GIB)  # reads nodes
    # the profiling DAG's task stores the node groups, replacing the rows there were
    profile = NodeProfile("node-a", {"cpu_events_per_s": 500.0, "memory_mib_per_s": 9000.0}, 8, 32 * GIB)
    repo.save_nodes([profile], group_nodes([profile]))
    repo.save_nodes([replace(profile, node="node-b")], group_nodes([replace(profile, node="node-b")]))
    assert [n.profile.node for n in repo.nodes()] == ["node-b"]
    assert (
        Advisor(get_settings(), lambda: repo).memory.decide("f", MemoryRequest(GIB, GIB)).adaptive
    )  # counts notes
