"""Quarantining a bad message: the operator's explicit, recorded choice to skip it and keep applying.

A message that can never be applied (it does not decode, names an unknown schema, has no key, holds a
value the lake type cannot hold) stops its table at that offset (docs/applier.md).  Besides
re-bootstrapping, the operator may run ``cdc-lake quarantine TABLE --partition P --offset O --reason
TEXT``: the message's key and value bytes are copied into the state store's ``quarantined_messages``
table with its topic, partition, offset and the reason; the table is marked *possibly diverged* (the
change the message carried is missing from the lake) until ``cdc-lake rebootstrap`` or a clean
``cdc-lake validate`` clears the mark (:meth:`StateStore.clear_possibly_diverged`).

The applier then leaves quarantined offsets out of every batch that covers them, and the Hudi commit of
that batch lists them under :data:`QUARANTINED_KEY` in its metadata, so the lake itself records what it
skipped.  Nothing is ever skipped without such a record.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark import RDD

from cdc_lake.config import Config
from cdc_lake.decode.framing import MessageRef, parse_frame, read_avro_body
from cdc_lake.decode.schema import SchemaLookup
from cdc_lake.exceptions import CdcLakeError, KafkaReadError, QuarantineError
from cdc_lake.kafka.offsets import OffsetRange, read_ranges, topic_state
from cdc_lake.kafka.reader import RawMessage
from cdc_lake.state.records import QuarantinedMessage
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)

QUARANTINED_KEY = "quarantined"
"""Commit metadata: the quarantined offsets the commit's range skipped, ``{"partition": [offsets]}``."""
QUARANTINE_RUN = "quarantine"
WIDTH = 80
"""Columns of ``quarantine --list``'s lines."""


def skipped_offsets(
    store: StateStore | None,
    table: str,
    topic: str,
    start: Mapping[int, int],
    end: Mapping[int, int],
    topic_id: str | None = None,
) -> frozenset[tuple[int, int]]:
    """The (partition, offset) pairs quarantined for ``table`` that lie in ``[start, end)``.

    ``topic_id`` is the topic's Kafka id now (None: not known): a row quarantined from a topic of another
    id (deleted and created again since) skips nothing.  A re-bootstrap's copy (``table~vN``) skips what
    its table's quarantine holds: a quarantined offset before the copy's watermark is never read by it
    (the snapshot holds that change), one after it stays missing in the copy too, and the switch keeps
    its row and the possibly-diverged mark (:meth:`StateStore.switch_rebootstrap`).  A replayed row
    skips nothing: its change is in the lake, and a copy reading the message again applies it.
    """
    if store is None:
        return frozenset()
    return frozenset(
        (q.partition, q.offset)
        for q in store.quarantined(table.partition("~")[0], topic)
        if q.missing and q.partition in end and start.get(q.partition, 0) <= q.offset < end[q.partition]
        and (q.topic_id is None or topic_id is None or q.topic_id == topic_id)
    )


def without_quarantined(raw: RDD[RawMessage], skipped: frozenset[tuple[int, int]]) -> RDD[RawMessage]:
    """``raw`` without the quarantined messages (unchanged when there are none)."""
    if not skipped:
        return raw
    return raw.filter(lambda message: (message.partition, message.offset) not in skipped)


def commit_metadata(skipped: frozenset[tuple[int, int]], end: Mapping[int, int]) -> dict[str, str]:
    """The commit metadata naming the quarantined offsets below ``end`` (empty when there are none)."""
    by_partition: dict[str, list[int]] = {}
    for partition, offset in sorted(skipped):
        if offset < end.get(partition, 0):
            by_partition.setdefault(str(partition), []).append(offset)
    return {QUARANTINED_KEY: json.dumps(by_partition)} if by_partition else {}


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
    try:
        wanted = [OffsetRange(topic, partition, offset, offset + 1)]
        found = read_ranges(config.kafka.bootstrap_servers, wanted, extra=config.kafka.consumer)
    except KafkaReadError as exc:
        raise QuarantineError(f"{MessageRef(topic, partition, offset)}: cannot read it: {exc}") from exc
    if not found:
        raise QuarantineError(f"{MessageRef(topic, partition, offset)}: cannot read it (compacted away?)")
    message = found[0]
    return RawMessage(partition, offset, message.key(), message.value())


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
        for label, text in (("at", place), ("key", key_text(m.key, lookup)), ("reason", m.reason)):
            lines.extend(
                textwrap.wrap(f"{label}: {text}", WIDTH, initial_indent="  ", subsequent_indent="    ")
            )
    return lines
