"""Re-bootstraps: a table's new copy, built beside it, switched in (with its progress) or aborted."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from cdc_lake.exceptions import StateStoreError
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.models import (
    AppliedOffsetRow,
    BootstrapWatermarkRow,
    FreshnessRow,
    QuarantinedMessageRow,
    RebootstrapRow,
    RecaptureRow,
    TableRow,
    utcnow,
)
from cdc_lake.state.quarantine_store import diverged_text, quarantine_rows
from cdc_lake.state.records import Rebootstrap, RebootstrapPhase
from cdc_lake.state.session import StoreSession, one_line_text


class RebootstrapStore(StoreSession):
    """Each table's re-bootstraps, by version, through their phases."""

    def start_rebootstrap(
        self, table: str, reason: str, new_path_for: Callable[[int], str], read_from: str | None = None
    ) -> Rebootstrap:
        """The table's unfinished re-bootstrap, or a new one (the next version) into ``new_path_for(v)``
        whose copy is read from ``read_from`` (None: as the config says)."""
        with self._transaction() as session:
            table_row = self._require_row(session, table)
            query = select(RebootstrapRow).where(RebootstrapRow.table_name == table)
            rows = list(session.scalars(query.order_by(RebootstrapRow.version)))
            open_rows = [r for r in rows if r.phase == RebootstrapPhase.COPYING.value]
            if open_rows:
                return _rebootstrap(open_rows[-1])
            version = max((r.version for r in rows), default=1) + 1
            row = RebootstrapRow(
                table_name=table, version=version, copy_name=f"{table}~v{version}",
                old_path=table_row.lake_base_path, new_path=new_path_for(version),
                reason=one_line_text(reason) or "operator request", phase=RebootstrapPhase.COPYING.value,
                started_at=utcnow(), switched_at=None, remove_after=None, read_from=read_from,
            )
            session.add(row)
            return _rebootstrap(row)

    def rebootstraps(self, table: str | None = None) -> list[Rebootstrap]:
        """Every recorded re-bootstrap (of ``table`` if given), oldest first."""
        query = select(RebootstrapRow).order_by(RebootstrapRow.table_name, RebootstrapRow.version)
        if table is not None:
            query = query.where(RebootstrapRow.table_name == table)
        with self._transaction() as session:
            return [_rebootstrap(row) for row in session.scalars(query)]

    def switch_rebootstrap(
        self,
        table: str,
        version: int,
        keep: timedelta,
        latest: tuple[str, Mapping[int, int]] | None = None,
        topic_id: str | None = None,
    ) -> Rebootstrap:
        """Make the caught-up copy the table, in one transaction; the copy's own rows go.

        The table takes the copy's base path, bootstrap watermark, applied offsets, freshness and state
        (LIVE); its error and a pending recapture (:mod:`cdc_lake.state.recaptures`) are cleared; the old
        path may be removed after ``keep``.  ``latest`` is the copy's latest Hudi commit and the offsets
        it holds (read from its timeline by the caller): they become the table's applied offsets, so the
        new copy's commit and offsets show at once even when the applier never committed to it (only its
        bootstrap did).

        The table's quarantine follows the copy (:func:`_still_missing`): a row the copy also lacks stays,
        bound to the new path, and keeps the possibly-diverged mark; every other row goes, and the mark
        with the last one.  ``topic_id`` is the Kafka id of the topic the copy read (None: not known).
        """
        now = utcnow()
        with self._transaction() as session:
            row = self._require_rebootstrap(session, table, version, RebootstrapPhase.COPYING)
            table_row = self._require_row(session, table)
            copy_row = self._require_row(session, row.copy_name)
            if copy_row.state != TableState.LIVE.value:
                raise StateStoreError(f"table {table}: the re-bootstrap copy is {copy_row.state}, not LIVE")
            watermark = session.get(BootstrapWatermarkRow, row.copy_name)
            kept = self._follow_copy(session, table, row.new_path, watermark, topic_id)
            for model in (BootstrapWatermarkRow, AppliedOffsetRow, FreshnessRow, RecaptureRow):
                session.execute(delete(model).where(model.table_name == table))
            session.flush()
            moved = (BootstrapWatermarkRow, FreshnessRow, *((AppliedOffsetRow,) if latest is None else ()))
            for model in moved:
                for copied in session.scalars(select(model).where(model.table_name == row.copy_name)):
                    copied.table_name = table
            session.flush()
            if latest is not None:
                instant, offsets = latest
                session.add_all(
                    AppliedOffsetRow(
                        table_name=table, kafka_partition=partition, next_offset=offset,
                        commit_instant=instant, updated_at=now,
                    )
                    for partition, offset in offsets.items()
                )
            self._drop_copy(session, row.copy_name)
            table_row.lake_base_path = row.new_path
            table_row.state = TableState.LIVE.value
            table_row.last_error = None
            table_row.possibly_diverged = diverged_text(kept[-1]) if kept else None
            table_row.updated_at = now
            row.phase = RebootstrapPhase.SWITCHED.value
            row.switched_at = now
            row.remove_after = now + keep
            return _rebootstrap(row)

    def _follow_copy(
        self,
        session: Session,
        table: str,
        new_path: str,
        watermark: BootstrapWatermarkRow | None,
        topic_id: str | None,
    ) -> list[QuarantinedMessageRow]:
        """Keep the quarantine rows the switched-to copy still lacks (bound to ``new_path``), drop others."""
        kept = []
        for quarantined in quarantine_rows(session, table):
            if _still_missing(quarantined, watermark, topic_id):
                quarantined.lake_path = new_path
                kept.append(quarantined)
            else:
                session.delete(quarantined)
        return kept

    def abort_rebootstrap(self, table: str, version: int) -> Rebootstrap:
        """Forget an unfinished re-bootstrap's copy (its new path is the caller's to remove)."""
        with self._transaction() as session:
            row = self._require_rebootstrap(session, table, version, RebootstrapPhase.COPYING)
            self._drop_copy(session, row.copy_name)
            row.phase = RebootstrapPhase.ABORTED.value
            return _rebootstrap(row)

    def mark_old_path_removed(self, table: str, version: int) -> Rebootstrap:
        """Record that the old base path of a switched re-bootstrap was removed."""
        with self._transaction() as session:
            row = self._require_rebootstrap(session, table, version, RebootstrapPhase.SWITCHED)
            row.phase = RebootstrapPhase.REMOVED.value
            return _rebootstrap(row)

    @staticmethod
    def _drop_copy(session: Session, copy_name: str) -> None:
        for model in (BootstrapWatermarkRow, AppliedOffsetRow, FreshnessRow):
            session.execute(delete(model).where(model.table_name == copy_name))
        session.execute(delete(TableRow).where(TableRow.qualified_name == copy_name))

    @staticmethod
    def _require_rebootstrap(
        session: Session, table: str, version: int, phase: RebootstrapPhase
    ) -> RebootstrapRow:
        row = session.get(RebootstrapRow, (table, version))
        if row is None or row.phase != phase.value:
            found = "none" if row is None else row.phase
            raise StateStoreError(f"table {table}: re-bootstrap v{version} is {found}, not {phase.value}")
        return row


def _still_missing(
    row: QuarantinedMessageRow, watermark: BootstrapWatermarkRow | None, topic_id: str | None
) -> bool:
    """Whether a re-bootstrap's copy lacks the quarantined change too.

    The copy is read from a replica snapshot that holds every change before its watermark's offsets, and
    it skips the table's quarantined offsets at or after them (the operator's decision holds for the
    message): so a row is still missing when it is of the copy's topic (same name and, when both are
    known, same Kafka id) at or after the watermark's offset of its partition.  A row of another topic
    (a topic deleted and created again) concerns a stream the copy never read: it goes.  Without a
    watermark nothing is known of the copy: every row stays.  A replayed row is never missing: the
    copy's snapshot holds its change or the copy reads the message (it skips only rows not replayed).
    """
    if row.replayed_at is not None:
        return False
    if topic_id is not None and row.topic_id is not None and row.topic_id != topic_id:
        return False
    if watermark is None:
        return True
    if row.topic != watermark.topic:
        return False
    return row.kafka_offset >= watermark.kafka_offsets.get(str(row.kafka_partition), 0)


def _rebootstrap(row: RebootstrapRow) -> Rebootstrap:
    return Rebootstrap(
        table=row.table_name, version=row.version, copy_name=row.copy_name, old_path=row.old_path,
        new_path=row.new_path, reason=row.reason, phase=RebootstrapPhase(row.phase),
        started_at=row.started_at, switched_at=row.switched_at, remove_after=row.remove_after,
        read_from=row.read_from,
    )
