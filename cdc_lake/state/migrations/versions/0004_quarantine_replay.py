"""Quarantine rows keep their replay: when, by whom, and the Hudi commit that applied the message.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``quarantined_messages.replayed_at``, ``replayed_by``, ``replay_commit`` (null: not replayed)."""
    with op.batch_alter_table("quarantined_messages") as batch:
        batch.add_column(sa.Column("replayed_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("replayed_by", sa.String(256), nullable=True))
        batch.add_column(sa.Column("replay_commit", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop what ``upgrade`` added."""
    with op.batch_alter_table("quarantined_messages") as batch:
        batch.drop_column("replay_commit")
        batch.drop_column("replayed_by")
        batch.drop_column("replayed_at")
