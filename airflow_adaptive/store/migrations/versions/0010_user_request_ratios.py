"""Once recomputed the store-wide request ratios (peak / the user's request) that a new family's
request was scaled by. A new family now keeps its request and nothing reads the ratios: the
revision does nothing, and stays so that stores that ran it and stores that did not meet at one
head. The key it wrote is dropped the next time the row is saved.

Revision ID: d2f8b4c6e913
Revises: c5e7a9b1d204
Create Date: 2026-11-27
"""

from __future__ import annotations

revision = "d2f8b4c6e913"
down_revision = "c5e7a9b1d204"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
