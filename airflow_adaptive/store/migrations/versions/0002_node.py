"""Node profiles and their groups.

Revision ID: b3e9d2a41c07
Revises: a7d1c0f3e201
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "b3e9d2a41c07"
down_revision = "a7d1c0f3e201"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adaptive_node",
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("benchmarks", sa.JSON, nullable=False),
        sa.Column("cores", sa.Integer),
        sa.Column("memory_bytes", sa.BigInteger),
        sa.Column("capabilities", sa.JSON, nullable=False),
        sa.Column("profiled_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("group_id", sa.Integer),
        sa.Column("group_ranks", sa.JSON),
        sa.Column("grouped_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("node", name="adaptive_node_pkey"),
    )


def downgrade() -> None:
    op.drop_table("adaptive_node")
