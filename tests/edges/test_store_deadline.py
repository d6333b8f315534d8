"""Every way into the store is bounded: a database that accepts and never answers, or a held lock,
costs a pod (or a command) one store timeout, never a hang."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kubernetes.client import models as k8s
from sqlalchemy import Engine, create_engine, event, text

from airflow_adaptive.config import get_settings
from airflow_adaptive.core.units import GIB
from airflow_adaptive.exceptions import HistoryUnavailableError
from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator
from airflow_adaptive.store import access
from airflow_adaptive.store.access import open_store
from tests.conftest import sql_store
from tests.factories import attempt

HANG_S = 20  # far above any one store timeout, far below a driver's hang without one


@pytest.fixture
def silent_server() -> Any:
    """A TCP server that accepts connections and never answers (a hung database)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[Any] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], held
    server.close()
    for conn in held:
        conn.close()


def _timed_pods(count: int) -> list[tuple[float, Any]]:
    import time

    out = []
    for n in range(count):
        op = AdaptiveKubernetesPodOperator(
            task_id=f"t{n}", image="busybox", cmds=["true"], task_family="f",
            container_resources=k8s.V1ResourceRequirements(requests={"memory": "3Gi"}, limits={"memory": "3Gi"}),
        )  # fmt: skip
        started = time.monotonic()
        pod = op.build_pod_request_obj(None, dry_run=True)
        out.append((time.monotonic() - started, pod))
    return out


def test_a_store_that_never_answers_costs_a_pod_one_timeout(
    monkeypatch: pytest.MonkeyPatch, silent_server: tuple[int, list[Any]]
) -> None:
    """Task processes (connection path): each pod waits at most one store timeout, then keeps its request."""
    monkeypatch.setattr(access, "airflow_engine", lambda: None)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__STORE_TIMEOUT_SECONDS", "1")
    (port, accepted) = silent_server
    url = f"postgresql+psycopg2://nobody@127.0.0.1:{port}/none"
    monkeypatch.setenv(
        "AIRFLOW_CONN_ADAPTIVE_HISTORY_DEFAULT",
        json.dumps({"conn_type": "generic", "extra": {"sqlalchemy_url": url}}),
    )
    get_settings.cache_clear()
    for _, pod in _timed_pods(1):  # the first pod of a process also pays for imports
        assert pod.spec.containers[0].resources.limits["memory"] == "3Gi"
    before = len(accepted)
    timed = _timed_pods(2)
    # One connection per pod (decide, place and the previous try share it), so one timeout each;
    # the clock only guards against a hang (a busy machine must not fail this).
    assert len(accepted) - before <= 2, len(accepted)
    for seconds, pod in timed:
        assert seconds < 1 + HANG_S, seconds
        assert pod.spec.containers[0].resources.limits["memory"] == "3Gi"
        assert "history store unavailable" in pod.metadata.annotations["adaptive.airflow.io/decision"]


def test_a_held_lock_costs_a_pod_at_most_one_timeout(engine: Any) -> None:
    """Where Airflow has an engine (scheduler, api-server, CLI): a lock held on the family table by
    another transaction delays a pod by at most one store timeout (3 s in the tests)."""
    sql_store(engine).record([attempt(n, peak=GIB) for n in range(3)])
    _timed_pods(1)  # imports and the first connection
    with engine.connect() as other:
        if engine.dialect.name == "postgresql":
            other.execute(text("begin; lock table adaptive_family in access exclusive mode"))
        else:
            other.exec_driver_sql("begin exclusive")
        errors: list[BaseException] = []

        def count(context: Any) -> None:
            errors.append(context.original_exception)

        event.listen(Engine, "handle_error", count)  # every engine: the store has its own
        try:
            ((seconds, pod),) = _timed_pods(1)
        finally:
            event.remove(Engine, "handle_error", count)
            other.rollback()
    # One wait for the lock (PostgreSQL; SQLite readers are not blocked), then the pod goes on.
    assert len(errors) == (engine.dialect.name == "postgresql"), errors
    assert seconds < 3 + HANG_S, seconds  # a hang guard, not a speed claim
    decision = pod.metadata.annotations["adaptive.airflow.io/decision"]
    if engine.dialect.name == "postgresql":  # the read waited for the lock, then gave up
        assert pod.spec.containers[0].resources.limits["memory"] == "3Gi"
        assert "history store unavailable" in decision
    else:  # SQLite readers are not blocked by a writer here: sized from history, at once
        assert "history store unavailable" not in decision


def _within_deadline(call: Any) -> Any:
    """Runs call in a thread: its result or error, or a failure if it is still running (a hang)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as err:  # handed back to the test
            out.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert not thread.is_alive(), "hung past any store timeout"
    return out[0]


def test_airflows_own_database_never_answering_is_unavailable_not_a_hang(
    monkeypatch: pytest.MonkeyPatch, silent_server: tuple[int, list[Any]]
) -> None:
    """No history connection set: the CLI, the scheduler and the api-server use Airflow's database,
    whose engine has no connect timeout; the store's own engine on it has."""
    (port, accepted) = silent_server
    airflows = create_engine(f"postgresql+psycopg2://nobody@127.0.0.1:{port}/airflow")  # as Airflow makes it
    monkeypatch.setattr(access, "airflow_engine", lambda: airflows)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__STORE_TIMEOUT_SECONDS", "1")
    get_settings.cache_clear()
    err = _within_deadline(lambda: open_store(get_settings()).family("genomics.align"))
    assert isinstance(err, HistoryUnavailableError) and "timeout" in str(err)
    assert len(accepted) == 1
    ((_, pod),) = _within_deadline(lambda: _timed_pods(1))
    assert pod.spec.containers[0].resources.limits["memory"] == "3Gi"


def test_decide_waits_for_a_silent_database_once(
    monkeypatch: pytest.MonkeyPatch, silent_server: tuple[int, list[Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """The command checks the family is known before it decides: one wait for the store, not two,
    then one line saying the store is unavailable (what a pod gets meanwhile), as every command."""
    from airflow_adaptive.cli import main

    (port, accepted) = silent_server
    airflows = create_engine(f"postgresql+psycopg2://nobody@127.0.0.1:{port}/airflow")
    monkeypatch.setattr(access, "airflow_engine", lambda: airflows)
    monkeypatch.setenv("AIRFLOW__ADAPTIVE__STORE_TIMEOUT_SECONDS", "1")
    get_settings.cache_clear()
    assert _within_deadline(lambda: main(["decide", "--task-family", "genomics.align", "--json"])) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("airflow-adaptive: error: history store unavailable")
    assert line.endswith("a pod keeps the user's request meanwhile")
    assert len(accepted) == 1
