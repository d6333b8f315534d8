"""Whether an unfinished attempt's pod runs yet: a Pending pod is noted when it is created, and its
wait is not time run, which the unfinished-attempt guard compares with finished runtimes
(core/unfinished.py). Notes written before were all taken as running, as they still are.

Revision ID: d7f2c9a4e615
Revises: c4e8b1f7a392
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "d7f2c9a4e615"
down_revision = "c4e8b1f7a392"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "adaptive_unfinished_attempt",
        sa.Column("running", sa.Boolean, nullable=False, server_default=sa.true()),
    )


def downgrade() -> None:
    with op.batch_alter_table("adaptive_unfinished_attempt") as batch:  # SQLite drops a column by copying
        batch.drop_column("running")
