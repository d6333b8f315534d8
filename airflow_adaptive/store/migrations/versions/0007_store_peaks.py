"""The peaks of every completed attempt, store-wide (a cold family that asks for no memory starts
from them), built from the families' peak histograms already stored.

Revision ID: a3e6c9f1b702
Revises: f5c2a8e7d914
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "a3e6c9f1b702"
down_revision = "f5c2a8e7d914"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from airflow_adaptive.core.rollup import Distributions
    from airflow_adaptive.core.sketch import LogHistogram
    from airflow_adaptive.store.tables import aggregate, family

    conn = op.get_bind()
    peaks = LogHistogram()
    for (counts,) in conn.execute(sa.select(family.c.peaks).where(family.c.attempts > 0)):
        peaks = peaks.combined(LogHistogram(counts if isinstance(counts, dict) else None))
    found = conn.execute(sa.select(aggregate.c.distributions).where(aggregate.c.id == 1)).first()
    if found is None:
        return  # no history yet: the first recording creates the row
    distributions = Distributions.from_json(found[0])
    distributions.peaks = peaks
    conn.execute(
        sa.update(aggregate).where(aggregate.c.id == 1).values(distributions=distributions.to_json())
    )


def downgrade() -> None:
    pass  # the extra key is ignored by older code
