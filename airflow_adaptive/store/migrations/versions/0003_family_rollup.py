"""Per-family rollups and fitted models, per-day totals, store-wide distributions, users' requests;
rollups built from existing attempts.

Revision ID: c4f8a2d9e613
Revises: b3e9d2a41c07
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "c4f8a2d9e613"
down_revision = "b3e9d2a41c07"
branch_labels = None
depends_on = None

_COUNTS = ("attempts", "completed", "oom_killed", "usable_samples", "lower_bound_samples")
_SUMS = (
    ("cpu_cores_sum", "cpu_cores_n"),
    ("peak_memory_sum", "peak_memory_n"),
    ("io_rate_sum", "io_rate_n"),
    ("wall_seconds_sum", "wall_seconds_n"),
)


def upgrade() -> None:
    columns: list[sa.Column] = [sa.Column("task_family", sa.String(250), nullable=False)]
    columns += [sa.Column(c, sa.BigInteger, nullable=False, server_default="0") for c in _COUNTS]
    for total, n in _SUMS:
        columns.append(sa.Column(total, sa.Float, nullable=False, server_default="0"))
        columns.append(sa.Column(n, sa.BigInteger, nullable=False, server_default="0"))
    columns += [
        sa.Column("requested_byte_seconds", sa.Float, nullable=False, server_default="0"),
        sa.Column("used_byte_seconds", sa.Float, nullable=False, server_default="0"),
        sa.Column("user_requested_byte_seconds", sa.Float, nullable=False, server_default="0"),
        sa.Column("killed_byte_seconds", sa.Float, nullable=False, server_default="0"),
        sa.Column("peaks", sa.JSON),
        sa.Column("last_finished_at", sa.DateTime(timezone=True)),
        sa.Column("model", sa.JSON),
        sa.Column("model_fitted_at", sa.DateTime(timezone=True)),
    ]
    op.create_table(
        "adaptive_family", *columns, sa.PrimaryKeyConstraint("task_family", name="adaptive_family_pkey")
    )
    op.create_table(
        "adaptive_aggregate",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("distributions", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("id", name="adaptive_aggregate_pkey"),
    )
    day_columns: list[sa.Column] = [
        sa.Column("task_family", sa.String(250), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("day", sa.Date, nullable=False),
    ]
    day_columns += [
        sa.Column(c, sa.BigInteger, nullable=False, server_default="0")
        for c in ("attempts", "completed", "oom_killed", "retries")
    ]
    day_columns += [
        sa.Column(c, sa.Float, nullable=False, server_default="0")
        for c in (
            "requested_byte_seconds",
            "used_byte_seconds",
            "user_requested_byte_seconds",
            "killed_byte_seconds",
        )
    ]
    op.create_table(
        "adaptive_family_day",
        *day_columns,
        sa.PrimaryKeyConstraint("task_family", "dag_id", "day", name="adaptive_family_day_pkey"),
    )
    op.create_index("idx_adaptive_family_day_day", "adaptive_family_day", ["day"])
    with op.batch_alter_table("adaptive_task_attempt") as batch:
        batch.add_column(sa.Column("user_request_bytes", sa.BigInteger))
    # Data migration: rollups and distributions from the attempts already stored. Models are left
    # to be fitted lazily (the next decision or recording of each family), so upgrading stays fast.
    from airflow_adaptive.store.rebuild import rebuild_all

    rebuild_all(op.get_bind(), None)


def downgrade() -> None:
    with op.batch_alter_table("adaptive_task_attempt") as batch:
        batch.drop_column("user_request_bytes")
    op.drop_index("idx_adaptive_family_day_day", table_name="adaptive_family_day")
    op.drop_table("adaptive_family_day")
    op.drop_table("adaptive_aggregate")
    op.drop_table("adaptive_family")
