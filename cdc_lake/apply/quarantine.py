"""Quarantining a bad message: the operator's explicit, recorded choice to skip it and keep applying.

A message that can never be applied (it does not decode, names an unknown schema, has no key, holds a
value the lake type cannot hold) stops its table at that offset (docs/applier.md).  Besides
re-bootstrapping, the operator may run ``cdc-lake quarantine TABLE --partition P --offset O --reason
TEXT``: the message's key and value bytes are copied into the state store's ``quarantined_messages``
table with its topic, partition, offset and the reason; the table is marked *possibly diverged* (the
change the message carried is missing from the lake) until ``cdc-lake rebootstrap`` or a clean
``cdc-lake validate`` clears the mark (:meth:`StateStore.clear_possibly_diverged`).

The applier then leaves quarantined offsets out of every batch that covers them, and the Hudi commit of
that batch lists them in its metadata, so the lake itself records what it skipped
(:mod:`cdc_lake.apply.skipped`).  Nothing is ever skipped without such a record.

After fixing the cause (a ``column_types`` override, a registry schema, a ``key``), ``cdc-lake quarantine
--replay TABLE --partition P --offset O`` applies the message after all (:func:`replay`), under the
table's apply lock: it is read again from Kafka (its bytes must be the quarantined copy's), decoded with
the table's *current* settings and without the re-send mark (its offset lies below the applied ones, so
its stream position is below the mark), and written to the table's current copy as one Hudi commit
that keeps the commit offsets and marks (:meth:`TableApplier.replay`).  Its rows keep their original
ordering value, so a later change of the same key that the lake already holds wins Hudi's event-time
merge.  A later *hard delete* of the key leaves no ordering value to protect it: the partition's
messages from the replayed one up to the applied offset are read once on the driver, and a change whose
key's last later change is such a delete is not written (the lake already holds the key's final
state).  The row is then marked replayed (when, by whom, the commit) and stops marking the table
possibly diverged.  Refused, in one line and with nothing written: a table not LIVE or CATCHING_UP, a
re-bootstrap copying, a row of another topic id or another copy, a message gone from Kafka (retention),
bytes that differ from the copy, a message that still does not decode (it stays quarantined).
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import textwrap
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from cdc_lake.apply.decoding import BadMessage, DecodedChange, DecodeSettings, decode_messages
from cdc_lake.config import Config
from cdc_lake.decode.framing import MessageRef, parse_frame, read_avro_body
from cdc_lake.decode.schema import SchemaLookup, TypedSchemas
from cdc_lake.exceptions import CdcLakeError, KafkaReadError, QuarantineError
from cdc_lake.kafka.offsets import OffsetRange, read_ranges, topic_state
from cdc_lake.kafka.reader import RawMessage, header_names
from cdc_lake.lake.format import format_facts
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import QuarantinedMessage, RebootstrapPhase, TableInfo
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)

QUARANTINE_RUN = "quarantine"
REPLAY_RUN = "quarantine replay"
WRITABLE = frozenset({TableState.LIVE, TableState.CATCHING_UP})
"""The states whose table a replay may write to (the applier's own, not stopped)."""
WIDTH = 80
"""Columns of ``quarantine --list``'s lines."""


@dataclass(frozen=True)
class QuarantineRequest:
    """What ``cdc-lake quarantine`` was asked: which message of which table, and why."""

    table: str
    partition: int
    offset: int
    reason: str


def quarantine(config: Config, request: QuarantineRequest) -> QuarantinedMessage:
    """Copy the message into the quarantine, record the skip and mark the table possibly diverged."""
    from cdc_lake.lake.target import target_for

    if not request.reason.strip():
        raise QuarantineError(f"table {request.table}: --reason is required (it is recorded)")
    source, table = config.table(request.table)
    target = target_for(config, source, table)
    with StateStore.open(config.state_store.url) as store:
        info = store.require_table(request.table)
        ref = MessageRef(target.topic, request.partition, request.offset)
        now = topic_state(config.kafka.bootstrap_servers, target.topic, extra=config.kafka.consumer)
        marks = now.marks
        if request.partition not in marks:
            raise QuarantineError(f"table {request.table}: {ref}: the topic has no such partition")
        low, high = marks[request.partition]
        if not low <= request.offset < high:
            raise QuarantineError(
                f"table {request.table}: {ref}: no such message (the partition holds offsets {low} to "
                f"{high - 1})"
            )
        applied = store.get_applied_offsets(request.table).get(request.partition, 0)
        if request.offset < applied:
            raise QuarantineError(
                f"table {request.table}: {ref}: already applied (the table is at offset {applied}); only "
                "messages not yet applied can be quarantined"
            )
        message = _read_one(config, target.topic, request.partition, request.offset)
        with store.run(QUARANTINE_RUN, request.table) as handle:
            kept = store.quarantine_message(
                request.table,
                topic=target.topic,
                partition=request.partition,
                offset=request.offset,
                reason=request.reason,
                key=message.key,
                value=message.value,
                topic_id=now.topic_id,
                lake_path=store.current_copy(request.table).path,
            )
            handle.detail.update({
                "topic": target.topic, "partition": request.partition, "offset": request.offset,
                "reason": kept.reason, "state": info.state.value, "last_error": info.last_error,
            })
        _LOG.warning("%s: %s quarantined: %s", request.table, ref, kept.reason)
        return kept


def _read_one(config: Config, topic: str, partition: int, offset: int) -> RawMessage:
    found = _read(config, topic, partition, offset, offset + 1)
    if not found:
        raise QuarantineError(f"{MessageRef(topic, partition, offset)}: cannot read it (compacted away?)")
    return found[0]


def _read(config: Config, topic: str, partition: int, start: int, end: int) -> list[RawMessage]:
    """The messages of ``partition`` from ``start`` to ``end`` (exclusive), read on this process."""
    try:
        wanted = [OffsetRange(topic, partition, start, end)]
        found = read_ranges(config.kafka.bootstrap_servers, wanted, extra=config.kafka.consumer)
    except KafkaReadError as exc:
        raise QuarantineError(f"{MessageRef(topic, partition, start)}: cannot read it: {exc}") from exc
    return [
        RawMessage(partition, m.offset() or 0, m.key(), m.value(), header_names(m.headers())) for m in found
    ]


@dataclass(frozen=True)
class ReplayRequest:
    """What ``cdc-lake quarantine --replay`` was asked: which quarantined message of which table."""

    table: str
    partition: int
    offset: int

    @property
    def where(self) -> str:
        """The prefix of every line about it."""
        return f"table {self.table}: partition {self.partition} offset {self.offset}"


def replayable(
    request: ReplayRequest,
    rows: Sequence[QuarantinedMessage],
    info: TableInfo,
    topic_id: str | None,
    marks: Mapping[int, tuple[int, int]],
    rebootstrapping: bool,
) -> QuarantinedMessage:
    """The quarantine row ``request`` names, if it may be replayed now; else QuarantineError, one line.

    ``rows`` are the table's quarantine rows, ``info`` its lifecycle row (state, current copy),
    ``topic_id`` and ``marks`` the topic's Kafka id and (low, high) offsets per partition now.
    """
    where = request.where
    if info.state not in WRITABLE:
        raise QuarantineError(
            f"{where}: the table is {info.state.value}, not LIVE or CATCHING_UP: a replay writes to it "
            "only while the applier may"
        )
    if rebootstrapping:
        raise QuarantineError(f"{where}: a re-bootstrap is copying the table; replay after its switch")
    found = [r for r in rows if (r.partition, r.offset) == (request.partition, request.offset)]
    if not found:
        raise QuarantineError(f"{where}: no quarantined message there (see `cdc-lake quarantine --list`)")
    row = found[0]
    if not row.missing:
        raise QuarantineError(f"{where}: already replayed by {row.replayed_by} at {row.replayed_at}")
    if row.topic_id is not None and topic_id is not None and row.topic_id != topic_id:
        raise QuarantineError(
            f"{where}: quarantined from topic id {row.topic_id}, the topic is now {topic_id} (deleted and "
            f"created again): its message is gone; run `cdc-lake rebootstrap {request.table}`"
        )
    if row.lake_path is not None and row.lake_path != info.lake_base_path:
        raise QuarantineError(
            f"{where}: quarantined for copy {row.lake_path}, the table's is {info.lake_base_path}"
        )
    low, high = marks.get(request.partition, (0, 0))
    if not low <= request.offset < high:
        raise QuarantineError(
            f"{where}: the message is gone from Kafka (retention: the partition holds offsets {low} to "
            f"{high - 1}); run `cdc-lake rebootstrap {request.table}`"
        )
    return row


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay writes: the message's changes (none when a later delete of their key was applied)."""

    changes: tuple[DecodedChange, ...]
    superseded_by: int | None = None
    """The offset of the applied later hard delete that left a change out (None: none was)."""


def plan_replay(
    settings: DecodeSettings, request: ReplayRequest, message: RawMessage, later: Iterable[RawMessage]
) -> ReplayPlan:
    """Decode ``message`` past the re-send mark with ``settings`` (the table's current ones).

    ``later`` are the partition's messages after it that the lake holds (applied, not quarantined): a
    change whose key's last change among them is a hard delete is left out.  Raises QuarantineError
    when the message still does not decode, or carries no change.
    """
    unmarked = dataclasses.replace(settings, applied_positions={})
    decoded = list(decode_messages(unmarked, [message]))
    bad = [d for d in decoded if isinstance(d, BadMessage)]
    if bad:
        raise QuarantineError(
            f"{request.where}: still does not decode: {bad[0].reason}; it stays quarantined"
        )
    changes = [d for d in decoded if isinstance(d, DecodedChange)]
    if not changes:
        raise QuarantineError(f"{request.where}: a tombstone carries no change to replay")
    schemas = TypedSchemas(settings.registry, settings.column_types)
    keys = {_record_key(settings, schemas, change) for change in changes}
    last: dict[Hashable, DecodedChange] = {}
    for record in decode_messages(unmarked, later):
        if isinstance(record, DecodedChange) and (key := _record_key(settings, schemas, record)) in keys:
            last[key] = record
    deleted = {
        key: change.offset for key, change in last.items() if change.op == "d" and not settings.soft_deletes
    }
    kept = tuple(c for c in changes if _record_key(settings, schemas, c) not in deleted)
    return ReplayPlan(kept, max(deleted.values(), default=None))


def _record_key(settings: DecodeSettings, schemas: TypedSchemas, change: DecodedChange) -> Hashable:
    """The change's record key (the configured key columns, else its message key's fields) as the lake
    format tells keys apart (:meth:`~cdc_lake.lake.format.FormatFacts.key_identity`: every NaN one key,
    ``-0.0`` another than ``0.0``), never by Python's equality."""
    names = settings.key_fields
    if not names and change.key_schema_id is not None:
        names = tuple(schemas.get_schema(change.key_schema_id).row_converter.column_names)
    values = tuple(change.row.get(name) for name in names or ())
    return format_facts(settings.lake_format).key_identity(values)


def key_text(key: bytes | None, lookup: SchemaLookup | None) -> str:
    """The key a message carried: its fields decoded with the registry's schema, else its length."""
    if key is None:
        return "none"
    if lookup is not None:
        ref = MessageRef("quarantine", 0, 0)
        try:
            schema_id, body = parse_frame(key, ref, "key")
            datum = read_avro_body(body, lookup.get_schema(schema_id).schema, ref, schema_id, "key")
        except (CdcLakeError, KeyError):
            datum = None
        if isinstance(datum, dict):
            return ", ".join(f"{name}={value}" for name, value in datum.items())
    return f"{len(key)} bytes (not decoded)"


def describe(
    messages: Sequence[QuarantinedMessage], lookup: SchemaLookup | None = None
) -> list[dict[str, object]]:
    """JSON-ready rows of quarantined messages: the key decoded when ``lookup`` can, the bytes as lengths."""
    return [
        {
            "table": m.table, "topic": m.topic, "partition": m.partition, "offset": m.offset,
            "key": key_text(m.key, lookup), "reason": m.reason,
            "key_bytes": None if m.key is None else len(m.key),
            "value_bytes": None if m.value is None else len(m.value),
            "quarantined_at": m.quarantined_at.isoformat(), "topic_id": m.topic_id, "lake_path": m.lake_path,
            "replayed_at": None if m.replayed_at is None else m.replayed_at.isoformat(),
            "replayed_by": m.replayed_by, "replay_commit": m.replay_commit,
        }
        for m in messages
    ]


def list_lines(messages: Sequence[QuarantinedMessage], lookup: SchemaLookup | None = None) -> list[str]:
    """``quarantine --list`` for a terminal: a block per message, no line over :data:`WIDTH` columns."""
    lines: list[str] = []
    for m in messages:
        when = m.quarantined_at.strftime("%Y-%m-%d %H:%M:%SZ")
        lines.extend(textwrap.wrap(f"{m.table}  quarantined {when}", WIDTH, subsequent_indent="  "))
        place = f"topic {m.topic!r} partition {m.partition} offset {m.offset}"
        labelled = [("at", place), ("key", key_text(m.key, lookup)), ("reason", m.reason)]
        if m.replayed_at is not None:
            commit = m.replay_commit or "none (a later delete of its key was applied)"
            replayed = f"{m.replayed_at:%Y-%m-%d %H:%M:%SZ} by {m.replayed_by}, commit {commit}"
            labelled.append(("replayed", replayed))
        for label, text in labelled:
            lines.extend(
                textwrap.wrap(f"{label}: {text}", WIDTH, initial_indent="  ", subsequent_indent="    ")
            )
    return lines


@dataclass(frozen=True)
class ReplayOutcome:
    """What a replay did: the row as now recorded, and how many changes its commit wrote."""

    message: QuarantinedMessage
    changes: int


def replay(config: Config, request: ReplayRequest) -> ReplayOutcome:
    """Apply the quarantined message ``request`` names to the table's current copy (module docstring)."""
    from cdc_lake.apply.runner import applier_options, current_target
    from cdc_lake.apply.table_applier import TableApplier
    from cdc_lake.decode.registry import registry_client
    from cdc_lake.lake.target import target_for
    from cdc_lake.spark import get_spark
    from cdc_lake.state.locks import LockPurpose, table_lock

    source, table = config.table(request.table)
    url = config.state_store.url
    with StateStore.open(url) as store, table_lock(url, LockPurpose.APPLY, request.table) as lock:
        if not lock:
            raise QuarantineError(f"{request.where}: another process is applying the table; try again")
        target = current_target(store, target_for(config, source, table))
        now = topic_state(config.kafka.bootstrap_servers, target.topic, extra=config.kafka.consumer)
        copying = any(r.phase is RebootstrapPhase.COPYING for r in store.rebootstraps(request.table))
        rows = store.quarantined(request.table, target.topic)
        row = replayable(request, rows, store.require_table(request.table), now.topic_id, now.marks, copying)
        message = _read_one(config, target.topic, request.partition, request.offset)
        if (message.key, message.value) != (row.key, row.value):
            raise QuarantineError(f"{request.where}: the message in Kafka is not the quarantined copy")
        applied = store.get_applied_offsets(request.table).get(request.partition, request.offset + 1)
        missing = {q.offset for q in rows if q.missing and q.partition == request.partition}
        later = [
            m for m in _read(config, target.topic, request.partition, request.offset + 1, applied)
            if m.offset not in missing
        ]
        registry = registry_client(config)
        settings = DecodeSettings(
            target.topic, registry, target.key_fields, target.soft_deletes, {}, dict(target.column_types),
            lake_format=target.lake_format,
        )
        plan = plan_replay(settings, request, message, later)
        with store.run(REPLAY_RUN, request.table) as handle:
            handle.detail.update({
                "topic": target.topic, "partition": request.partition, "offset": request.offset,
            })
            commit = None
            if plan.changes:
                spark = get_spark(config.spark, config.lake)
                applier = TableApplier(spark, target, applier_options(config), registry, store)
                result = applier.replay(plan.changes, now.topic_id, before_commit=lock.verify)
                if result.error() is not None or result.commit_instant is None:
                    cause = result.error() or "nothing was written"
                    raise QuarantineError(f"{request.where}: not replayed: {cause}")
                commit = result.commit_instant
                store.record_applied_offsets(request.table, applier.checkpoint().offsets, commit)
            who = getpass.getuser()
            store.mark_replayed(request.table, request.partition, request.offset, by=who, commit=commit)
            handle.detail.update({"commit": commit, "by": who, "superseded_by": plan.superseded_by})
        (kept,) = [
            q for q in store.quarantined(request.table, target.topic)
            if (q.partition, q.offset) == (request.partition, request.offset)
        ]
        _LOG.warning("%s replayed (commit %s)", request.where, commit)
        return ReplayOutcome(kept, len(plan.changes))
