"""Reaching the history store from whichever Airflow process we run in.

Scheduler, api-server and CLI have Airflow's own engine. Task processes do not
(Airflow 3 blocks the ORM there), so they use an Airflow connection holding a
SQLAlchemy URL. Either may be missing: callers then fail open.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL, make_url

from airflow_adaptive.exceptions import HistoryUnavailableError
from airflow_adaptive.store.api import HistoryStore
from airflow_adaptive.store.learning import Learning
from airflow_adaptive.store.sql import SqlHistoryStore

if TYPE_CHECKING:
    from airflow_adaptive.config import AdaptiveSettings

log = logging.getLogger(__name__)

_DRIVERS = {"postgres": "postgresql", "postgresql": "postgresql", "sqlite": "sqlite", "mysql": "mysql"}
_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def connection_url(conn: Any) -> URL:
    """The SQLAlchemy URL of an Airflow connection: extra ``sqlalchemy_url`` first, else its parts."""
    extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
    if extra.get("sqlalchemy_url"):
        return make_url(extra["sqlalchemy_url"])
    driver = _DRIVERS.get((conn.conn_type or "").lower())
    if driver is None:
        raise HistoryUnavailableError(
            f"connection {conn.conn_id!r} has type {conn.conn_type!r}; use postgres, mysql or sqlite, "
            "or set extra 'sqlalchemy_url'"
        )
    if driver == "sqlite":
        return URL.create("sqlite", database=conn.host or conn.schema)
    return URL.create(
        driver,
        username=conn.login or None,
        password=conn.password or None,
        host=conn.host or None,
        port=conn.port or None,
        database=conn.schema or None,
    )


def _timeout_args(url: URL, timeout_seconds: float) -> dict[str, Any]:
    backend = url.get_backend_name()
    if backend == "postgresql":
        millis = int(timeout_seconds * 1000)
        options = f"-c statement_timeout={millis} -c lock_timeout={millis}"
        return {"connect_timeout": max(1, int(timeout_seconds)), "options": options}
    if backend == "sqlite":
        return {"timeout": timeout_seconds}
    if backend in ("mysql", "mariadb"):
        seconds = max(1, int(timeout_seconds))
        return {"connect_timeout": seconds, "read_timeout": seconds, "write_timeout": seconds}
    return {}


def engine_for_url(url: URL | str, timeout_seconds: float, *, metadata: bool = False) -> Engine:
    """One pooled engine per URL per process, with short timeouts (connect included)."""
    url = make_url(url)
    key = url.render_as_string(hide_password=False)
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            connect_args = _timeout_args(url, timeout_seconds)
            engine = (
                _metadata_engine(key, connect_args)
                if metadata
                else create_engine(url, connect_args=connect_args, pool_pre_ping=True, future=True)
            )
            _engines[key] = engine
    return engine


def _metadata_engine(url: str, timeout_args: dict[str, Any]) -> Engine:
    """An engine on Airflow's metadata database made by Airflow's own factory, so a deployment's
    override of it (token auth, say) and its ``sql_alchemy_connect_args`` apply, plus our timeouts:
    Airflow's engine has no connect timeout, and a database that accepts and never answers would
    hang a connect for ever."""
    from airflow import settings
    from airflow.configuration import conf

    connect_args: dict[str, Any] = {}
    if conf.has_option("database", "sql_alchemy_connect_args"):
        connect_args = dict(conf.getimport("database", "sql_alchemy_connect_args") or {})
    if url.startswith("sqlite"):
        connect_args["check_same_thread"] = False  # the api-server reads in worker threads
    engine_args = {"pool_pre_ping": True, "pool_size": 2, "max_overflow": 3}
    if url.startswith("sqlite"):
        engine_args = {"pool_pre_ping": True}
    return settings.create_metadata_engine(
        url, engine_args=engine_args, connect_args={**connect_args, **timeout_args}
    )


def airflow_engine() -> Engine | None:
    """Airflow's own engine, or None in processes where Airflow blocks the ORM."""
    try:
        from airflow import settings

        engine = settings.engine
    except (AttributeError, RuntimeError, ImportError):
        return None
    if engine is None or str(engine.url).startswith("airflow-db-not-allowed"):
        return None
    return engine


def _connection(conn_id: str) -> Any:
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(conn_id)


def store_engine(conn_id: str, timeout_seconds: float, *, prefer_airflow_engine: bool = True) -> Engine:
    """An engine on Airflow's database where this process has one, else the connection's; or why not."""
    if prefer_airflow_engine:
        engine = airflow_engine()
        if engine is not None:
            return engine_for_url(engine.url, timeout_seconds, metadata=True)
    try:
        conn = _connection(conn_id)
    except Exception as err:  # any secrets backend or API error means "not available"
        raise HistoryUnavailableError(
            f"no database access in this process and connection {conn_id!r} is unavailable ({err})"
        ) from err
    return engine_for_url(connection_url(conn), timeout_seconds)


def open_store(settings: AdaptiveSettings) -> HistoryStore:
    """The history store of this process, or HistoryUnavailableError saying why not."""
    engine = store_engine(settings.history_conn_id, settings.store_timeout_seconds)
    # Our engines carry the timeouts on every connection, the connect included.
    return SqlHistoryStore(engine, Learning(settings.sizing, settings.history_window))
