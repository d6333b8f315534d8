"""The store-wide request ratios again, as peak / the user's request (else the pod's): they were
peak / the pod's request, which for a pod the adaptive policy sized is about 1, so a store that had
sized many pods started a new family at its full request instead of what users' tasks used of theirs.

Revision ID: d2f8b4c6e913
Revises: c5e7a9b1d204
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "d2f8b4c6e913"
down_revision = "c5e7a9b1d204"
branch_labels = None
depends_on = None

_BATCH = 10_000


def upgrade() -> None:
    from airflow_adaptive.core.rollup import Distributions, request_ratio
    from airflow_adaptive.core.sketch import LogHistogram
    from airflow_adaptive.store.rows import observations
    from airflow_adaptive.store.tables import aggregate, task_attempt

    conn = op.get_bind()
    found = conn.execute(sa.select(aggregate.c.distributions).where(aggregate.c.id == 1)).first()
    if found is None:
        return  # no history yet: the first recording creates the row
    ratios = LogHistogram()
    after = 0
    while True:  # by id, a batch at a time: a store of millions of attempts is never held at once
        batch = conn.execute(
            sa.select(task_attempt).where(task_attempt.c.id > after).order_by(task_attempt.c.id).limit(_BATCH)
        ).all()
        if not batch:
            break
        after = batch[-1].id
        for obs in observations(batch):
            ratio = request_ratio(obs)
            if ratio is not None:
                ratios.add(ratio)
    distributions = Distributions.from_json(found[0])
    distributions.request_ratios = ratios
    conn.execute(
        sa.update(aggregate).where(aggregate.c.id == 1).values(distributions=distributions.to_json())
    )


def downgrade() -> None:
    pass  # older code reads the same key
