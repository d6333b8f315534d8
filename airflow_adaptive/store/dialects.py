"""Dialect-specific upserts, written once for every table (PostgreSQL, SQLite, MySQL)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func
from sqlalchemy.dialects import mysql, postgresql, sqlite

from airflow_adaptive.exceptions import HistoryUnavailableError


def _insert(dialect: str) -> Any:
    if dialect in ("mysql", "mariadb"):
        return mysql.insert
    if dialect in ("postgresql", "sqlite"):
        return postgresql.insert if dialect == "postgresql" else sqlite.insert
    raise HistoryUnavailableError(f"the history store does not support the {dialect} dialect")


def upsert(dialect: str, table: Any, columns: Sequence[str], keys: Sequence[str]) -> Any:
    """INSERT ... ON CONFLICT DO UPDATE (ON DUPLICATE KEY UPDATE on MySQL), executed with a list of
    rows: one compiled statement, batched by SQLAlchemy's insertmanyvalues."""
    stmt = _insert(dialect)(table)
    changed = [c for c in columns if c not in keys]
    if dialect in ("mysql", "mariadb"):
        return stmt.on_duplicate_key_update({c: stmt.inserted[c] for c in changed})
    return stmt.on_conflict_do_update(index_elements=list(keys), set_={c: stmt.excluded[c] for c in changed})


def add_to(dialect: str, table: Any, keys: Sequence[str]) -> Any:
    """INSERT, or add the new row's numbers to the existing row's (atomic increments)."""
    stmt = _insert(dialect)(table)
    numbers = [c.name for c in table.columns if c.name not in keys]
    if dialect in ("mysql", "mariadb"):
        return stmt.on_duplicate_key_update({c: table.c[c] + stmt.inserted[c] for c in numbers})
    return stmt.on_conflict_do_update(
        index_elements=list(keys), set_={c: table.c[c] + stmt.excluded[c] for c in numbers}
    )


def insert_missing(dialect: str, table: Any, values: list[dict[str, Any]], keys: Sequence[str]) -> Any:
    stmt = _insert(dialect)(table).values(values)
    if dialect in ("mysql", "mariadb"):
        return stmt.prefix_with("IGNORE")
    return stmt.on_conflict_do_nothing(index_elements=list(keys))


def count_read(dialect: str, table: Any) -> Any:
    """INSERT a declared input's first read, or add one read, keep the newest known size and time."""
    stmt = _insert(dialect)(table)
    new = stmt.inserted if dialect in ("mysql", "mariadb") else stmt.excluded
    changes = {
        "reads": table.c.reads + new.reads,
        "size_bytes": func.coalesce(new.size_bytes, table.c.size_bytes),
        "last_read_at": new.last_read_at,
    }
    if dialect in ("mysql", "mariadb"):
        return stmt.on_duplicate_key_update(changes)
    return stmt.on_conflict_do_update(index_elements=["uri_key"], set_=changes)
