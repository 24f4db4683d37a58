"""An applied offset names the lake commit that stored it by a format-neutral column.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_OLD = "hudi_commit_instant"
_NEW = "commit_instant"


def upgrade() -> None:
    """Rename ``applied_offsets``' commit instant column; its values stay."""
    with op.batch_alter_table("applied_offsets") as batch:
        batch.alter_column(_OLD, new_column_name=_NEW)


def downgrade() -> None:
    """Give the column its former name back."""
    with op.batch_alter_table("applied_offsets") as batch:
        batch.alter_column(_NEW, new_column_name=_OLD)
