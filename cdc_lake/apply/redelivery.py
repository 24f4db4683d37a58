"""Recognising change events Debezium sent again after a restart, by their place in the change stream.

Debezium is at-least-once: after a Connect crash a task re-sends the events after its last committed
source offset, which Kafka then holds twice.  Replaying them could show an older row than already
applied, and a hard-deleted row has no ordering value left to protect it: an old event replayed in a
later batch than its delete would bring the row back until the replayed delete arrives.  So every
commit stores, per Kafka partition, the highest stream position applied (its *mark*), and the next
batches skip events below it.  A skipped event must really have been applied: skipping an unseen event
loses it silently, so every doubt means "apply it".

A stream position orders events as Debezium emits them, and must keep doing so across a failover.
What that is, is the engine's to say: its position codec
(:class:`~cdc_lake.sources.capabilities.PositionCodec`) reads an event's ``source`` block into an
*origin* and a number that grows in emission order per origin, and writes and reads its marks:

- Postgres (:mod:`cdc_lake.sources.postgres.codec`): ``source.sequence`` = ``[last commit LSN, change
  LSN]``, which grows with every event but not *strictly* (every row of one heap page of a ``COPY``,
  and the delete and create of a primary-key update, share one).
- MySQL/MariaDB (:mod:`cdc_lake.sources.mysql.codec`): the event's GTID, split into its source
  (MariaDB's replication domain, MySQL's ``uuid[:tag]``) and sequence number, which keep their order on
  a promoted replica.  The mark holds the highest sequence number applied per source; every event of
  one transaction shares its GTID, and an event of a source the mark does not know (a new MySQL
  primary's) is new.
- Snapshot reads have no position and are never skipped (but incremental ones on binlog sources,
  placed by their GTID like a change: see :mod:`cdc_lake.decode.ordering`), nor are events the codec
  finds no position in (no GTID, no sequence).

Positions are not unique on either engine, and a batch can end inside any group sharing one (the
planned end offset, or ``apply.batch_max_events``, falls there), so an event is skipped only when its
position is *strictly below* its partition's mark; an event *at* the mark may be unseen and is applied
again.  Skipping at the mark lost the unseen rest of every cut ``COPY`` page or key change for
good.  Within one slice of a batch the mark rises with every change applied, in partition order
(:func:`cdc_lake.apply.decoding.decode_messages`), so a suffix re-sent inside the batch is skipped too.

What this leaves, proved or bounded by ``tests/unit/apply/test_apply_model.py`` (docs/applier.md,
"Guarantees"): on Postgres, events at the mark are the last ones applied and one group holds each key
once, so applying one again shows the state it showed.  On binlog sources all events of a transaction
share its GTID: while Debezium re-sends the transaction applied last, a key that transaction changed
more than once can show an earlier state *of that transaction* until the re-sent events reach its last
change; and after a MySQL failover (another uuid) a re-sent old-server transaction is not recognised
and can show an older state until the re-sent suffix passes it.  Neither loses a change.

Encoded in commit metadata (``kafka.stream_positions``) per partition as ``"<kind>:<body>"``, the
codec's ``mark_kind`` and its encoding of the highest number per origin (``"pg:<40 digits>"``,
``"gtid:<source>=<n>,<source>=<n>..."``); a mark of a kind no engine writes skips nothing.  Marks
written by earlier versions tagged binlog coordinates with ``source.server_id``
(``"<server_id>:<digits>"``), or named MariaDB sources ``D-S``; the first are
not comparable with GTIDs and the second name no domain, so they skip nothing and the next batch
replaces or extends them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from cdc_lake.decode.envelope import ChangeEvent
from cdc_lake.sources import PositionCodec, capabilities_for_connector, codec_for_mark


class StreamEntry(NamedTuple):
    """An event's stream position as read (its codec, origin and number), before it is encoded."""

    codec: PositionCodec
    origin: str
    number: int

    def encoded(self) -> str:
        """The position as a one-origin mark (``DecodedChange.position``), which :meth:`PartitionMarks.add`
        and :meth:`PartitionMarks.holds` read back."""
        return _encode(self.codec, {self.origin: self.number})


def stream_entry(event: ChangeEvent) -> StreamEntry | None:
    """The position of ``event`` in its connector's change stream as read, or None if it has none."""
    if event.is_snapshot:
        return None
    codec = capabilities_for_connector(event.source.connector).positions
    key = codec.stream_key(event.source.fields)
    return None if key is None else StreamEntry(codec, *key)


def _entries(position: str | None) -> tuple[PositionCodec, dict[str, int]] | None:
    """A position or mark as (its codec, highest number per source); None for anything not comparable."""
    if position is None:
        return None
    kind, _, body = position.partition(":")
    codec = codec_for_mark(kind)
    if codec is None:
        return None  # an old "<server_id>:<binlog digits>" mark, or unknown
    try:
        entries = codec.read_mark(body)
    except ValueError:
        return None
    return None if entries is None else (codec, entries)


def _encode(codec: PositionCodec, entries: Mapping[str, int]) -> str:
    return f"{codec.mark_kind}:{codec.write_mark(entries)}"


def already_applied(position: str | None, applied: str | None) -> bool:
    """Whether the event at ``position`` was applied before: strictly below the partition's mark."""
    return PartitionMarks.of(applied).holds(position)


class PartitionMarks:
    """The highest stream position per source seen in one Kafka partition."""

    def __init__(self) -> None:
        self.codec: PositionCodec | None = None
        self.highest: dict[str, int] = {}

    @classmethod
    def of(cls, position: str | None) -> PartitionMarks:
        """The marks holding one position or stored mark (none when it is not comparable)."""
        marks = cls()
        parsed = _entries(position)
        if parsed is not None:
            marks._fold(*parsed)
        return marks

    def holds(self, position: str | None) -> bool:
        """Whether the event at ``position`` was applied before: strictly below these marks."""
        event = _entries(position)
        if event is None:
            return False
        ((origin, number),) = event[1].items()
        return self.holds_entry(StreamEntry(event[0], origin, number))

    def holds_entry(self, entry: StreamEntry) -> bool:
        """:meth:`holds` of a position as read (:func:`stream_entry`), not encoded."""
        if self.codec is None or entry.codec.mark_kind != self.codec.mark_kind:
            return False
        highest = self.highest.get(entry.origin)
        return highest is not None and entry.number < highest

    def add(self, position: str) -> None:
        """Account for an event at ``position``."""
        self.merge(PartitionMarks.of(position))

    def add_entry(self, entry: StreamEntry) -> None:
        """:meth:`add` of a position as read (:func:`stream_entry`), not encoded."""
        self._fold(entry.codec, {entry.origin: entry.number})

    def _fold(self, codec: PositionCodec, entries: Mapping[str, int]) -> None:
        if self.codec is not None and self.codec.mark_kind != codec.mark_kind:
            return  # one partition holds one engine's events
        self.codec = codec
        for origin, number in entries.items():
            if number > self.highest.get(origin, -1):
                self.highest[origin] = number

    def merge(self, other: PartitionMarks) -> None:
        """Fold in another slice's marks of the same partition."""
        if other.codec is not None:
            self._fold(other.codec, other.highest)

    def high_mark(self) -> str | None:
        """The encoded mark of everything seen, or None when nothing had a position."""
        if self.codec is None:
            return None
        return _encode(self.codec, self.highest)


def advance(applied: Mapping[int, str], marks: Mapping[int, PartitionMarks]) -> dict[int, str]:
    """The applied marks after a batch with ``marks``; a mark that is not comparable is replaced."""
    result = dict(applied)
    for partition, batch in marks.items():
        combined = PartitionMarks.of(result.get(partition))
        combined.merge(batch)
        mark = combined.high_mark()
        if mark is not None:
            result[partition] = mark
    return result
