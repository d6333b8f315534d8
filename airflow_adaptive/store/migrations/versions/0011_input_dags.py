"""Which DAGs read each declared input, so that a staged copy is shown only to users who may read
one of them. Inputs recorded before this revision have no reader: only unrestricted users see them.

Revision ID: e4a1c7d9f352
Revises: d2f8b4c6e913
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "e4a1c7d9f352"
down_revision = "d2f8b4c6e913"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adaptive_input_dag",
        sa.Column("uri_key", sa.String(64), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.PrimaryKeyConstraint("uri_key", "dag_id", name="adaptive_input_dag_pkey"),
    )


def downgrade() -> None:
    op.drop_table("adaptive_input_dag")
