"""Initial state store schema: sources, tables, bootstrap watermarks, applied offsets, runs, freshness.

Revision ID: 0001
Revises: none
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

NAME = 512


def upgrade() -> None:
    """Create every table."""
    op.create_table(
        "sources",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("engine", sa.String(16), nullable=False),
        sa.Column("onboarded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("connector_names", sa.JSON(), nullable=False),
    )
    op.create_table(
        "tables",
        sa.Column("qualified_name", sa.String(NAME), primary_key=True),
        sa.Column("source", sa.String(128), sa.ForeignKey("sources.name"), nullable=False),
        sa.Column("tier", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("lake_base_path", sa.Text(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_tables_source", "tables", ["source"])
    op.create_table(
        "bootstrap_watermarks",
        sa.Column("table_name", sa.String(NAME), sa.ForeignKey("tables.qualified_name"), primary_key=True),
        sa.Column("topic", sa.String(NAME), nullable=False),
        sa.Column("kafka_offsets", sa.JSON(), nullable=False),
        sa.Column("ts_source_ms", sa.BigInteger(), nullable=True),
        sa.Column("source_position", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("replica_position_reached", sa.Boolean(), nullable=False),
        sa.Column("partition_plan", sa.JSON(), nullable=False),
    )
    op.create_table(
        "applied_offsets",
        sa.Column("table_name", sa.String(NAME), sa.ForeignKey("tables.qualified_name"), primary_key=True),
        sa.Column("kafka_partition", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("next_offset", sa.BigInteger(), nullable=False),
        sa.Column("hudi_commit_instant", sa.String(32), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("command", sa.String(64), nullable=False),
        sa.Column("table_name", sa.String(NAME), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index("ix_runs_table_name", "runs", ["table_name"])
    op.create_table(
        "freshness",
        sa.Column("table_name", sa.String(NAME), sa.ForeignKey("tables.qualified_name"), primary_key=True),
        sa.Column("newest_source_ts_ms", sa.BigInteger(), nullable=True),
        sa.Column("lag_messages", sa.BigInteger(), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    """Drop every table, children first."""
    for table in ("freshness", "runs", "applied_offsets", "bootstrap_watermarks", "tables", "sources"):
        op.drop_table(table)
