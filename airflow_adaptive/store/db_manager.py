"""Runs the provider's migrations from ``airflow db migrate`` and ``airflow db reset``."""

from __future__ import annotations

from pathlib import Path

from airflow.utils.db_manager import BaseDBManager

from airflow_adaptive.store.tables import metadata

_HERE = Path(__file__).parent
HEAD_REVISION = "d7f2c9a4e615"  # the newest migration; tests check the database reaches it


class AdaptiveDBManager(BaseDBManager):
    """Listed under ``db-managers`` in the provider info, so Airflow discovers it."""

    metadata = metadata
    migration_dir = str(_HERE / "migrations")
    alembic_file = str(_HERE / "alembic.ini")
    version_table_name = "alembic_version_adaptive"
    supports_table_dropping = True
    revision_heads_map = {"0.1.0": HEAD_REVISION}
