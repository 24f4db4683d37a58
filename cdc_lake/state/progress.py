"""A table's replication progress: its bootstrap watermark and plan, and the offsets applied since."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from cdc_lake.exceptions import StateStoreError
from cdc_lake.state.models import AppliedOffsetRow, BootstrapWatermarkRow, FreshnessRow, RecaptureRow, utcnow
from cdc_lake.state.records import BootstrapPartition, Watermark
from cdc_lake.state.session import StoreSession


class ProgressStore(StoreSession):
    """Bootstrap watermarks (the hand-off point, the partition plan) and applied Kafka offsets."""

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
        topic_id: str | None = None,
    ) -> Watermark:
        """Save the hand-off point of a new bootstrap, replacing any earlier one of ``table``;
        ``history_offset``: the end of the table's schema history now (swaps before it are the copy's), or
        one past its newest logged rewrite; ``topic_id``: the Kafka id of ``topic`` whose ``offsets`` these
        are (:class:`~cdc_lake.state.records.Watermark`).  A new copy ends a pending recapture of the
        table (:mod:`cdc_lake.state.recaptures`)."""
        with self._transaction() as session:
            self._require_row(session, table)
            for model in (BootstrapWatermarkRow, RecaptureRow):
                session.execute(delete(model).where(model.table_name == table))
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
                topic_id=topic_id,
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

    @staticmethod
    def _require_watermark(session: Session, table: str) -> BootstrapWatermarkRow:
        row = session.get(BootstrapWatermarkRow, table)
        if row is None:
            raise StateStoreError(f"table {table}: no bootstrap watermark saved")
        return row

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
                row.commit_instant = commit_instant
                row.updated_at = now

    def get_applied_offsets(self, table: str) -> dict[int, int]:
        """The next offset to apply per partition of ``table``'s topic (empty before the first apply)."""
        query = select(AppliedOffsetRow).where(AppliedOffsetRow.table_name == table)
        with self._transaction() as session:
            return {row.kafka_partition: row.next_offset for row in session.scalars(query)}

    def last_commit_instant(self, table: str) -> str | None:
        """The newest Hudi commit instant recorded with applied offsets of ``table``."""
        query = select(func.max(AppliedOffsetRow.commit_instant)).where(
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


def _partition_json(partition: BootstrapPartition) -> dict[str, Any]:
    return {"index": partition.index, "predicate": partition.predicate, "done": partition.done}


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
        topic_id=row.topic_id,
    )
