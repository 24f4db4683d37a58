"""A bootstrap watermark records how far its table's schema history was checked for table swaps.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``bootstrap_watermarks.history_offset`` (null: not recorded, the applier starts where it finds
    the history on its first look)."""
    with op.batch_alter_table("bootstrap_watermarks") as batch:
        batch.add_column(sa.Column("history_offset", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    """Drop what ``upgrade`` added."""
    with op.batch_alter_table("bootstrap_watermarks") as batch:
        batch.drop_column("history_offset")
