"""Unwrapping Debezium's change-event envelope from a Kafka message.

A Debezium value is a record ``{before, after, source, transaction, op, ts_ms, ...}`` where ``op`` is
``c`` (insert), ``r`` (snapshot read), ``u`` (update), ``d`` (delete) or ``t`` (truncate).  A delete is
followed by a tombstone (same key, null value) so Kafka compaction can drop the key; tombstones are
returned as :class:`Tombstone`, not errors.  Truncate events have no key and no row images.

Debezium's unavailable-value placeholder (an unchanged TOASTed Postgres value) is looked for only where
it can arrive: the after image of a streamed update or create from an engine that sends it
(``EngineCapabilities.unavailable_placeholders``), and in each column only in the shape Debezium gives
that column's type (:func:`cdc_lake.decode.types.placeholder_for`).  Elsewhere a value equal to a
placeholder is kept as the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cdc_lake.decode.framing import MessageRef, parse_frame, read_avro_body
from cdc_lake.decode.ordering import SourcePosition
from cdc_lake.decode.schema import RegisteredSchema, SchemaLookup
from cdc_lake.decode.types import UNAVAILABLE
from cdc_lake.exceptions import DecodeError, SourceEngineError
from cdc_lake.sources import capabilities_for_connector

OPS: Final = frozenset({"c", "r", "u", "d", "t"})
#: ``source.snapshot`` of rows an incremental snapshot chunk read (Debezium's ``SnapshotRecord.INCREMENTAL``).
INCREMENTAL: Final = "incremental"
_NEEDS_AFTER: Final = frozenset({"c", "r", "u"})
_MAY_HOLD_PLACEHOLDERS: Final = frozenset({"c", "u"})


@dataclass(frozen=True)
class EnvelopeSource:
    """The envelope's ``source`` block: where and when the change happened in the source database.

    Postgres fills ``schema``, ``lsn``, ``tx_id`` and ``sequence``; MySQL/MariaDB fill ``file``, ``pos``,
    ``row``, ``server_id`` and (with GTIDs) ``gtid``.  ``snapshot`` is Debezium's flag: ``true``,
    ``first``, ``first_in_data_collection``, ``last_in_data_collection``, ``last`` for an initial or
    blocking snapshot, ``incremental`` for an incremental snapshot's chunk; absent (or ``false``) while
    streaming.  ``fields`` is the whole record, which the engine's position codec reads.
    """

    connector: str
    name: str
    db: str
    table: str | None
    ts_ms: int
    snapshot: str | None = None
    schema: str | None = None
    lsn: int | None = None
    tx_id: int | None = None
    sequence: str | None = None
    file: str | None = None
    pos: int | None = None
    row: int | None = None
    server_id: int | None = None
    gtid: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_record(cls, raw: Mapping[str, Any]) -> EnvelopeSource:
        """Build from the decoded ``source`` record."""
        return cls(
            connector=raw["connector"],
            name=raw["name"],
            db=raw["db"],
            table=raw.get("table"),
            ts_ms=raw["ts_ms"],
            snapshot=raw.get("snapshot"),
            schema=raw.get("schema"),
            lsn=raw.get("lsn"),
            tx_id=raw.get("txId"),
            sequence=raw.get("sequence"),
            file=raw.get("file"),
            pos=raw.get("pos"),
            row=raw.get("row"),
            server_id=raw.get("server_id"),
            gtid=raw.get("gtid"),
            fields=raw,
        )

    @property
    def is_snapshot(self) -> bool:
        """True for rows read by a Debezium snapshot (initial, blocking or incremental)."""
        return self.snapshot not in (None, "false")

    @property
    def is_incremental_snapshot(self) -> bool:
        """True for rows read by an incremental snapshot's chunk."""
        return self.snapshot == INCREMENTAL


@dataclass(frozen=True)
class ChangeEvent:
    """One decoded Debezium change.

    ``before``/``after`` and ``key`` hold Spark-ready Python values (see :mod:`cdc_lake.decode.types`);
    a column Debezium could not see (unchanged TOAST) holds :data:`~cdc_lake.decode.types.UNAVAILABLE`.
    ``ts_ms`` is when Debezium processed the change; ``source.ts_ms`` when the database committed it;
    ``timestamp_ms`` is the Kafka record timestamp.
    """

    ref: MessageRef
    op: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    key: dict[str, Any] | None
    source: EnvelopeSource
    position: SourcePosition
    ts_ms: int | None
    timestamp_ms: int | None
    value_schema: RegisteredSchema

    @property
    def is_delete(self) -> bool:
        """True for ``op='d'``."""
        return self.op == "d"

    @property
    def is_truncate(self) -> bool:
        """True for ``op='t'``: every row of the table was removed."""
        return self.op == "t"

    @property
    def is_snapshot(self) -> bool:
        """True for events at the snapshot position, the lowest (see :func:`_position`)."""
        return self.position.is_snapshot

    @property
    def row(self) -> dict[str, Any] | None:
        """The row image that identifies the change: ``after``, or ``before`` for deletes."""
        return self.before if self.op == "d" else self.after

    @property
    def ordering_value(self) -> str:
        """The Hudi ordering-field value of this change (see :mod:`cdc_lake.decode.ordering`)."""
        return self.position.ordering_value()

    @property
    def unavailable_columns(self) -> frozenset[str]:
        """Columns of ``after`` that Debezium did not receive; the applier keeps their stored values."""
        if self.after is None:
            return frozenset()
        return frozenset(name for name, value in self.after.items() if value is UNAVAILABLE)


@dataclass(frozen=True)
class Tombstone:
    """A Kafka tombstone (null value) that follows a delete; it carries only the key."""

    ref: MessageRef
    key: dict[str, Any] | None
    timestamp_ms: int | None


def _position(op: str, source: EnvelopeSource, ref: MessageRef) -> SourcePosition:
    """The event's ordering position; snapshot reads by kind (:mod:`cdc_lake.decode.ordering`).

    A blocking or initial snapshot's row has the snapshot position.  An incremental chunk's row is its
    key's state at its place in the partition, so it orders there where the ordering *is* that place
    (binlog sources: the Kafka offset); on Postgres it keeps the snapshot position, since the change LSN
    it carries (its close marker's) can lie above a newer change of its key.  The engine's position codec
    says which (``PositionCodec.orders_incremental_snapshots``).
    """
    if (op == "r" or source.is_snapshot) and not source.is_incremental_snapshot:
        return SourcePosition.snapshot()
    try:
        codec = capabilities_for_connector(source.connector).positions
        if source.is_incremental_snapshot and not codec.orders_incremental_snapshots:
            return SourcePosition.snapshot()
        return SourcePosition.streamed(codec, source.fields, ref.offset)
    except (DecodeError, SourceEngineError) as exc:
        raise DecodeError(f"{ref}: {exc}") from exc


def _may_hold_placeholders(op: str, source: EnvelopeSource) -> bool:
    """Whether the after image of this change can carry unavailable-value placeholders.

    Only streamed updates and creates of an engine whose connector sends them (Postgres: an update
    leaving a TOASTed value unchanged, or the create a primary-key update becomes); never a snapshot
    read, a before image or a key, and never on MySQL/MariaDB, where a value equal to a placeholder is
    a value.
    """
    if op not in _MAY_HOLD_PLACEHOLDERS or source.is_snapshot:
        return False
    try:
        return capabilities_for_connector(source.connector).unavailable_placeholders
    except SourceEngineError:
        return False


def _decode(lookup: SchemaLookup, data: bytes, ref: MessageRef, part: str) -> tuple[RegisteredSchema, Any]:
    schema_id, body = parse_frame(data, ref, part)
    registered = lookup.get_schema(schema_id)
    return registered, read_avro_body(body, registered.schema, ref, schema_id, part)


def _convert(
    registered: RegisteredSchema, raw: Mapping[str, Any] | None, ref: MessageRef, placeholders: bool = False
) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        return registered.row_converter.convert(raw, placeholders)
    except DecodeError as exc:
        raise DecodeError(f"{ref}: {exc}") from exc


def decode_message(
    registry: SchemaLookup,
    topic: str,
    partition: int,
    offset: int,
    key_bytes: bytes | None,
    value_bytes: bytes | None,
    timestamp_ms: int | None = None,
) -> ChangeEvent | Tombstone:
    """Decode one Kafka message of a Debezium table topic into a :class:`ChangeEvent` or :class:`Tombstone`.

    Raises DecodeError (naming topic, partition and offset) for anything that is not a well-formed
    Debezium change event, and SchemaRegistryError when a schema id cannot be fetched.
    """
    ref = MessageRef(topic, partition, offset)
    key: dict[str, Any] | None = None
    if key_bytes is not None:
        key_schema, raw_key = _decode(registry, key_bytes, ref, "key")
        key = _convert(key_schema, raw_key, ref)
    if value_bytes is None:
        return Tombstone(ref, key, timestamp_ms)

    value_schema, raw = _decode(registry, value_bytes, ref, "value")
    if not value_schema.is_envelope:
        raise DecodeError(
            f"{ref}: value schema id {value_schema.schema_id} ({value_schema.name}) is not a Debezium "
            "envelope (a heartbeat, schema-change or transaction topic?)"
        )
    op = raw["op"]
    if op not in OPS:
        raise DecodeError(f"{ref}: unsupported Debezium op {op!r} (expected one of c, r, u, d, t)")
    if op in _NEEDS_AFTER and raw["after"] is None:
        raise DecodeError(f"{ref}: {op!r} event has no 'after' row")
    source = EnvelopeSource.from_record(raw["source"])
    return ChangeEvent(
        ref=ref,
        op=op,
        before=_convert(value_schema, raw["before"], ref),
        after=_convert(value_schema, raw["after"], ref, _may_hold_placeholders(op, source)),
        key=key,
        source=source,
        position=_position(op, source, ref),
        ts_ms=raw.get("ts_ms"),
        timestamp_ms=timestamp_ms,
        value_schema=value_schema,
    )
