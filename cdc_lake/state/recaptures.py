"""Recaptures: tables whose capture restarted on a new primary without a copy, until a repair proves them.

After a Postgres failover the lake keeps its copies (``cdc-lake onboard SOURCE --after-failover``): the
new connector streams from a new slot into the same topics, after the old connector's messages.  Its
positions are not comparable with the old primary's, so the table records where in the topic the new
capture starts (re-send marks from before it skip nothing after it, :mod:`cdc_lake.apply.plan`) and the
new primary's fork point as an ordering value (lake rows above it came from transactions the new primary
never received, or from the new capture: ``cdc-lake repair`` rewrites them all).  The row goes when a
repair has done so (a clean ``validate`` then clears the possibly-diverged mark, which it cannot while
the row is there), or when a new copy replaces the table's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete

from cdc_lake.state.models import RecaptureRow, utcnow
from cdc_lake.state.session import StoreSession, one_line_text


@dataclass(frozen=True)
class Recapture:
    """Where a table's capture on its new primary starts: per partition, its first Kafka offset, and the
    ordering value of the primary's fork point."""

    table: str
    topic: str
    offsets: dict[int, int]
    fork_ordering: str
    created_at: datetime


class RecaptureStore(StoreSession):
    """Each table's pending recapture (at most one)."""

    def start_recapture(
        self, table: str, topic: str, offsets: Mapping[int, int], fork_ordering: str, why: str
    ) -> Recapture:
        """Record (or replace) ``table``'s recapture and mark it possibly diverged for ``why``."""
        with self._transaction() as session:
            table_row = self._require_row(session, table)
            session.execute(delete(RecaptureRow).where(RecaptureRow.table_name == table))
            row = RecaptureRow(
                table_name=table, topic=topic, kafka_offsets={str(p): int(o) for p, o in offsets.items()},
                fork_ordering=fork_ordering, created_at=utcnow(),
            )
            session.add(row)
            table_row.possibly_diverged = one_line_text(why)
            table_row.updated_at = utcnow()
            return _recapture(row)

    def recapture(self, table: str) -> Recapture | None:
        """``table``'s pending recapture, if any."""
        with self._transaction() as session:
            row = session.get(RecaptureRow, table)
            return None if row is None else _recapture(row)

    def finish_recapture(self, table: str) -> None:
        """Forget ``table``'s recapture: a repair rewrote its keys.  The possibly-diverged mark stays, saying
        so, until a clean ``validate`` proves the table equal."""
        with self._transaction() as session:
            table_row = self._require_row(session, table)
            if session.get(RecaptureRow, table) is None:
                return
            session.execute(delete(RecaptureRow).where(RecaptureRow.table_name == table))
            table_row.possibly_diverged = (
                f"repaired after its recapture on a promoted primary: cdc-lake validate {table} proves it"
            )
            table_row.updated_at = utcnow()


def _recapture(row: RecaptureRow) -> Recapture:
    return Recapture(
        table=row.table_name, topic=row.topic,
        offsets={int(p): int(o) for p, o in row.kafka_offsets.items()},
        fork_ordering=row.fork_ordering, created_at=row.created_at,
    )
