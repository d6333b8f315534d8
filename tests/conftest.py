"""Test session: a private AIRFLOW_HOME and a real metadata database (SQLite, or PostgreSQL).

``ADAPTIVE_TEST_DB=postgres`` runs everything against the PostgreSQL server
(``ADAPTIVE_TEST_POSTGRES_URL``, default the local ``test`` database).
Configuration must be in the environment before Airflow is imported.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_HOME = Path(tempfile.mkdtemp(prefix="adaptive-test-home-"))
(_HOME / "dags").mkdir()
DB_KIND = os.environ.get("ADAPTIVE_TEST_DB", "sqlite")
POSTGRES_URL = os.environ.get(
    "ADAPTIVE_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
)
DB_URL = POSTGRES_URL if DB_KIND == "postgres" else f"sqlite:///{_HOME}/airflow.db"
os.environ.update(
    {
        "AIRFLOW_HOME": str(_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(_HOME / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": DB_URL,
        "AIRFLOW__ADAPTIVE__SPOOL_DIR": str(_HOME / "spool"),
        "AIRFLOW__ADAPTIVE__STORE_TIMEOUT_SECONDS": "3",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": "http://127.0.0.1:1/execution/",
    }
)

import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from kubernetes.client import ApiClient  # noqa: E402

# Property tests draw the same examples on every run, so a suite that passed here passes in CI;
# HYPOTHESIS_PROFILE=explore draws new ones to look for failures.
hypothesis_settings.register_profile("repeatable", derandomize=True)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# Synthetic traces shipped with the docs, one per format (written by docs/examples/make_traces.py).
EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


# Pure policy and research code (``core/``, the simulator, trace readers, the node benchmarks) reads
# no database: on PostgreSQL only those of its tests that ask for one (``engine``, ``store``, the
# ``database`` mark) run; the SQLite pass checks that the others execute no SQL.
_TESTS = Path(__file__).resolve().parent
_PURE_DIRS = frozenset({"core", "simulation", "traces", "nodebench", "agent", "evaluation"})
_DATABASE_FIXTURES = frozenset({"engine", "store"})


def pytest_report_header() -> str:
    return f"airflow-adaptive tests on {DB_KIND}: {DB_URL.split('@')[-1]}"


def uses_database(item: pytest.Item) -> bool:
    """Whether the test runs on PostgreSQL too: outside the pure folders, or asking for a database."""
    parts = Path(str(item.path)).resolve().relative_to(_TESTS).parts
    fixtures = set(getattr(item, "fixturenames", ()))
    marked = item.get_closest_marker("database") is not None
    return len(parts) < 2 or parts[0] not in _PURE_DIRS or marked or bool(_DATABASE_FIXTURES & fixtures)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if DB_KIND != "postgres":
        return
    kept: list[pytest.Item] = []
    pure: list[pytest.Item] = []
    for item in items:
        (kept if uses_database(item) else pure).append(item)
    if pure:
        config.hook.pytest_deselected(items=pure)
        items[:] = kept


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    return _HOME


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> Iterator[str]:
    """Airflow's tables and ours, created once per session through Airflow's own reset."""
    from airflow.utils.db import resetdb

    resetdb(skip_init=False)
    yield DB_URL


@pytest.fixture
def engine(airflow_db: str) -> Any:
    from airflow import settings

    return settings.engine


def empty_history_tables() -> None:
    """Delete every row of the provider's tables."""
    from airflow import settings
    from sqlalchemy import delete

    from airflow_adaptive.store.tables import (
        aggregate,
        cached_input,
        family,
        family_day,
        node,
        shared_input,
        task_attempt,
        unfinished_attempt,
    )

    assert settings.engine is not None and settings.Session is not None  # Airflow is initialised
    with settings.engine.begin() as conn:
        tables = (
            task_attempt,
            node,
            family,
            aggregate,
            family_day,
            shared_input,
            cached_input,
            unfinished_attempt,
        )
        for table in tables:
            conn.execute(delete(table))


@pytest.fixture(autouse=True)
def clean_history(airflow_db: str) -> Iterator[None]:
    """Every test starts with empty history and node tables, fresh settings and empty caches."""
    from airflow import settings

    from airflow_adaptive import weight_rule
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.failopen import forget_warnings
    from airflow_adaptive.kubernetes import priority_classes

    assert settings.Session is not None  # Airflow is initialised
    empty_history_tables()
    forget_warnings()
    get_settings.cache_clear()
    weight_rule.forget()  # per-process caches of family progress and of the cluster's PriorityClasses
    priority_classes.forget()
    yield
    get_settings.cache_clear()
    # dag.test() leaves Airflow's scoped session inside a transaction; on PostgreSQL its locks
    # would block later DDL (``airflow db reset`` in a subprocess).
    settings.Session.remove()


@pytest.fixture(autouse=True)
def pure_tests_run_no_sql(clean_history: None, request: pytest.FixtureRequest) -> Iterator[None]:
    """A test the PostgreSQL pass leaves out (``uses_database``) must execute no SQL."""
    if uses_database(request.node):
        yield
        return
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        yield
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert not statements, f"executed SQL: mark it pytest.mark.database: {statements[0][:80]}"


def sql_store(engine: Any) -> Any:
    """The SQL history store on the test database, learning with the configured settings."""
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.store.learning import Learning
    from airflow_adaptive.store.sql import SqlHistoryStore

    settings = get_settings()
    return SqlHistoryStore(engine, Learning(settings.sizing, settings.history_window), timeout_seconds=3.0)


@pytest.fixture(params=["in-memory", "sql"])
def store(request: pytest.FixtureRequest, engine: Any) -> Any:
    """Each history store behind the one interface: in memory, and SQL on the test database."""
    from tests.memory_store import InMemoryHistoryStore

    return InMemoryHistoryStore() if request.param == "in-memory" else sql_store(engine)


_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def check_label_syntax(key: str, value: str | None, *, is_label: bool) -> None:
    """What the API server checks and the JSON schema does not: key and (label) value syntax."""
    prefix, _, name = key.rpartition("/")
    assert _LABEL_NAME.match(name), f"bad key name {key!r}"
    assert not prefix or (len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix)), f"bad key prefix {key!r}"
    if is_label:
        assert value is not None and (value == "" or _LABEL_NAME.match(value)), f"bad label value {value!r}"


def shipped_manifest(name: str) -> list[dict[str, Any]]:
    """The documents of ``deploy/<name>``, each checked against the Kubernetes 1.33 schema (strict)."""
    import kubernetes_validate
    import yaml

    docs = list(yaml.safe_load_all((Path(__file__).resolve().parents[1] / "deploy" / name).read_text()))
    for doc in docs:
        kubernetes_validate.validate(doc, "1.33", strict=True)
    return docs


def shipped_config_map(pod: dict[str, Any]) -> str:
    """The ConfigMap a shipped pod reads its airflow.cfg from (the official Helm chart names it
    ``<release>-airflow-config``)."""
    mount = next(m for c in pod["containers"] for m in c["volumeMounts"] if m.get("subPath") == "airflow.cfg")
    return str(next(v for v in pod["volumes"] if v["name"] == mount["name"])["configMap"]["name"])


def validate_pod(pod: Any) -> dict[str, Any]:
    """The pod as the API server would receive it, checked against the Kubernetes 1.33 schema (strict)
    and the label and annotation syntax the schema leaves out."""
    import kubernetes_validate

    data = pod if isinstance(pod, dict) else ApiClient().sanitize_for_serialization(pod)
    data = {"apiVersion": "v1", "kind": "Pod", **data}
    kubernetes_validate.validate(data, "1.33", strict=True)
    metadata = data.get("metadata") or {}
    for key, value in (metadata.get("labels") or {}).items():
        check_label_syntax(key, value, is_label=True)
    for key, value in (metadata.get("annotations") or {}).items():
        check_label_syntax(key, value, is_label=False)
    return data
