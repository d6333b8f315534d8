"""Attempts whose pods were created and that are not recorded yet (a decision compares their running
time with the family's finished attempts: core/unfinished.py).

Revision ID: c5e7a9b1d204
Revises: b8d4f2a6c913
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "c5e7a9b1d204"
down_revision = "b8d4f2a6c913"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adaptive_unfinished_attempt",
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("task_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("map_index", sa.Integer, nullable=False, server_default="-1"),
        sa.Column("try_number", sa.Integer, nullable=False),
        sa.Column("task_family", sa.String(250), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "dag_id", "task_id", "run_id", "map_index", "try_number", name="adaptive_unfinished_attempt_pkey"
        ),
    )
    op.create_index(
        "idx_adaptive_unfinished_attempt_family_started",
        "adaptive_unfinished_attempt",
        ["task_family", "started_at"],
    )


def downgrade() -> None:
    op.drop_index("idx_adaptive_unfinished_attempt_family_started", "adaptive_unfinished_attempt")
    op.drop_table("adaptive_unfinished_attempt")
