"""Declared shared inputs and the nodes that hold staged copies of them.

Revision ID: e2b9d4f61a37
Revises: d7a1c3e5f820
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "e2b9d4f61a37"
down_revision = "d7a1c3e5f820"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adaptive_input",
        sa.Column("uri_key", sa.String(64), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger()),
        sa.Column("reads", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("last_read_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("uri_key", name="adaptive_input_pkey"),
    )
    op.create_table(
        "adaptive_cached_input",
        sa.Column("node_name", sa.String(253), nullable=False),
        sa.Column("content_key", sa.String(64), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("node_name", "content_key", name="adaptive_cached_input_pkey"),
    )
    op.create_index("idx_adaptive_cached_input_content_key", "adaptive_cached_input", ["content_key"])


def downgrade() -> None:
    op.drop_index("idx_adaptive_cached_input_content_key", table_name="adaptive_cached_input")
    op.drop_table("adaptive_cached_input")
    op.drop_table("adaptive_input")
