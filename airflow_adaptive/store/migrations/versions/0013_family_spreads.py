"""The store-wide row counts every family's spread of log peaks (core/sizing/small_samples.py), from
which a small family's bound learns its prior spread; counted from the families' peak histograms.

Revision ID: a9d3f6c2b871
Revises: f7b2d5e8a146
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import select

revision = "a9d3f6c2b871"
down_revision = "f7b2d5e8a146"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from airflow_adaptive.store.rebuild import count_spreads

    count_spreads(op.get_bind())


def downgrade() -> None:
    from airflow_adaptive.store.tables import aggregate

    conn = op.get_bind()
    stored = conn.execute(select(aggregate.c.distributions).where(aggregate.c.id == 1)).first()
    if stored is not None and isinstance(stored.distributions, dict):
        kept = {k: v for k, v in stored.distributions.items() if k != "spread"}
        conn.execute(aggregate.update().where(aggregate.c.id == 1).values(distributions=kept))
