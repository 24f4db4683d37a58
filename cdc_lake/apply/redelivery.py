"""Recognising change events Debezium sent again after a restart, by their position in the change stream.

Debezium is at-least-once: after a Connect crash a task re-sends the events after its last committed
source offset, which Kafka then holds twice.  Replaying them is harmless for rows that still exist
(Hudi keeps the row with the higher ordering value), but a hard-deleted row has no ordering value left:
an old event replayed in a later batch than its delete would bring the row back until the replayed
delete arrives.  So every commit stores, per Kafka partition, the highest stream position applied, and
the next batches skip events at or below it.

A stream position orders events as Debezium emits them, which the per-key ordering value does not:

- Postgres: ``source.sequence`` = ``[last commit LSN, change LSN]``.  Transactions are emitted in commit
  order and changes inside one in LSN order, so the pair grows with every event, although change LSNs
  alone go back when transactions interleave (a transaction that began earlier commits later).
- MySQL/MariaDB: ``(binlog file number, position, row)`` of one server, the order the binlog is read in.
  Positions of different servers (after a failover) are not comparable: a position is tagged with its
  ``server_id`` and only compared with the same server's.

Snapshot reads and events without a complete position are never skipped.  Encoded as
``"<server>:<digits>"`` with fixed-width digits, so string comparison is numeric comparison.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from cdc_lake.decode.envelope import ChangeEvent
from cdc_lake.decode.ordering import binlog_file_number

_POSTGRES: Final = "postgresql"
_LSN_DIGITS: Final = 20


def stream_position(event: ChangeEvent) -> str | None:
    """The position of ``event`` in its connector's change stream, or None if it has none."""
    source = event.source
    if event.is_snapshot:
        return None
    if source.connector == _POSTGRES:
        return _postgres_position(source.sequence)
    if source.server_id is None or source.file is None or source.pos is None or source.row is None:
        return None
    return f"{source.server_id}:{binlog_file_number(source.file):010d}{source.pos:020d}{source.row:010d}"


def _postgres_position(sequence: str | None) -> str | None:
    if not sequence:
        return None
    try:
        parts = json.loads(sequence)
        last_commit, lsn = int(parts[0]), int(parts[1])
    except (ValueError, TypeError, IndexError):
        return None
    return f"pg:{last_commit:0{_LSN_DIGITS}d}{lsn:0{_LSN_DIGITS}d}"


def _server(position: str) -> str:
    return position.split(":", 1)[0]


def already_applied(position: str | None, applied: str | None) -> bool:
    """Whether an event at ``position`` is at or below ``applied`` (the partition's applied high mark)."""
    if position is None or applied is None or _server(position) != _server(applied):
        return False
    return len(position) == len(applied) and position <= applied


class PartitionMarks:
    """The highest position per server seen in one Kafka partition, and the server of its newest event."""

    def __init__(self) -> None:
        self.highest: dict[str, str] = {}
        self.newest: tuple[int, str] | None = None

    def add(self, offset: int, position: str) -> None:
        """Account for an event at ``offset`` with ``position``."""
        server = _server(position)
        known = self.highest.get(server)
        if known is None or position > known:
            self.highest[server] = position
        if self.newest is None or offset > self.newest[0]:
            self.newest = (offset, server)

    def merge(self, other: PartitionMarks) -> None:
        """Fold in another slice's marks of the same partition."""
        for server, position in other.highest.items():
            known = self.highest.get(server)
            if known is None or position > known:
                self.highest[server] = position
        if other.newest is not None and (self.newest is None or other.newest[0] > self.newest[0]):
            self.newest = other.newest

    def high_mark(self) -> str | None:
        """The highest position of the server that wrote the partition's newest event."""
        if self.newest is None:
            return None
        return self.highest[self.newest[1]]


def advance(applied: Mapping[int, str], marks: Mapping[int, PartitionMarks]) -> dict[int, str]:
    """The applied high marks after a batch with ``marks``."""
    result = dict(applied)
    for partition, partition_marks in marks.items():
        mark = partition_marks.high_mark()
        if mark is not None and not already_applied(mark, result.get(partition)):
            result[partition] = mark
    return result
