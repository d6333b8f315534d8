"""Each attempt's memory profile: the seconds from its start at which it first reached each 2 %
of its peak (core/growth.py), from which growth in place learns a family's start and headroom.

Revision ID: f7b2d5e8a146
Revises: e4a1c7d9f352
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "f7b2d5e8a146"
down_revision = "e4a1c7d9f352"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("adaptive_task_attempt", sa.Column("memory_profile", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("adaptive_task_attempt") as batch:  # SQLite drops a column by copying
        batch.drop_column("memory_profile")
