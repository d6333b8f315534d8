"""Task attempt history.

Revision ID: a7d1c0f3e201
Revises:
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "a7d1c0f3e201"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "adaptive_task_attempt",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("task_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("map_index", sa.Integer, nullable=False, server_default="-1"),
        sa.Column("try_number", sa.Integer, nullable=False),
        sa.Column("task_family", sa.String(250), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("memory_request_bytes", sa.BigInteger),
        sa.Column("memory_limit_bytes", sa.BigInteger),
        sa.Column("peak_memory_bytes", sa.BigInteger),
        sa.Column("peak_kind", sa.String(16), nullable=False, server_default="none"),
        sa.Column("cpu_core_seconds", sa.Float),
        sa.Column("wall_seconds", sa.Float),
        sa.Column("read_bytes", sa.BigInteger),
        sa.Column("write_bytes", sa.BigInteger),
        sa.Column("input_size_bytes", sa.BigInteger),
        sa.Column("node_name", sa.String(253)),
        sa.Column("exit_reason", sa.String(64), nullable=False),
        sa.Column("exit_code", sa.Integer),
        sa.Column("strategy", sa.String(100)),
        sa.Column("explanation", sa.Text),
        sa.PrimaryKeyConstraint("id", name="adaptive_task_attempt_pkey"),
        sa.UniqueConstraint(
            "dag_id", "task_id", "run_id", "map_index", "try_number", name="adaptive_task_attempt_key_uq"
        ),
    )
    op.create_index(
        "idx_adaptive_task_attempt_family_finished",
        "adaptive_task_attempt",
        ["task_family", "finished_at"],
    )


def downgrade() -> None:
    op.drop_index("idx_adaptive_task_attempt_family_finished", table_name="adaptive_task_attempt")
    op.drop_table("adaptive_task_attempt")
