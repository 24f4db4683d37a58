"""A bootstrap watermark records the Kafka id of the topic its offsets belong to.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``bootstrap_watermarks.topic_id`` (null: a watermark saved before, or by a broker without topic
    ids; its hand-off and first batch are not compared by id)."""
    with op.batch_alter_table("bootstrap_watermarks") as batch:
        batch.add_column(sa.Column("topic_id", sa.String(64), nullable=True))


def downgrade() -> None:
    """Drop what ``upgrade`` added."""
    with op.batch_alter_table("bootstrap_watermarks") as batch:
        batch.drop_column("topic_id")
