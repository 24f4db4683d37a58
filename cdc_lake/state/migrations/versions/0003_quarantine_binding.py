"""Quarantine rows bound to the topic's Kafka id and to the lake copy that skips them.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``quarantined_messages.topic_id`` and ``lake_path`` (null on rows quarantined before)."""
    with op.batch_alter_table("quarantined_messages") as batch:
        batch.add_column(sa.Column("topic_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("lake_path", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop what ``upgrade`` added."""
    with op.batch_alter_table("quarantined_messages") as batch:
        batch.drop_column("lake_path")
        batch.drop_column("topic_id")
