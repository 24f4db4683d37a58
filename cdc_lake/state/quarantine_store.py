"""Quarantined messages and the possibly-diverged mark they put on their table; a mark of another cause (a
commit completed after the apply lock was lost, :mod:`cdc_lake.apply.runner`) outlives them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cdc_lake.exceptions import StateStoreError
from cdc_lake.state.models import QuarantinedMessageRow, RecaptureRow, utcnow
from cdc_lake.state.records import QuarantinedMessage, TableInfo
from cdc_lake.state.session import StoreSession, one_line_text
from cdc_lake.state.tables import table_info


class QuarantineStore(StoreSession):
    """The messages an operator chose to skip, their replay, and the table's possibly-diverged mark."""

    def quarantine_message(
        self,
        table: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        reason: str,
        key: bytes | None,
        value: bytes | None,
        topic_id: str | None = None,
        lake_path: str | None = None,
    ) -> QuarantinedMessage:
        """Keep a copy of the message the operator chose to skip and mark ``table`` possibly diverged.

        ``topic_id`` is the topic's Kafka id now and ``lake_path`` the copy that will skip the message.
        """
        with self._transaction() as session:
            table_row = self._require_row(session, table)
            found = session.scalars(
                select(QuarantinedMessageRow).where(
                    QuarantinedMessageRow.table_name == table,
                    QuarantinedMessageRow.topic == topic,
                    QuarantinedMessageRow.kafka_partition == partition,
                    QuarantinedMessageRow.kafka_offset == offset,
                )
            ).one_or_none()
            if found is not None:
                return _quarantined(found)
            row = QuarantinedMessageRow(
                table_name=table, topic=topic, kafka_partition=partition, kafka_offset=offset,
                reason=one_line_text(reason), message_key=key, message_value=value, quarantined_at=utcnow(),
                topic_id=topic_id, lake_path=lake_path,
            )
            session.add(row)
            table_row.possibly_diverged = next_mark(table_row.possibly_diverged, [row])
            table_row.updated_at = utcnow()
            session.flush()
            return _quarantined(row)

    def quarantined(self, table: str | None = None, topic: str | None = None) -> list[QuarantinedMessage]:
        """The quarantined messages of ``table`` (every table's if None; of ``topic`` if given), oldest
        first."""
        query = select(QuarantinedMessageRow)
        if table is not None:
            query = query.where(QuarantinedMessageRow.table_name == table)
        if topic is not None:
            query = query.where(QuarantinedMessageRow.topic == topic)
        with self._transaction() as session:
            return [_quarantined(row) for row in session.scalars(query.order_by(QuarantinedMessageRow.id))]

    def quarantine_counts(self) -> dict[str, int]:
        """How many messages each table has in quarantine, not replayed (tables with none are left out)."""
        name = QuarantinedMessageRow.table_name
        query = select(name, func.count()).where(QuarantinedMessageRow.replayed_at.is_(None)).group_by(name)
        with self._transaction() as session:
            return {name: int(count) for name, count in session.execute(query)}

    def release_quarantined(self, table: str, partition: int, offset: int) -> TableInfo:
        """Forget the quarantined message of ``table`` at ``partition``/``offset`` (its change was replayed).

        The possibly-diverged mark then names the table's next quarantined message, or goes with the last.
        """
        with self._transaction() as session:
            table_row = self._require_row(session, table)
            rows = quarantine_rows(session, table)
            gone = [r for r in rows if (r.kafka_partition, r.kafka_offset) == (partition, offset)]
            if not gone:
                raise StateStoreError(
                    f"table {table}: no quarantined message at partition {partition} offset {offset}"
                )
            for row in gone:
                session.delete(row)
            left = [r for r in rows if r not in gone]
            table_row.possibly_diverged = next_mark(table_row.possibly_diverged, left)
            table_row.updated_at = utcnow()
            return table_info(table_row)

    def mark_replayed(
        self, table: str, partition: int, offset: int, *, by: str, commit: str | None
    ) -> TableInfo:
        """Record that ``cdc-lake quarantine --replay`` applied the message at ``partition``/``offset``.

        The row stays, with when, ``by`` whom and the Hudi ``commit`` that applied it (None: nothing was
        written, the lake held a later delete of its key); the possibly-diverged mark then names the
        table's next message still missing, or goes with the last.
        """
        with self._transaction() as session:
            table_row = self._require_row(session, table)
            rows = quarantine_rows(session, table)
            found = [r for r in rows if (r.kafka_partition, r.kafka_offset) == (partition, offset)]
            place = f"table {table}: partition {partition} offset {offset}"
            if not found:
                raise StateStoreError(f"{place}: no such quarantined message")
            if any(r.replayed_at is not None for r in found):
                raise StateStoreError(f"{place}: the quarantined message was already replayed")
            now = utcnow()
            for row in found:
                row.replayed_at, row.replayed_by, row.replay_commit = now, by, commit
            missing = [r for r in rows if r.replayed_at is None]
            table_row.possibly_diverged = next_mark(table_row.possibly_diverged, missing)
            table_row.updated_at = now
            return table_info(table_row)

    def mark_possibly_diverged(self, table: str, why: str) -> TableInfo:
        """Mark ``table`` possibly diverged for ``why`` (one line): another cause than a quarantined
        message, e.g. a commit written while the apply lock was lost; a clean validate clears it."""
        with self._transaction() as session:
            row = self._require_row(session, table)
            row.possibly_diverged = one_line_text(why)
            row.updated_at = utcnow()
            return table_info(row)

    def clear_possibly_diverged(self, table: str) -> TableInfo:
        """Record that the lake copy of ``table`` is known equal to the source again (a clean validate).

        A pending recapture keeps its mark: equal values do not show a row left by the old primary with an
        ordering value above the new one's changes (:mod:`cdc_lake.state.recaptures`); repair it first."""
        with self._transaction() as session:
            row = self._require_row(session, table)
            if session.get(RecaptureRow, table) is not None:
                return table_info(row)
            row.possibly_diverged = None
            row.updated_at = utcnow()
            return table_info(row)


def quarantine_rows(session: Session, table: str) -> list[QuarantinedMessageRow]:
    """The quarantine rows of ``table``, oldest first (a re-bootstrap's switch moves or drops them)."""
    query = select(QuarantinedMessageRow).where(QuarantinedMessageRow.table_name == table)
    return list(session.scalars(query.order_by(QuarantinedMessageRow.id)))


def _quarantined(row: QuarantinedMessageRow) -> QuarantinedMessage:
    return QuarantinedMessage(
        id=row.id, table=row.table_name, topic=row.topic, partition=row.kafka_partition,
        offset=row.kafka_offset, reason=row.reason, key=row.message_key, value=row.message_value,
        quarantined_at=row.quarantined_at, topic_id=row.topic_id, lake_path=row.lake_path,
        replayed_at=row.replayed_at, replayed_by=row.replayed_by, replay_commit=row.replay_commit,
    )


_QUARANTINE_MARK = "message at topic "
"""How the possibly-diverged mark of a quarantined message begins (:func:`diverged_text`)."""


def diverged_text(row: QuarantinedMessageRow) -> str:
    """The possibly-diverged mark a quarantined message puts on its table."""
    return one_line_text(
        f"{_QUARANTINE_MARK}{row.topic!r} partition {row.kafka_partition} offset {row.kafka_offset} "
        f"quarantined: {row.reason}"
    )


def next_mark(current: str | None, missing: Sequence[QuarantinedMessageRow]) -> str | None:
    """The possibly-diverged mark once the table's quarantined messages still missing are ``missing``:
    a mark of another cause (a commit written after the apply lock was lost) stays until a clean
    validate or a re-bootstrap's switch clears it; else the last missing message's, or none."""
    if current is not None and not current.startswith(_QUARANTINE_MARK):
        return current
    return diverged_text(missing[-1]) if missing else None
