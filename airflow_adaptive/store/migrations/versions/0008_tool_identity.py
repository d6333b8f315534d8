"""What each attempt and family runs: the container image and the command's program (warm starts
compare families by them).

Revision ID: b8d4f2a6c913
Revises: a3e6c9f1b702
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "b8d4f2a6c913"
down_revision = "a3e6c9f1b702"
branch_labels = None
depends_on = None

TABLES = ("adaptive_task_attempt", "adaptive_family")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("image", sa.String(500)))
        op.add_column(table, sa.Column("program", sa.String(250)))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:  # SQLite drops a column by copying the table
            batch.drop_column("program")
            batch.drop_column("image")
