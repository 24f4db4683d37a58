"""Quarantined messages, re-bootstraps and the possibly-diverged mark of a table.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

NAME = 512


def upgrade() -> None:
    """Add ``tables.possibly_diverged`` and the ``quarantined_messages`` and ``rebootstraps`` tables."""
    with op.batch_alter_table("tables") as batch:
        batch.add_column(sa.Column("possibly_diverged", sa.Text(), nullable=True))
    op.create_table(
        "quarantined_messages",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("table_name", sa.String(NAME), sa.ForeignKey("tables.qualified_name"), nullable=False),
        sa.Column("topic", sa.String(NAME), nullable=False),
        sa.Column("kafka_partition", sa.Integer(), nullable=False),
        sa.Column("kafka_offset", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("message_key", sa.LargeBinary(), nullable=True),
        sa.Column("message_value", sa.LargeBinary(), nullable=True),
        sa.Column("quarantined_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_quarantined_messages_table_name", "quarantined_messages", ["table_name"])
    op.create_table(
        "rebootstraps",
        sa.Column("table_name", sa.String(NAME), sa.ForeignKey("tables.qualified_name"), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("copy_name", sa.String(NAME), nullable=False),
        sa.Column("old_path", sa.Text(), nullable=False),
        sa.Column("new_path", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("switched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("remove_after", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    """Drop what ``upgrade`` added."""
    op.drop_table("rebootstraps")
    op.drop_index("ix_quarantined_messages_table_name", "quarantined_messages")
    op.drop_table("quarantined_messages")
    with op.batch_alter_table("tables") as batch:
        batch.drop_column("possibly_diverged")
