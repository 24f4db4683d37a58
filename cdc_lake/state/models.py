"""SQLAlchemy ORM tables of the state store; migrations/versions must create exactly these."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, ForeignKey, Integer, LargeBinary, String, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAME_LENGTH = 512


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse naive datetimes and store UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the state store; use timezone-aware UTC")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach UTC to values the database returns without a zone."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base of the state store tables."""


class SourceRow(Base):
    """An onboarded source."""

    __tablename__ = "sources"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    engine: Mapped[str] = mapped_column(String(16))
    onboarded_at: Mapped[datetime] = mapped_column(UtcDateTime)
    connector_names: Mapped[list[str]] = mapped_column(JSON)


class TableRow(Base):
    """A replicated table and its lifecycle state."""

    __tablename__ = "tables"

    qualified_name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    source: Mapped[str] = mapped_column(String(128), ForeignKey("sources.name"), index=True)
    tier: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(32))
    lake_base_path: Mapped[str] = mapped_column(Text)
    last_error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    possibly_diverged: Mapped[str | None] = mapped_column(Text)


class BootstrapWatermarkRow(Base):
    """The current bootstrap hand-off point of a table (a re-bootstrap replaces it)."""

    __tablename__ = "bootstrap_watermarks"

    table_name: Mapped[str] = mapped_column(
        String(NAME_LENGTH), ForeignKey("tables.qualified_name"), primary_key=True
    )
    topic: Mapped[str] = mapped_column(String(NAME_LENGTH))
    kafka_offsets: Mapped[dict[str, int]] = mapped_column(JSON)
    ts_source_ms: Mapped[int | None] = mapped_column(BigInteger)
    source_position: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    replica_position_reached: Mapped[bool] = mapped_column(Boolean)
    partition_plan: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    history_offset: Mapped[int | None] = mapped_column(BigInteger)
    """The first schema-history offset not yet checked for a swap of the table (migration 0006): the
    history's end when the bootstrap began, advanced by the applier; null: not recorded (MySQL/MariaDB
    only, or a bootstrap from before 0006)."""
    topic_id: Mapped[str | None] = mapped_column(String(64))
    """The Kafka id of ``topic`` when its offsets were read (migration 0009); null: a watermark saved
    before, or a broker without topic ids."""


class AppliedOffsetRow(Base):
    """The next Kafka offset to apply for one partition of a table's topic."""

    __tablename__ = "applied_offsets"

    table_name: Mapped[str] = mapped_column(
        String(NAME_LENGTH), ForeignKey("tables.qualified_name"), primary_key=True
    )
    kafka_partition: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    next_offset: Mapped[int] = mapped_column(BigInteger)
    commit_instant: Mapped[str] = mapped_column(String(32))
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class RunRow(Base):
    """One command run, kept after the table it names is gone."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    command: Mapped[str] = mapped_column(String(64))
    table_name: Mapped[str | None] = mapped_column(String(NAME_LENGTH), index=True)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    outcome: Mapped[str | None] = mapped_column(String(16))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)


class FreshnessRow(Base):
    """The latest freshness measurement of a table."""

    __tablename__ = "freshness"

    table_name: Mapped[str] = mapped_column(
        String(NAME_LENGTH), ForeignKey("tables.qualified_name"), primary_key=True
    )
    newest_source_ts_ms: Mapped[int | None] = mapped_column(BigInteger)
    lag_messages: Mapped[int] = mapped_column(BigInteger)
    measured_at: Mapped[datetime] = mapped_column(UtcDateTime)
    pending_plans: Mapped[int | None] = mapped_column(Integer)
    uncompacted_since_ms: Mapped[int | None] = mapped_column(BigInteger)
    services_error: Mapped[str | None] = mapped_column(Text)
    services_measured_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class QuarantinedMessageRow(Base):
    """A message an operator chose to skip: a copy of it, where it was, and why (migration 0002).

    ``topic_id`` (the topic's Kafka id when it was quarantined) and ``lake_path`` (the copy that skips
    it) bind the row (migration 0003; null on older rows).  ``replayed_at``, ``replayed_by`` and
    ``replay_commit`` record ``cdc-lake quarantine --replay`` (migration 0004; null: not replayed).
    """

    __tablename__ = "quarantined_messages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    table_name: Mapped[str] = mapped_column(
        String(NAME_LENGTH), ForeignKey("tables.qualified_name"), index=True
    )
    topic: Mapped[str] = mapped_column(String(NAME_LENGTH))
    kafka_partition: Mapped[int] = mapped_column(Integer)
    kafka_offset: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(Text)
    message_key: Mapped[bytes | None] = mapped_column(LargeBinary)
    message_value: Mapped[bytes | None] = mapped_column(LargeBinary)
    quarantined_at: Mapped[datetime] = mapped_column(UtcDateTime)
    topic_id: Mapped[str | None] = mapped_column(String(64))
    lake_path: Mapped[str | None] = mapped_column(Text)
    replayed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    replayed_by: Mapped[str | None] = mapped_column(String(256))
    replay_commit: Mapped[str | None] = mapped_column(Text)


class RebootstrapRow(Base):
    """One re-bootstrap of a table into a new versioned base path (migration 0002)."""

    __tablename__ = "rebootstraps"

    table_name: Mapped[str] = mapped_column(
        String(NAME_LENGTH), ForeignKey("tables.qualified_name"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    copy_name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    old_path: Mapped[str] = mapped_column(Text)
    new_path: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    phase: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    switched_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    remove_after: Mapped[datetime | None] = mapped_column(UtcDateTime)
    read_from: Mapped[str | None] = mapped_column(String(16))
    """``primary`` when ``rebootstrap --from-primary`` started it (migration 0005); null: as configured."""


class RecaptureRow(Base):
    """A table whose capture restarted on a new primary without a copy, until a repair proves it
    (migration 0010; :mod:`cdc_lake.state.recaptures`)."""

    __tablename__ = "recaptures"

    table_name: Mapped[str] = mapped_column(
        String(NAME_LENGTH), ForeignKey("tables.qualified_name"), primary_key=True
    )
    topic: Mapped[str] = mapped_column(String(NAME_LENGTH))
    kafka_offsets: Mapped[dict[str, int]] = mapped_column(JSON)
    """Per partition, the topic's end offset before the new connector was created: the first offset of
    the new capture."""
    fork_ordering: Mapped[str] = mapped_column(String(64))
    """The ordering value of the new primary's fork point: every change it made sorts above it, and so
    does every lake row written from a transaction it never received."""
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
