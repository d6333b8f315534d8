"""The distribution of every family's successful attempts (least-finished-first ranks by it),
built from the family rows already stored.

Revision ID: d7a1c3e5f820
Revises: c4f8a2d9e613
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "d7a1c3e5f820"
down_revision = "c4f8a2d9e613"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from airflow_adaptive.core.rollup import Distributions
    from airflow_adaptive.core.sketch import LogHistogram
    from airflow_adaptive.store.tables import aggregate, family

    conn = op.get_bind()
    successes = LogHistogram()
    for (completed,) in conn.execute(sa.select(family.c.completed).where(family.c.attempts > 0)):
        successes.add(completed)
    found = conn.execute(sa.select(aggregate.c.distributions).where(aggregate.c.id == 1)).first()
    if found is None:
        return  # no history yet: the first recording creates the row
    distributions = Distributions.from_json(found[0])
    distributions.successes = successes
    conn.execute(
        sa.update(aggregate).where(aggregate.c.id == 1).values(distributions=distributions.to_json())
    )


def downgrade() -> None:
    pass  # the extra key is ignored by older code
