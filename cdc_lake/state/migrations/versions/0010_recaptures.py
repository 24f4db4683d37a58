"""A table whose capture restarted on a new primary (a Postgres failover) is recorded until repaired.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``recaptures``: per table, the first Kafka offsets of the new capture and the ordering value
    of the new primary's fork point."""
    op.create_table(
        "recaptures",
        sa.Column("table_name", sa.String(512), sa.ForeignKey("tables.qualified_name"), primary_key=True),
        sa.Column("topic", sa.String(512), nullable=False),
        sa.Column("kafka_offsets", sa.JSON(), nullable=False),
        sa.Column("fork_ordering", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    """Drop what ``upgrade`` added."""
    op.drop_table("recaptures")
