"""The source position of a change event, and its encoding as a Hudi ordering field.

The ordering field must grow with every change of one key, for the whole life of the lake table,
whatever happens to the source servers.  What grows per key is the engine's to say: every engine
declares a :class:`~cdc_lake.sources.capabilities.PositionCodec` (Postgres: the change's LSN,
:mod:`cdc_lake.sources.postgres.codec`; MySQL / MariaDB: the event's Kafka offset in its partition,
:mod:`cdc_lake.sources.mysql.codec`), and :meth:`SourcePosition.streamed` asks it.  Positions of
different engines are never compared (a table has one source).

Snapshot rows (rows written by the bootstrap, Debezium ``op='r'`` events of an initial or blocking
snapshot, and of an incremental snapshot on Postgres) have the empty tuple, which sorts below every
streamed position: any replayed change wins over a snapshot image, which only fills a missing row.
A blocking snapshot reads its rows *after* the point it carries (streaming resumes there and replays
the changes made meanwhile), so it cannot be ordered higher.  An incremental snapshot's row is its
key's state at its place in the partition (Debezium drops a chunk row whose key changed inside the
chunk's window), so where the ordering is that place (binlog sources: the Kafka offset) it is ordered
like a change: it replaces an older stored state and loses to every later change.  On Postgres the
``source.lsn`` it carries is its close marker's change LSN, which a newer change of the key (written
before the marker, committed after it) can lie below, so it keeps the snapshot position
(``PositionCodec.orders_incremental_snapshots``; :func:`cdc_lake.decode.envelope._position`).

:meth:`SourcePosition.ordering_value` is a fixed-width, 40-character string of decimal digits, so
string order equals numeric order and the column can be a Hudi ordering field
(``hoodie.table.ordering.fields``) of type string: each engine's codec encodes its positions
(Postgres: the LSN zero-padded; binlog sources: ``1`` then the offset zero-padded to 39 digits), and
snapshots are 40 zeros (:data:`SNAPSHOT_ORDERING_VALUE`), which no streamed position encodes to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cdc_lake.exceptions import DecodeError
from cdc_lake.sources.capabilities import ORDERING_WIDTH, PositionCodec

__all__ = ["ORDERING_WIDTH", "SNAPSHOT_ORDERING_VALUE", "SourcePosition"]

#: Ordering value of every snapshot and bootstrap row: lower than any streamed change.
SNAPSHOT_ORDERING_VALUE: Final = "0" * ORDERING_WIDTH


@dataclass(frozen=True, order=True)
class SourcePosition:
    """A per-key totally ordered position of a change; see the module docstring.

    ``parts`` is ``()`` for snapshots and what the engine's codec reads otherwise (``(lsn,)`` for
    Postgres, ``(1, kafka_offset)`` for binlog sources); ``value`` is its ordering value.
    """

    parts: tuple[int, ...] = ()
    value: str = field(default=SNAPSHOT_ORDERING_VALUE, compare=False)

    @classmethod
    def snapshot(cls) -> SourcePosition:
        """The position of snapshot and bootstrap rows, below every streamed change."""
        return cls(())

    @classmethod
    def streamed(cls, codec: PositionCodec, source: Mapping[str, Any], kafka_offset: int) -> SourcePosition:
        """Position of a streamed change with ``source`` block at ``kafka_offset``, as its engine reads it."""
        parts = codec.ordering(source, kafka_offset)
        value = codec.ordering_value(parts)
        if not parts or len(value) != ORDERING_WIDTH or not value.isdigit() or not value.strip("0"):
            name = type(codec).__name__
            raise DecodeError(f"{name} encoded {parts} as {value!r}, not a streamed ordering value")
        return cls(parts, value)

    @property
    def is_snapshot(self) -> bool:
        """True for the snapshot position."""
        return not self.parts

    def ordering_value(self) -> str:
        """The 40-digit string encoding of this position (see the module docstring)."""
        return self.value
