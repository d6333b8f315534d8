"""Each attempt's memory rebound: after it first fell below half the most it had used, how far it
rose again (core/growth_plan.py: rebound_of), from which growth in place learns how low a fallen
try may be kept.

Revision ID: c4e8b1f7a392
Revises: a9d3f6c2b871
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "c4e8b1f7a392"
down_revision = "a9d3f6c2b871"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("adaptive_task_attempt", sa.Column("memory_rebound_bytes", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("adaptive_task_attempt") as batch:  # SQLite drops a column by copying
        batch.drop_column("memory_rebound_bytes")
