"""Each node's benchmark noise (relative standard error per benchmark), when profiled with repeats.

Revision ID: f5c2a8e7d914
Revises: e2b9d4f61a37
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "f5c2a8e7d914"
down_revision = "e2b9d4f61a37"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("adaptive_node", sa.Column("benchmark_noise", sa.JSON()))


def downgrade() -> None:
    with op.batch_alter_table("adaptive_node") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("benchmark_noise")
