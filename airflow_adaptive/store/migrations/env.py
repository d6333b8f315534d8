"""Alembic environment for the provider's tables only, with their own version table."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import create_engine

from airflow_adaptive.store.tables import metadata

VERSION_TABLE = "alembic_version_adaptive"


def _include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    return type_ != "table" or name in metadata.tables


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_object=_include_object,
        render_as_batch=True,
        **kwargs,
    )


def run_migrations_offline() -> None:
    _configure(url=context.config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as conn:
        _configure(connection=conn)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
