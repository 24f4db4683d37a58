"""The state store API: lifecycle, bootstrap watermarks, applied offsets, runs and freshness.

``StateStore.open(url)`` accepts any SQLAlchemy URL (SQLite for one machine,
Postgres for a team), creates or migrates it to the newest schema and returns a store whose
methods each run in their own transaction and return plain values: the commands that write
the store open it so.  Read-only commands use ``StateStore.open_existing(url)``, which never
creates or migrates: a missing or older store is a one-line error naming ``cdc-lake migrate``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import URL, Engine, create_engine, delete, event, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from cdc_lake.exceptions import StateStoreError, UnknownTableError
from cdc_lake.redaction import private_directory, redact
from cdc_lake.state.lifecycle import TableState, check_transition
from cdc_lake.state.migrate import HEAD_REVISION, known_revision, stored_revision, upgrade_to_head
from cdc_lake.state.models import (
    AppliedOffsetRow,
    BootstrapWatermarkRow,
    FreshnessRow,
    QuarantinedMessageRow,
    RebootstrapRow,
    RunRow,
    SourceRow,
    TableRow,
    utcnow,
)
from cdc_lake.state.records import (
    BootstrapPartition,
    CurrentCopy,
    Freshness,
    QuarantinedMessage,
    Rebootstrap,
    RebootstrapPhase,
    Run,
    RunHandle,
    RunOutcome,
    SourceInfo,
    TableInfo,
    Watermark,
)

SQLITE_BUSY_TIMEOUT_SECONDS = 30


class StateStore:
    """Typed access to the state store database."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def open(cls, url: str) -> StateStore:
        """Connect to ``url``, create or upgrade its schema, and return the store (for writers)."""
        return cls.migrate(url)[0]

    @classmethod
    def migrate(cls, url: str) -> tuple[StateStore, str | None]:
        """Like :meth:`open`; also returns the schema revision the store was at (None: created now)."""
        parsed = _parse(url)
        from alembic.util import CommandError

        try:
            engine = _create_engine(parsed)
            before = upgrade_to_head(engine)
        except (SQLAlchemyError, OSError) as exc:
            raise StateStoreError(f"state store {_shown(parsed)}: cannot open: {_one_line(exc)}") from None
        except CommandError as exc:
            # The database was migrated by a newer cdc-lake whose revisions this one does not know.
            raise StateStoreError(f"state store {_shown(parsed)}: cannot migrate: {_one_line(exc)}") from None
        return cls(engine), before

    @classmethod
    def open_existing(cls, url: str) -> StateStore:
        """Connect to the store at ``url`` for reading; never creates or migrates it.

        Raises StateStoreError naming ``cdc-lake migrate`` when the store does not exist, has no schema
        or is at an older revision (one query, no Alembic), and naming the upgrade of cdc-lake when a
        newer one migrated it.
        """
        parsed = _parse(url)
        shown = _shown(parsed)
        if _sqlite_file(parsed) and not Path(str(parsed.database)).is_file():
            raise StateStoreError(f"state store {shown}: does not exist; create it with cdc-lake migrate")
        try:
            engine = _create_engine(parsed, create=False)
            with engine.connect() as connection:
                revision = stored_revision(connection)
        except (SQLAlchemyError, OSError) as exc:
            raise StateStoreError(f"state store {shown}: cannot open: {_one_line(exc)}") from None
        if revision != HEAD_REVISION:
            engine.dispose()
            raise StateStoreError(f"state store {shown}: {_revision_problem(revision)}")
        return cls(engine)

    def close(self) -> None:
        """Release the database connections."""
        self._engine.dispose()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        try:
            with self._sessions.begin() as session:
                yield session
        except SQLAlchemyError as exc:
            raise StateStoreError(f"state store: {_one_line(exc)}") from None

    # Sources and tables

    def upsert_source(self, name: str, engine: str, connector_names: Sequence[str] = ()) -> SourceInfo:
        """Record an onboarded source; a second call only updates what changed."""
        with self._transaction() as session:
            row = session.get(SourceRow, name)
            if row is None:
                row = SourceRow(
                    name=name, engine=engine, onboarded_at=utcnow(), connector_names=list(connector_names)
                )
                session.add(row)
            else:
                if row.engine != engine:
                    row.engine = engine
                if row.connector_names != list(connector_names):
                    row.connector_names = list(connector_names)
            return _source_info(row)

    def get_source(self, name: str) -> SourceInfo | None:
        """The onboarded source called ``name``, if any."""
        with self._transaction() as session:
            row = session.get(SourceRow, name)
            return None if row is None else _source_info(row)

    def upsert_table(self, qualified_name: str, source: str, tier: int, lake_base_path: str) -> TableInfo:
        """Record a table as PENDING_BOOTSTRAP, or update its tier and path; its state is never touched.

        Re-running with the same values changes nothing, not even ``updated_at``.
        """
        with self._transaction() as session:
            if session.get(SourceRow, source) is None:
                raise StateStoreError(f"table {qualified_name}: source {source} is not onboarded")
            row = session.get(TableRow, qualified_name)
            if row is None:
                row = TableRow(
                    qualified_name=qualified_name,
                    source=source,
                    tier=tier,
                    state=TableState.PENDING_BOOTSTRAP.value,
                    lake_base_path=lake_base_path,
                    last_error=None,
                    updated_at=utcnow(),
                )
                session.add(row)
            elif row.source != source:
                raise StateStoreError(f"table {qualified_name}: belongs to source {row.source}, not {source}")
            elif (row.tier, row.lake_base_path) != (tier, lake_base_path):
                row.tier = tier
                # A re-bootstrapped table lives in a versioned path derived from the configured one.
                if not row.lake_base_path.startswith(versioned_path(lake_base_path, 0)[:-1]):
                    row.lake_base_path = lake_base_path
                row.updated_at = utcnow()
            return _table_info(row)

    def get_table(self, qualified_name: str) -> TableInfo | None:
        """The table called ``source.schema.table``, if it was onboarded."""
        with self._transaction() as session:
            row = session.get(TableRow, qualified_name)
            return None if row is None else _table_info(row)

    def require_table(self, qualified_name: str) -> TableInfo:
        """Like :meth:`get_table`, but a table never onboarded is an error."""
        table = self.get_table(qualified_name)
        if table is None:
            raise UnknownTableError(f"table {qualified_name} is not onboarded (run cdc-lake onboard first)")
        return table

    def current_copy(self, qualified_name: str) -> CurrentCopy:
        """The table's current lake copy: its base path, last commit, applied offsets and freshness.

        The one answer to "which copy is the table" for every verb (``status``, ``lag`` and the
        metrics, ``validate``, the catalog sync, ``rebootstrap --remove-old``) and for the applier:
        the path a re-bootstrap switched to, with what the switch recorded of it.
        """
        with self._transaction() as session:
            row = self._require_row(session, qualified_name)
            offsets = list(
                session.scalars(select(AppliedOffsetRow).where(AppliedOffsetRow.table_name == qualified_name))
            )
            fresh = session.get(FreshnessRow, qualified_name)
            return CurrentCopy(
                table=qualified_name,
                path=row.lake_base_path,
                last_commit=max((o.hudi_commit_instant for o in offsets), default=None),
                applied_offsets={o.kafka_partition: o.next_offset for o in offsets},
                freshness=None if fresh is None else _freshness(fresh),
            )

    def list_tables(self, source: str | None = None) -> list[TableInfo]:
        """Every onboarded table (of ``source`` if given), by name."""
        query = select(TableRow).order_by(TableRow.qualified_name)
        if source is not None:
            query = query.where(TableRow.source == source)
        with self._transaction() as session:
            return [_table_info(row) for row in session.scalars(query)]

    def transition(self, qualified_name: str, new_state: TableState, error: str | None = None) -> TableInfo:
        """Move a table to ``new_state`` if its lifecycle allows it; ``error`` is required for FAILED.

        ``last_error`` becomes ``error`` (so a successful transition clears it).
        """
        if new_state is TableState.FAILED and not error:
            raise StateStoreError(f"table {qualified_name}: a transition to FAILED needs an error message")
        with self._transaction() as session:
            row = session.scalars(
                select(TableRow).where(TableRow.qualified_name == qualified_name).with_for_update()
            ).one_or_none()
            if row is None:
                raise UnknownTableError(
                    f"table {qualified_name} is not onboarded (run cdc-lake onboard first)"
                )
            check_transition(qualified_name, TableState(row.state), new_state)
            row.state = new_state.value
            row.last_error = None if error is None else _one_line_text(error)
            row.updated_at = utcnow()
            return _table_info(row)

    # Bootstrap watermarks

    def save_watermark(
        self,
        table: str,
        *,
        topic: str,
        offsets: Mapping[int, int],
        ts_source_ms: int | None,
        source_position: str | None,
        partitions: Sequence[BootstrapPartition] = (),
        history_offset: int | None = None,
    ) -> Watermark:
        """Save the hand-off point of a new bootstrap, replacing any earlier one of ``table``;
        ``history_offset``: the end of the table's schema history now (swaps before it are the copy's), or
        one past its newest logged rewrite (:class:`~cdc_lake.state.records.Watermark`)."""
        with self._transaction() as session:
            self._require_row(session, table)
            session.execute(delete(BootstrapWatermarkRow).where(BootstrapWatermarkRow.table_name == table))
            row = BootstrapWatermarkRow(
                table_name=table,
                topic=topic,
                kafka_offsets={str(partition): offset for partition, offset in offsets.items()},
                ts_source_ms=ts_source_ms,
                source_position=source_position,
                created_at=utcnow(),
                replica_position_reached=False,
                partition_plan=[_partition_json(p) for p in partitions],
                history_offset=history_offset,
            )
            session.add(row)
            return _watermark(row)

    def get_watermark(self, table: str) -> Watermark | None:
        """The current bootstrap watermark of ``table``, if a bootstrap has started."""
        with self._transaction() as session:
            row = session.get(BootstrapWatermarkRow, table)
            return None if row is None else _watermark(row)

    def mark_replica_position_reached(self, table: str) -> Watermark:
        """Record that the read replica has replayed past the watermark."""
        with self._transaction() as session:
            row = self._require_watermark(session, table)
            row.replica_position_reached = True
            return _watermark(row)

    def set_partition_plan(self, table: str, partitions: Sequence[BootstrapPartition]) -> Watermark:
        """Replace the bootstrap's partition plan (each partition one WHERE predicate)."""
        with self._transaction() as session:
            row = self._require_watermark(session, table)
            row.partition_plan = [_partition_json(p) for p in partitions]
            return _watermark(row)

    def set_history_offset(self, table: str, offset: int) -> bool:
        """Record that ``table``'s schema history (or rewrite log) is checked up to ``offset``; False
        without a watermark
        (the table was never bootstrapped: nothing to record it with)."""
        with self._transaction() as session:
            row = session.get(BootstrapWatermarkRow, table)
            if row is None:
                return False
            row.history_offset = offset
            return True

    def mark_partition_done(self, table: str, index: int) -> Watermark:
        """Record that partition ``index`` of the bootstrap plan is in the lake."""
        with self._transaction() as session:
            row = self._require_watermark(session, table)
            plan = [dict(p) for p in row.partition_plan]
            matching = [p for p in plan if p["index"] == index]
            if not matching:
                raise StateStoreError(f"table {table}: bootstrap plan has no partition {index}")
            matching[0]["done"] = True
            row.partition_plan = plan
            return _watermark(row)

    # Applied offsets

    def record_applied_offsets(self, table: str, offsets: Mapping[int, int], commit_instant: str) -> None:
        """Record the next offset to apply per partition after the Hudi commit ``commit_instant``."""
        now = utcnow()
        with self._transaction() as session:
            self._require_row(session, table)
            for partition, next_offset in offsets.items():
                row = session.get(AppliedOffsetRow, (table, partition))
                if row is None:
                    row = AppliedOffsetRow(table_name=table, kafka_partition=partition)
                    session.add(row)
                row.next_offset = next_offset
                row.hudi_commit_instant = commit_instant
                row.updated_at = now

    def get_applied_offsets(self, table: str) -> dict[int, int]:
        """The next offset to apply per partition of ``table``'s topic (empty before the first apply)."""
        query = select(AppliedOffsetRow).where(AppliedOffsetRow.table_name == table)
        with self._transaction() as session:
            return {row.kafka_partition: row.next_offset for row in session.scalars(query)}

    def last_commit_instant(self, table: str) -> str | None:
        """The newest Hudi commit instant recorded with applied offsets of ``table``."""
        query = select(func.max(AppliedOffsetRow.hudi_commit_instant)).where(
            AppliedOffsetRow.table_name == table
        )
        with self._transaction() as session:
            return session.scalar(query)

    def reset_progress(self, table: str) -> None:
        """Forget the watermark, applied offsets and freshness of ``table`` before a re-bootstrap."""
        with self._transaction() as session:
            self._require_row(session, table)
            for model in (BootstrapWatermarkRow, AppliedOffsetRow, FreshnessRow):
                session.execute(delete(model).where(model.table_name == table))

    # Quarantine and divergence

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
                reason=_one_line_text(reason), message_key=key, message_value=value, quarantined_at=utcnow(),
                topic_id=topic_id, lake_path=lake_path,
            )
            session.add(row)
            table_row.possibly_diverged = _diverged_text(row)
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
            rows = self._quarantine_rows(session, table)
            gone = [r for r in rows if (r.kafka_partition, r.kafka_offset) == (partition, offset)]
            if not gone:
                raise StateStoreError(
                    f"table {table}: no quarantined message at partition {partition} offset {offset}"
                )
            for row in gone:
                session.delete(row)
            left = [r for r in rows if r not in gone]
            table_row.possibly_diverged = _diverged_text(left[-1]) if left else None
            table_row.updated_at = utcnow()
            return _table_info(table_row)

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
            rows = self._quarantine_rows(session, table)
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
            table_row.possibly_diverged = _diverged_text(missing[-1]) if missing else None
            table_row.updated_at = now
            return _table_info(table_row)

    @staticmethod
    def _quarantine_rows(session: Session, table: str) -> list[QuarantinedMessageRow]:
        query = select(QuarantinedMessageRow).where(QuarantinedMessageRow.table_name == table)
        return list(session.scalars(query.order_by(QuarantinedMessageRow.id)))

    def clear_possibly_diverged(self, table: str) -> TableInfo:
        """Record that the lake copy of ``table`` is known equal to the source again (a clean validate)."""
        with self._transaction() as session:
            row = self._require_row(session, table)
            row.possibly_diverged = None
            row.updated_at = utcnow()
            return _table_info(row)

    # Re-bootstraps

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
                reason=_one_line_text(reason) or "operator request", phase=RebootstrapPhase.COPYING.value,
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
        (LIVE); its error is cleared; the old path may be removed after ``keep``.  ``latest`` is the
        copy's latest Hudi commit and the offsets it holds (read from its timeline by the caller): they
        become the table's applied offsets, so the new copy's commit and offsets show at once even when
        the applier never committed to it (only its bootstrap did).

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
            for model in (BootstrapWatermarkRow, AppliedOffsetRow, FreshnessRow):
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
                        hudi_commit_instant=instant, updated_at=now,
                    )
                    for partition, offset in offsets.items()
                )
            self._drop_copy(session, row.copy_name)
            table_row.lake_base_path = row.new_path
            table_row.state = TableState.LIVE.value
            table_row.last_error = None
            table_row.possibly_diverged = _diverged_text(kept[-1]) if kept else None
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
        for quarantined in self._quarantine_rows(session, table):
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

    # Runs

    def start_run(
        self, command: str, table: str | None = None, detail: Mapping[str, Any] | None = None
    ) -> int:
        """Record that ``command`` started (on ``table``); returns the run id."""
        with self._transaction() as session:
            row = RunRow(command=command, table_name=table, started_at=utcnow(), detail=dict(detail or {}))
            session.add(row)
            session.flush()
            return row.id

    def finish_run(self, run_id: int, outcome: RunOutcome, detail: Mapping[str, Any] | None = None) -> None:
        """Record how run ``run_id`` ended; ``detail`` replaces the detail saved at start if given."""
        with self._transaction() as session:
            row = session.get(RunRow, run_id)
            if row is None:
                raise StateStoreError(f"run {run_id} does not exist")
            row.finished_at = utcnow()
            row.outcome = outcome.value
            if detail is not None:
                row.detail = dict(detail)

    @contextmanager
    def run(self, command: str, table: str | None = None) -> Iterator[RunHandle]:
        """Record a run around a block: ok when it returns, failed on an exception, aborted on Ctrl-C.

        Whatever the block puts in ``handle.detail`` is saved; a failure adds ``error``.
        """
        handle = RunHandle(self.start_run(command, table))
        try:
            yield handle
        except (KeyboardInterrupt, SystemExit) as exc:
            self.finish_run(handle.id, RunOutcome.ABORTED, {**handle.detail, "error": type(exc).__name__})
            raise
        except Exception as exc:
            error = _one_line_text(f"{type(exc).__name__}: {exc}")
            self.finish_run(handle.id, RunOutcome.FAILED, {**handle.detail, "error": error})
            raise
        self.finish_run(handle.id, RunOutcome.OK, handle.detail)

    def list_runs(self, table: str | None = None, limit: int = 50) -> list[Run]:
        """The newest runs first (of ``table`` if given)."""
        query = select(RunRow).order_by(RunRow.id.desc()).limit(limit)
        if table is not None:
            query = query.where(RunRow.table_name == table)
        with self._transaction() as session:
            return [_run(row) for row in session.scalars(query)]

    # Freshness

    def record_freshness(
        self,
        table: str,
        newest_source_ts_ms: int | None,
        lag_messages: int,
        measured_at: datetime | None = None,
    ) -> Freshness:
        """Record the newest applied source change time of ``table`` and its Kafka lag in messages."""
        with self._transaction() as session:
            self._require_row(session, table)
            row = session.get(FreshnessRow, table)
            if row is None:
                row = FreshnessRow(table_name=table)
                session.add(row)
            row.newest_source_ts_ms = newest_source_ts_ms
            row.lag_messages = lag_messages
            row.measured_at = measured_at or utcnow()
            return _freshness(row)

    def get_freshness(self, table: str) -> Freshness | None:
        """The latest freshness measurement of ``table``, if any."""
        with self._transaction() as session:
            row = session.get(FreshnessRow, table)
            return None if row is None else _freshness(row)

    @staticmethod
    def _require_row(session: Session, table: str) -> TableRow:
        row = session.get(TableRow, table)
        if row is None:
            raise UnknownTableError(f"table {table} is not onboarded (run cdc-lake onboard first)")
        return row

    @staticmethod
    def _require_watermark(session: Session, table: str) -> BootstrapWatermarkRow:
        row = session.get(BootstrapWatermarkRow, table)
        if row is None:
            raise StateStoreError(f"table {table}: no bootstrap watermark saved")
        return row


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise StateStoreError("state_store.url is not a SQLAlchemy database URL") from None


def _shown(url: URL) -> str:
    """``url`` as errors show it: without its password."""
    return url.render_as_string(hide_password=True)


def _revision_problem(revision: str | None) -> str:
    """Why a store at schema ``revision`` cannot be read by this cdc-lake, and what to run."""
    if revision is None:
        return "has no cdc-lake schema; create it with cdc-lake migrate"
    if known_revision(revision):
        return (
            f"schema revision {revision}, this cdc-lake needs {HEAD_REVISION}; "
            "upgrade it with cdc-lake migrate"
        )
    return f"schema revision {revision} is newer than this cdc-lake knows ({HEAD_REVISION}); upgrade cdc-lake"


def _sqlite_file(url: URL) -> bool:
    """Whether ``url`` is a SQLite database in a file named by its path (not in memory, not a URI)."""
    database = url.database or ""
    return url.get_backend_name() == "sqlite" and database not in ("", ":memory:") and not (
        database.startswith("file:")
    )


def _create_engine(url: URL, create: bool = True) -> Engine:
    """An engine for ``url``; with ``create``, a SQLite file's directory is made (private) if missing."""
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    database = url.database
    if not database or database == ":memory:":
        # One shared connection, or every session would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        if create and _sqlite_file(url):
            private_directory(Path(database).parent)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
    event.listen(engine, "connect", _enable_sqlite_foreign_keys)
    return engine


def _enable_sqlite_foreign_keys(dbapi_connection: Any, connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _one_line(exc: BaseException) -> str:
    """The first line of a database error (driver messages run over several lines), secrets redacted."""
    original = getattr(exc, "orig", None)
    return _one_line_text(str(original if original is not None else exc))


def _one_line_text(text: str) -> str:
    lines = [line.strip() for line in redact(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def _partition_json(partition: BootstrapPartition) -> dict[str, Any]:
    return {"index": partition.index, "predicate": partition.predicate, "done": partition.done}


def _source_info(row: SourceRow) -> SourceInfo:
    return SourceInfo(
        name=row.name,
        engine=row.engine,
        onboarded_at=row.onboarded_at,
        connector_names=tuple(row.connector_names),
    )


def _table_info(row: TableRow) -> TableInfo:
    return TableInfo(
        qualified_name=row.qualified_name,
        source=row.source,
        tier=row.tier,
        state=TableState(row.state),
        lake_base_path=row.lake_base_path,
        last_error=row.last_error,
        updated_at=row.updated_at,
        possibly_diverged=row.possibly_diverged,
    )


def versioned_path(base_path: str, version: int) -> str:
    """The base path of version ``version`` of a table configured at ``base_path`` (a sibling directory)."""
    return f"{base_path.rstrip('/')}__v{version}"


def _quarantined(row: QuarantinedMessageRow) -> QuarantinedMessage:
    return QuarantinedMessage(
        id=row.id, table=row.table_name, topic=row.topic, partition=row.kafka_partition,
        offset=row.kafka_offset, reason=row.reason, key=row.message_key, value=row.message_value,
        quarantined_at=row.quarantined_at, topic_id=row.topic_id, lake_path=row.lake_path,
        replayed_at=row.replayed_at, replayed_by=row.replayed_by, replay_commit=row.replay_commit,
    )


def _diverged_text(row: QuarantinedMessageRow) -> str:
    """The possibly-diverged mark a quarantined message puts on its table."""
    return _one_line_text(
        f"message at topic {row.topic!r} partition {row.kafka_partition} offset {row.kafka_offset} "
        f"quarantined: {row.reason}"
    )


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


def _watermark(row: BootstrapWatermarkRow) -> Watermark:
    return Watermark(
        table=row.table_name,
        topic=row.topic,
        offsets={int(partition): offset for partition, offset in row.kafka_offsets.items()},
        ts_source_ms=row.ts_source_ms,
        source_position=row.source_position,
        created_at=row.created_at,
        replica_position_reached=row.replica_position_reached,
        partitions=tuple(
            BootstrapPartition(index=p["index"], predicate=p["predicate"], done=p["done"])
            for p in row.partition_plan
        ),
        history_offset=row.history_offset,
    )


def _run(row: RunRow) -> Run:
    return Run(
        id=row.id,
        command=row.command,
        table=row.table_name,
        started_at=row.started_at,
        finished_at=row.finished_at,
        outcome=None if row.outcome is None else RunOutcome(row.outcome),
        detail=dict(row.detail),
    )


def _freshness(row: FreshnessRow) -> Freshness:
    return Freshness(
        table=row.table_name,
        newest_source_ts_ms=row.newest_source_ts_ms,
        lag_messages=row.lag_messages,
        measured_at=row.measured_at,
    )
