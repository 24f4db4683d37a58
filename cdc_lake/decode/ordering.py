"""The source position of a change event, and its encoding as a Hudi ordering field.

The ordering field must grow with every change of one key, for the whole life of the lake table,
whatever happens to the source servers.  What grows per key by construction:

- Postgres: the change's own LSN (``source.lsn``).  Per key, change LSNs increase: the row lock taken by
  a change is held until its transaction commits.  A logical slot does not follow a Postgres failover
  (before Postgres 17 failover slots), so a failover means a re-bootstrap and LSNs never restart.
- MySQL / MariaDB: the Kafka offset of the event in its partition.  Debezium routes every event of a key
  to one partition (by the message key), in the order the binlog holds them, and offsets in a partition
  only grow.  Binlog coordinates do not qualify: ``(file number, position)`` belongs to one server, and
  after a failover to a replica (which GTID mode supports) the new server's binlog numbers can be lower
  than the old one's, so its changes would lose to the stored rows.  Offsets keep growing across the
  failover, since the connector keeps writing to the same topic.  This holds while the topic's
  partition count does not change and the topic is not re-created (both need a re-bootstrap anyway).
  A re-sent event (Debezium is at-least-once) gets a new, higher offset; it is recognised and skipped by
  :mod:`cdc_lake.apply.redelivery` instead.
- Snapshot rows (rows written by the bootstrap, Debezium ``op='r'`` events of an initial or blocking
  snapshot, and of an incremental snapshot on Postgres) have the empty tuple, which sorts below every
  streamed position: any replayed change wins over a snapshot image, which only fills a missing row.
  A blocking snapshot reads its rows *after* the point it carries (streaming resumes there and replays
  the changes made meanwhile), so it cannot be ordered higher.  An incremental snapshot's row is its
  key's state at its place in the partition (Debezium drops a chunk row whose key changed inside the
  chunk's window), so on binlog sources it gets its Kafka offset like a change: it replaces an older
  stored state and loses to every later change.  On Postgres the ``source.lsn`` it carries is its close
  marker's change LSN, which a newer change of the key (written before the marker, committed after it)
  can lie below, so it keeps the snapshot position (see :func:`cdc_lake.decode.envelope._position`).

:meth:`SourcePosition.ordering_value` encodes a position as a fixed-width, 40-character string of
decimal digits, so string order equals numeric order and the column can be a Hudi ordering field
(``hoodie.table.ordering.fields``) of type string:

============  =====================================================================
engine        digits
============  =====================================================================
Postgres      LSN, zero-padded to 40 digits (an LSN is an unsigned 64-bit number: 20 digits)
MySQL         ``1`` then the Kafka offset, zero-padded to 39 digits
snapshot      40 zeros (:data:`SNAPSHOT_ORDERING_VALUE`); no streamed position encodes to it,
              since a Postgres LSN is never 0 and a binlog value starts with ``1``
============  =====================================================================

The leading ``1`` of binlog values puts them above every value written by earlier versions of cdc-lake,
which encoded binlog coordinates as file number (10 digits, so a leading ``0``) + position + row: rows
stored that way lose to the next change of their key instead of winning over it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from cdc_lake.exceptions import DecodeError

ORDERING_WIDTH: Final = 40
#: Ordering value of every snapshot and bootstrap row: lower than any streamed change.
SNAPSHOT_ORDERING_VALUE: Final = "0" * ORDERING_WIDTH

_LSN_DIGITS: Final = 20
_OFFSET_DIGITS: Final = ORDERING_WIDTH - 1
#: First digit of binlog ordering values (see the module docstring).
_BINLOG_EPOCH: Final = 1


def _check(name: str, value: int, digits: int) -> int:
    if not 0 <= value < 10**digits:
        raise DecodeError(f"{name} {value} is outside 0..{10**digits - 1}")
    return value


@dataclass(frozen=True, order=True)
class SourcePosition:
    """A per-key totally ordered position of a change; see the module docstring.

    ``parts`` is ``()`` for snapshots, ``(lsn,)`` for Postgres and ``(1, kafka_offset)`` for binlog
    sources; positions of different engines are never compared (a table has one source).
    """

    parts: tuple[int, ...] = ()

    @classmethod
    def snapshot(cls) -> SourcePosition:
        """The position of snapshot and bootstrap rows, below every streamed change."""
        return cls(())

    @classmethod
    def postgres(cls, lsn: int) -> SourcePosition:
        """Position of a streamed Postgres change at ``lsn``."""
        if lsn == 0:
            raise DecodeError("Postgres LSN 0 is not a valid change position")
        return cls((_check("Postgres LSN", lsn, _LSN_DIGITS),))

    @classmethod
    def binlog(cls, kafka_offset: int) -> SourcePosition:
        """Position of a streamed MySQL/MariaDB change stored at ``kafka_offset`` of its partition."""
        return cls((_BINLOG_EPOCH, _check("Kafka offset", kafka_offset, _OFFSET_DIGITS)))

    @property
    def is_snapshot(self) -> bool:
        """True for the snapshot position."""
        return not self.parts

    def ordering_value(self) -> str:
        """The 40-digit string encoding of this position (see the module docstring)."""
        if not self.parts:
            return SNAPSHOT_ORDERING_VALUE
        if len(self.parts) == 1:
            return f"{self.parts[0]:0{ORDERING_WIDTH}d}"
        epoch, offset = self.parts
        return f"{epoch}{offset:0{_OFFSET_DIGITS}d}"
