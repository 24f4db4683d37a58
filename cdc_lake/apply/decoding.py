"""Decoding one batch's Kafka messages on the executors, and summarising what was decoded.

Runs inside Spark tasks: every message becomes a :class:`DecodedChange` (a row image and its metadata),
a :class:`BadMessage` (what could not be applied, and why), or nothing (tombstones, which only follow
deletes).  Nothing here raises on bad input: a bad message is data, so the driver can stop the table
exactly there, apply what precedes it, and name it.  Writer schemas are fetched by id from the registry
and cached for the life of the executor's Python worker.

Truncate policy: a Debezium truncate (``op='t'``, sent only when the connector is configured not to
skip truncates) is a bad message.  The table stops before it with an error asking for a re-bootstrap,
because a truncate is ordered against the other partitions' events only by source position and cannot
be replayed as a per-key change.  See docs/applier.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any, NamedTuple

from cdc_lake.apply.key_change import (
    KeyUpdateHalf,
    ambiguous_key_reason,
    is_key_update_half,
    missing_key_reason,
    old_key_delete,
    unlogged_old_key_reason,
)
from cdc_lake.apply.redelivery import PartitionMarks, advance, stream_entry
from cdc_lake.decode.envelope import ChangeEvent, decode_message
from cdc_lake.decode.framing import HEADER_SIZE, MessageRef
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.decode.schema import SchemaLookup, TypedSchemas
from cdc_lake.decode.types import UNAVAILABLE
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.kafka.reader import RawMessage
from cdc_lake.lake.format import DEFAULT_FORMAT

TRUNCATE_REASON = (
    "TRUNCATE event: cdc-lake does not replay truncates (the table stops before it); "
    "re-bootstrap the table"
)


class DecodedChange(NamedTuple):
    """One change event, ready to become a lake row.

    ``row`` is the after image (the before image for deletes) with unavailable columns set to None and
    listed in ``unavailable``; they are filled from earlier changes or the stored row before writing.
    ``moved_from`` holds the old record key of an update that changed the configured key: the row's
    unavailable columns come from that key's state, never from the new key's
    (:func:`cdc_lake.apply.frame.fill_moved`).  ``key_update``: the change is a half of a primary-key
    update that must be applied in the batch of its other half
    (:func:`cdc_lake.apply.key_change.key_update_cuts`).
    """

    partition: int
    offset: int
    op: str
    value_schema_id: int
    key_schema_id: int | None
    ordering: str
    source_ts_ms: int
    row: dict[str, Any]
    unavailable: tuple[str, ...]
    position: str | None
    moved_from: tuple[Any, ...] | None = None
    key_update: bool = False


class Redelivered(NamedTuple):
    """A change event strictly below its partition's applied stream position: sent again, skipped."""

    partition: int
    offset: int


class BadMessage(NamedTuple):
    """A message that cannot be applied: where it is, why, and its raw bytes (for a dead-letter topic)."""

    partition: int
    offset: int
    reason: str
    key: bytes | None
    value: bytes | None


Decoded = DecodedChange | BadMessage | Redelivered


@dataclass(frozen=True)
class DecodeSettings:
    """What the executors need to decode a table's messages; shipped with every task.

    ``key_fields`` are the configured record key columns, or None to use the message key's fields.
    With ``soft_deletes``, the non-key columns a delete's before image leaves null are marked
    unavailable, so the soft-deleted row keeps its last stored values.  ``applied_positions`` holds each
    partition's applied stream position (see :mod:`cdc_lake.apply.redelivery`).  ``column_types`` is the
    table's per-column representation (``docs/type-mapping.md``).  ``old_key_optional``: an update may
    arrive without the configured key's old value when the key did not change (the source's replica
    identity is USING INDEX over the key); otherwise such an update is a bad message
    (:func:`cdc_lake.apply.key_change.unlogged_old_key_reason`).
    """

    topic: str
    registry: SchemaLookup
    key_fields: tuple[str, ...] | None
    soft_deletes: bool
    applied_positions: Mapping[int, str] = field(default_factory=dict)
    column_types: Mapping[str, str] = field(default_factory=dict)
    old_key_optional: bool = False
    lake_format: str = DEFAULT_FORMAT
    """The ``lake.format`` the table is written in: whose record key must tell keys apart."""


_REGISTRIES: dict[tuple[str, str, str], SchemaLookup] = {}
_REGISTRIES_LOCK = threading.Lock()


def _shared(lookup: SchemaLookup) -> SchemaLookup:
    """One registry client per executor process, so schemas are fetched once, not once per task."""
    if not isinstance(lookup, SchemaRegistry):
        return lookup
    with _REGISTRIES_LOCK:
        return _REGISTRIES.setdefault(lookup.identity(), lookup)


def _schema_id(frame: bytes | None) -> int | None:
    if frame is None or len(frame) < HEADER_SIZE:
        return None
    return int.from_bytes(frame[1:HEADER_SIZE], "big")


def _reason(exc: Exception, ref: MessageRef) -> str:
    text = str(exc).strip() or type(exc).__name__
    prefix = f"{ref}: "
    while text.startswith(prefix):
        text = text[len(prefix) :]
    if not isinstance(exc, CdcLakeError):
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())


_NO_KEY = "message has no key (a table without a primary key?); set key: [...] for the table"


def _bad(message: RawMessage, reason: str) -> BadMessage:
    return BadMessage(message.partition, message.offset, reason, message.key, message.value)


def _change(
    settings: DecodeSettings,
    event: ChangeEvent,
    message: RawMessage,
    applied: dict[int, PartitionMarks],
    moved_from: ChangeEvent | None = None,
    key_update: bool = False,
) -> Decoded:
    if event.is_truncate:
        return _bad(message, TRUNCATE_REASON)
    entry = stream_entry(event)
    marks = applied.get(message.partition)
    if marks is None:
        stored = settings.applied_positions.get(message.partition)
        marks = applied[message.partition] = PartitionMarks.of(stored)
    if entry is not None and marks.holds_entry(entry):
        return Redelivered(message.partition, message.offset)
    image = event.row
    if image is None:
        return _bad(message, f"{event.op!r} event has no row image")
    key_fields = settings.key_fields or (tuple(event.key) if event.key else None)
    if not key_fields:
        return _bad(message, _NO_KEY)
    for name in key_fields:
        if image.get(name) is None or image[name] is UNAVAILABLE:
            return _bad(message, missing_key_reason(event, name, key_fields))
    ambiguous = ambiguous_key_reason(event, image, key_fields, settings.lake_format)
    if ambiguous is not None:
        return _bad(message, ambiguous)
    row = {name: None if value is UNAVAILABLE else value for name, value in image.items()}
    unavailable = [name for name, value in image.items() if value is UNAVAILABLE]
    if settings.soft_deletes and event.is_delete:
        keys = set(key_fields)
        unavailable.extend(name for name, value in image.items() if value is None and name not in keys)
    position = None
    if entry is not None:
        marks.add_entry(entry)
        position = entry.encoded()
    return DecodedChange(
        partition=message.partition,
        offset=message.offset,
        op=event.op,
        value_schema_id=event.value_schema.schema_id,
        key_schema_id=_schema_id(message.key),
        ordering=event.ordering_value,
        source_ts_ms=event.source.ts_ms,
        row=row,
        unavailable=tuple(unavailable),
        position=position,
        moved_from=None if moved_from is None else tuple((moved_from.row or {})[name] for name in key_fields),
        key_update=key_update,
    )


def decode_messages(settings: DecodeSettings, messages: Iterable[RawMessage]) -> Iterator[Decoded]:
    """Decode ``messages`` of ``settings.topic``; tombstones yield nothing, failures yield BadMessage."""
    registry = TypedSchemas(_shared(settings.registry), settings.column_types)
    # The applied marks, raised by each change of the slice in partition order: a suffix Debezium re-sent
    # inside this slice is skipped like one re-sent in a later batch.
    applied: dict[int, PartitionMarks] = {}
    for message in messages:
        try:
            decoded = decode_message(
                registry, settings.topic, message.partition, message.offset, message.key, message.value
            )
            if isinstance(decoded, ChangeEvent):
                unlogged = unlogged_old_key_reason(decoded, settings.key_fields)
                if unlogged is not None and not settings.old_key_optional:
                    yield _bad(message, unlogged)
                    continue
                old_key = old_key_delete(decoded, settings.key_fields)
                if old_key is not None:  # the update moved the row: delete it under its old key first
                    yield _change(settings, old_key, message, applied)
                half = is_key_update_half(decoded, message.headers)
                yield _change(settings, decoded, message, applied, old_key, half)
        except Exception as exc:  # every failure stops the table here, named
            yield _bad(message, _reason(exc, MessageRef(settings.topic, message.partition, message.offset)))


def _first(offsets: dict[int, int], partition: int, offset: int) -> None:
    known = offsets.get(partition)
    if known is None or offset < known:
        offsets[partition] = offset


@dataclass
class BatchSummary:
    """What a batch holds, gathered on the executors and merged on the driver.

    ``value_schemas`` / ``key_schemas`` map each schema id to the first offset using it per partition;
    ``first_bad`` holds the first bad message of each partition.
    """

    changes: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    value_schemas: dict[int, dict[int, int]] = field(default_factory=dict)
    key_schemas: dict[int, dict[int, int]] = field(default_factory=dict)
    first_bad: dict[int, BadMessage] = field(default_factory=dict)
    unavailable: set[str] = field(default_factory=set)
    newest_source_ts_ms: int | None = None
    redelivered: int = 0
    marks: dict[int, PartitionMarks] = field(default_factory=dict)
    moves_unavailable: int = 0
    """Moved rows with unavailable columns (:func:`cdc_lake.apply.frame.fill_moved` resolves them)."""
    key_updates: list[KeyUpdateHalf] = field(default_factory=list)
    """The halves of primary-key updates (:func:`cdc_lake.apply.key_change.key_update_cuts`)."""

    def add(self, record: Decoded) -> None:
        """Account for one decoded record."""
        if isinstance(record, Redelivered):
            self.redelivered += 1
            return
        if isinstance(record, BadMessage):
            known = self.first_bad.get(record.partition)
            if known is None or record.offset < known.offset:
                self.first_bad[record.partition] = record
            return
        if record.position is not None:
            self.marks.setdefault(record.partition, PartitionMarks()).add(record.position)
        self.changes += 1
        self.ops[record.op] = self.ops.get(record.op, 0) + 1
        _first(self.value_schemas.setdefault(record.value_schema_id, {}), record.partition, record.offset)
        if record.key_schema_id is not None:
            _first(self.key_schemas.setdefault(record.key_schema_id, {}), record.partition, record.offset)
        self.unavailable.update(record.unavailable)
        if record.unavailable and (record.moved_from is not None or record.op == "c"):
            self.moves_unavailable += 1
        if record.key_update and record.position is not None:
            half = KeyUpdateHalf(record.position, record.op, record.partition, record.offset)
            self.key_updates.append(half)
        if self.newest_source_ts_ms is None or record.source_ts_ms > self.newest_source_ts_ms:
            self.newest_source_ts_ms = record.source_ts_ms

    def merge(self, other: BatchSummary) -> BatchSummary:
        """Fold ``other`` into this summary and return it."""
        self.changes += other.changes
        for op, count in other.ops.items():
            self.ops[op] = self.ops.get(op, 0) + count
        pairs = ((self.value_schemas, other.value_schemas), (self.key_schemas, other.key_schemas))
        for mine, theirs in pairs:
            for schema_id, firsts in theirs.items():
                for partition, offset in firsts.items():
                    _first(mine.setdefault(schema_id, {}), partition, offset)
        for bad in other.first_bad.values():
            known = self.first_bad.get(bad.partition)
            if known is None or bad.offset < known.offset:
                self.first_bad[bad.partition] = bad
        self.unavailable |= other.unavailable
        self.redelivered += other.redelivered
        self.moves_unavailable += other.moves_unavailable
        self.key_updates.extend(other.key_updates)
        for partition, marks in other.marks.items():
            self.marks.setdefault(partition, PartitionMarks()).merge(marks)
        if other.newest_source_ts_ms is not None and (
            self.newest_source_ts_ms is None or other.newest_source_ts_ms > self.newest_source_ts_ms
        ):
            self.newest_source_ts_ms = other.newest_source_ts_ms
        return self


def summarize(records: Iterable[Decoded]) -> Iterator[BatchSummary]:
    """One summary of ``records`` (a Spark partition's worth)."""
    summary = BatchSummary()
    for record in records:
        summary.add(record)
    yield summary


def marks_below(settings: DecodeSettings, messages: Iterable[RawMessage]) -> dict[int, str]:
    """Re-send marks from ``messages``: the last ones of partitions below a checkpoint that holds no mark.

    A bootstrap's hand-off (and a commit of an earlier version) stores offsets but no stream positions,
    so a Debezium re-send spanning them was replayed over newer rows: after a restart while a bootstrap
    copied the table, the published lake showed older states (and deleted rows) again until the re-sent
    suffix passed them.  Any event below a checkpoint's offsets was applied or is in the bootstrap's
    snapshot, and Debezium emits positions in order, so an event after the checkpoint *strictly below*
    the highest position among them was first emitted before it: applied, or read by the snapshot
    (taken after those offsets).  Found by ``tests/unit/apply/test_apply_model.py`` (thorough profile)."""
    unmarked = replace(settings, applied_positions={})
    summary = reduce(BatchSummary.merge, summarize(decode_messages(unmarked, messages)), BatchSummary())
    return advance({}, summary.marks)
