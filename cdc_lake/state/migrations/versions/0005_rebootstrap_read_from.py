"""A re-bootstrap records where its copy is read: ``primary`` when the operator asked for it.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``rebootstraps.read_from`` (null: where the config says, the replica when there is one)."""
    with op.batch_alter_table("rebootstraps") as batch:
        batch.add_column(sa.Column("read_from", sa.String(16), nullable=True))


def downgrade() -> None:
    """Drop what ``upgrade`` added."""
    with op.batch_alter_table("rebootstraps") as batch:
        batch.drop_column("read_from")
