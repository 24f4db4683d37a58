"""Recognising change events Debezium sent again after a restart, by their place in the change stream.

Debezium is at-least-once: after a Connect crash a task re-sends the events after its last committed
source offset, which Kafka then holds twice.  Replaying them could show an older row than already
applied, and a hard-deleted row has no ordering value left to protect it: an old event replayed in a
later batch than its delete would bring the row back until the replayed delete arrives.  So every
commit stores, per Kafka partition, the highest stream position applied (its *mark*), and the next
batches skip events below it.  A skipped event must really have been applied: skipping an unseen event
loses it silently, so every doubt means "apply it".

A stream position orders events as Debezium emits them, and must keep doing so across a failover:

- Postgres: ``source.sequence`` = ``[last commit LSN, change LSN]``.  Transactions are emitted in commit
  order and changes inside one in LSN order, so the pair grows with every event, although change LSNs
  alone go back when transactions interleave, but it does not grow *strictly*: every row of one heap
  page of a multi-row insert (``COPY``, ``INSERT … SELECT``: Postgres' ``heap_multi_insert`` writes one
  WAL record per page) carries the same change LSN and sequence, and so do the delete and create
  Debezium emits for a primary-key update.  (A logical slot does not follow a failover, so the sequence
  never restarts; see :mod:`cdc_lake.decode.ordering`.)
- MySQL/MariaDB: the event's GTID, split into its *source* and sequence number.  MariaDB ``D-S-N`` gives
  source ``D`` (the replication domain) and ``N``: a domain's sequence numbers grow across its servers
  (a promoted replica continues from the highest number of the domain; ``gtid_strict_mode`` refuses
  anything else).  MySQL ``uuid:N`` (or ``uuid:tag:N``) gives source ``uuid`` (or ``uuid:tag``) and
  ``N``; numbers of one source follow binlog order on every server that holds them
  (``replica_preserve_commit_order``), so they keep their order when the connector is repointed at a
  promoted replica, unlike binlog file numbers and positions, which belong to one server.  The mark
  holds the highest sequence number applied per source; every event of one transaction shares its
  GTID, and an event of a source the mark does not know (a new MySQL primary's) is new.
- Snapshot reads (but incremental ones on binlog sources, placed by their GTID like a change: see
  :mod:`cdc_lake.decode.ordering`), events without a GTID (a source not in GTID mode, which
  onboarding's preflight refuses) and Postgres events without a sequence have no position and are
  never skipped.

Positions are not unique on either engine, and a batch can end inside any group sharing one (the
planned end offset, or ``apply.batch_max_events``, falls there), so an event is skipped only when its
position is *strictly below* its partition's mark; an event *at* the mark may be unseen and is applied
again.  Skipping at the mark lost the unseen rest of every cut ``COPY`` page or key change for good
(issue 20).  Within one slice of a batch the mark rises with every change applied, in partition order
(:func:`cdc_lake.apply.decoding.decode_messages`), so a suffix re-sent inside the batch is skipped too.

What this leaves, proved or bounded by ``tests/unit/test_apply_model.py`` (docs/applier.md,
"Guarantees"): on Postgres, events at the mark are the last ones applied and one group holds each key
once, so applying one again shows the state it showed.  On binlog sources all events of a transaction
share its GTID: while Debezium re-sends the transaction applied last, a key that transaction changed
more than once can show an earlier state *of that transaction* until the re-sent events reach its last
change; and after a MySQL failover (another uuid) a re-sent old-server transaction is not recognised
and can show an older state until the re-sent suffix passes it.  Neither loses a change.

Encoded in commit metadata (``kafka.stream_positions``) per partition as ``"pg:<40 digits>"`` or
``"gtid:<source>=<n>,<source>=<n>..."``.  Marks written by earlier versions tagged binlog coordinates
with ``source.server_id`` (``"<server_id>:<digits>"``), or named MariaDB sources ``D-S``; the first are
not comparable with GTIDs and the second name no domain, so they skip nothing and the next batch
replaces or extends them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from cdc_lake.decode.envelope import ChangeEvent
from cdc_lake.sources import PositionKind, capabilities_for_connector

_PG: Final = "pg"
_GTID: Final = "gtid"
_PG_DIGITS: Final = 40
_LSN_DIGITS: Final = 20


def stream_position(event: ChangeEvent) -> str | None:
    """The position of ``event`` in its connector's change stream, or None if it has none."""
    source = event.source
    if event.is_snapshot:
        return None
    if capabilities_for_connector(source.connector).position_kind is PositionKind.LSN:
        return _postgres_position(source.sequence)
    parsed = gtid_source(source.gtid)
    if parsed is None:
        return None
    origin, sequence = parsed
    return f"{_GTID}:{origin}={sequence}"


def _postgres_position(sequence: str | None) -> str | None:
    if not sequence:
        return None
    try:
        parts = json.loads(sequence)
        last_commit, lsn = int(parts[0]), int(parts[1])
    except (ValueError, TypeError, IndexError):
        return None
    return f"{_PG}:{last_commit:0{_LSN_DIGITS}d}{lsn:0{_LSN_DIGITS}d}"


def gtid_source(gtid: str | None) -> tuple[str, int] | None:
    """A GTID's source and sequence number, or None for a missing or unrecognised GTID.

    MariaDB ``0-1-42`` -> ``("0", 42)``; MySQL ``uuid:42`` -> ``("uuid", 42)``.
    """
    if not gtid:
        return None
    if ":" in gtid:
        origin, _, number = gtid.strip().rpartition(":")
    else:  # MariaDB: numbers grow across the domain's servers; the domain alone is the source
        domain, _, rest = gtid.strip().partition("-")
        origin, number = domain, rest.rpartition("-")[2] if rest.count("-") == 1 else ""
    if not origin or not number.isdigit() or "," in origin or "=" in origin:
        return None
    return origin, int(number)


def _entries(position: str | None) -> tuple[str, dict[str, int]] | None:
    """A position or mark as (kind, highest number per source); None for anything not comparable."""
    if position is None:
        return None
    kind, _, body = position.partition(":")
    try:
        if kind == _PG and len(body) == _PG_DIGITS and body.isdigit():
            return _PG, {_PG: int(body)}
        if kind == _GTID and body:
            entries: dict[str, int] = {}
            for item in body.split(","):
                origin, _, number = item.rpartition("=")
                if not origin or not number.isdigit():
                    return None
                entries[origin] = int(number)
            return _GTID, entries
    except ValueError:
        return None
    return None  # an old "<server_id>:<binlog digits>" mark, or unknown


def _encode(kind: str, entries: Mapping[str, int]) -> str:
    if kind == _PG:
        return f"{_PG}:{entries[_PG]:0{_PG_DIGITS}d}"
    return f"{_GTID}:" + ",".join(f"{origin}={entries[origin]}" for origin in sorted(entries))


def already_applied(position: str | None, applied: str | None) -> bool:
    """Whether the event at ``position`` was applied before: strictly below the partition's mark."""
    return PartitionMarks.of(applied).holds(position)


class PartitionMarks:
    """The highest stream position per source seen in one Kafka partition."""

    def __init__(self) -> None:
        self.kind: str | None = None
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
        if event is None or self.kind is None or event[0] != self.kind:
            return False
        ((origin, number),) = event[1].items()
        highest = self.highest.get(origin)
        return highest is not None and number < highest

    def add(self, position: str) -> None:
        """Account for an event at ``position``."""
        self.merge(PartitionMarks.of(position))

    def _fold(self, kind: str, entries: Mapping[str, int]) -> None:
        if self.kind is not None and self.kind != kind:
            return  # one partition holds one engine's events
        self.kind = kind
        for origin, number in entries.items():
            if number > self.highest.get(origin, -1):
                self.highest[origin] = number

    def merge(self, other: PartitionMarks) -> None:
        """Fold in another slice's marks of the same partition."""
        if other.kind is not None:
            self._fold(other.kind, other.highest)

    def high_mark(self) -> str | None:
        """The encoded mark of everything seen, or None when nothing had a position."""
        if self.kind is None:
            return None
        return _encode(self.kind, self.highest)


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
