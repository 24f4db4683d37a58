"""A table's freshness row records its table-service backlog (MERGE_ON_READ compaction outside the writes).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``freshness.pending_plans``, ``uncompacted_since_ms``, ``services_error`` and
    ``services_measured_at`` (all null: the table's services were never measured)."""
    with op.batch_alter_table("freshness") as batch:
        batch.add_column(sa.Column("pending_plans", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("uncompacted_since_ms", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("services_error", sa.Text(), nullable=True))
        batch.add_column(sa.Column("services_measured_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Drop what ``upgrade`` added."""
    with op.batch_alter_table("freshness") as batch:
        for column in ("services_measured_at", "services_error", "uncompacted_since_ms", "pending_plans"):
            batch.drop_column(column)
