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
    from airflow_adaptive.core.rollup import Distributions
    from airflow_adaptive.core.sketch import LogHistogram

    conn = op.get_bind()
    aggregate = sa.table("adaptive_aggregate", sa.column("id"), sa.column("distributions", sa.JSON))
    found = conn.execute(sa.select(aggregate.c.distributions).where(aggregate.c.id == 1)).first()
    if found is None:
        return  # no history yet: the first recording creates the row
    # the attempts as this revision has them: completed, measured peaks, a request (the user's, else the pod's)
    attempt = sa.table(
        "adaptive_task_attempt",
        *(sa.column(name) for name in ("id", "exit_reason", "peak_kind", "peak_memory_bytes")),
        *(sa.column(name) for name in ("memory_request_bytes", "user_request_bytes")),
    )
    request = sa.func.coalesce(attempt.c.user_request_bytes, attempt.c.memory_request_bytes)
    ratios = LogHistogram()
    after = 0
    while True:  # by id, a batch at a time: a store of millions of attempts is never held at once
        batch = conn.execute(
            sa.select(attempt.c.id, attempt.c.peak_memory_bytes, request)
            .where(
                attempt.c.id > after,
                attempt.c.exit_reason == "Completed",
                attempt.c.peak_kind == "measured",
                attempt.c.peak_memory_bytes > 0,
                request > 0,
            )
            .order_by(attempt.c.id)
            .limit(_BATCH)
        ).all()
        if not batch:
            break
        after = batch[-1][0]
        for _, peak, asked in batch:
            ratios.add(peak / asked)
    distributions = Distributions.from_json(found[0])
    distributions.request_ratios = ratios
    conn.execute(
        sa.update(aggregate).where(aggregate.c.id == 1).values(distributions=distributions.to_json())
    )


def downgrade() -> None:
    pass  # older code reads the same key
