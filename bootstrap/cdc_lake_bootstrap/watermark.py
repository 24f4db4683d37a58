"""Step 1: the watermark, saved before a single row is read.

The watermark is the hand-off point: the end offsets ``O`` of the table's topic (the applier replays
from there), ``Tₛ`` (the source commit time of the newest event before ``O``) and a source position the
read replica must replay past before the snapshot may start.

That position is the primary's current position read right *after* ``O``, not the newest event's own
position: every event below ``O`` was committed before Debezium emitted it, hence before this read, so
a replica past it holds every change the applier will not replay.  The event's own position would not
do on Postgres: ``source.lsn`` is the change's LSN, not its commit's, and a transaction that began
before it and committed after would be missing from a snapshot taken there, and never replayed.
The event's position is still recorded (in the run detail) for people.

An empty topic (or one Debezium has not created yet) gets a watermark too: no offsets (the applier
starts every partition at its beginning), the primary's time as ``Tₛ`` and its position.

The offsets are of one topic: the watermark records its Kafka id, read with them (one ``DescribeTopics``
request).  A topic deleted and created again under its name before the hand-off has another id and
offsets that start over; the hand-off refuses it and the applier's first batch would too
(:func:`cdc_lake_bootstrap.handoff.check_same_topic`, :mod:`cdc_lake.apply.plan`).

Many tables of one source take their watermarks together (:func:`take_watermarks`): the end offsets of
all their topics in one Kafka batch, then one read of the primary's position and clock, which is after
every topic's ``O`` and so a valid wait position for each; one replica wait then covers them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cdc_lake.decode.envelope import ChangeEvent, EnvelopeSource, decode_message
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.decode.schema import SchemaLookup, TypedSchemas
from cdc_lake.kafka.offsets import OffsetRange, read_ranges, topic_states
from cdc_lake.sources.postgres.positions import Lsn
from cdc_lake.sources.snapshot import SnapshotSource

_LOOK_BACK = (8, 256)
"""How many messages before the end of a partition to search for its newest change event (tombstones
follow deletes, so the first window almost always has one)."""


@dataclass(frozen=True)
class WatermarkPoint:
    """What step 1 measured: offsets ``O``, ``Tₛ``, the position to wait for, the newest event, and the
    topic's Kafka id (None: no topic yet, or a broker without ids)."""

    offsets: dict[int, int]
    ts_source_ms: int
    wait_position: str
    newest_event_position: str | None
    newest_event_ts_ms: int | None
    topic_id: str | None


@dataclass(frozen=True)
class NewestEvent:
    """The newest change event below the end offsets: its commit time and source position."""

    ts_ms: int
    position: str


def describe_position(source: EnvelopeSource) -> str:
    """An event's source position as people read it: a Postgres LSN, a GTID, or binlog file:pos."""
    if source.lsn is not None:
        return str(Lsn(source.lsn))
    if source.gtid:
        return source.gtid
    return f"{source.file}:{source.pos}"


def newest_event(
    bootstrap_servers: str,
    topic: str,
    marks: Mapping[int, tuple[int, int]],
    registry: SchemaLookup,
    kafka_extra: Mapping[str, str] | None = None,
) -> NewestEvent | None:
    """The newest change event (by source commit time) among the last messages of each partition."""
    best: NewestEvent | None = None
    for partition, (low, high) in sorted(marks.items()):
        for window in _LOOK_BACK:
            start = max(low, high - window)
            if start >= high:
                break
            window_range = OffsetRange(topic, partition, start, high)
            found = _last_change(bootstrap_servers, window_range, registry, kafka_extra)
            if found is not None:
                if best is None or found.ts_ms > best.ts_ms:
                    best = found
                break
            if start == low:
                break
    return best


def _last_change(
    bootstrap_servers: str,
    wanted: OffsetRange,
    registry: SchemaLookup,
    kafka_extra: Mapping[str, str] | None,
) -> NewestEvent | None:
    messages = read_ranges(bootstrap_servers, [wanted], extra=kafka_extra)
    for message in sorted(messages, key=lambda m: m.offset() or 0, reverse=True):
        decoded = decode_message(
            registry, wanted.topic, wanted.partition, message.offset() or 0, message.key(), message.value()
        )
        if isinstance(decoded, ChangeEvent):
            return NewestEvent(decoded.source.ts_ms, describe_position(decoded.source))
    return None


def take_watermark(
    bootstrap_servers: str,
    topic: str,
    engine: SnapshotSource,
    registry: SchemaRegistry,
    kafka_extra: Mapping[str, str] | None = None,
    column_types: Mapping[str, str] | None = None,
) -> WatermarkPoint:
    """Measure one topic's watermark: end offsets first, then the primary's position and clock."""
    typed = {topic: column_types or {}}
    return take_watermarks(bootstrap_servers, [topic], engine, registry, kafka_extra, typed)[topic]


def take_watermarks(
    bootstrap_servers: str,
    topics: Sequence[str],
    engine: SnapshotSource,
    registry: SchemaRegistry,
    kafka_extra: Mapping[str, str] | None = None,
    column_types: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, WatermarkPoint]:
    """The watermarks of ``topics`` (one source's): all end offsets, then one position and clock read.

    ``column_types`` holds each topic's table ``column_types``, so its events decode as the applier's do.
    """
    states = topic_states(bootstrap_servers, topics, extra=kafka_extra)
    position = engine.current_position()
    clock_ms = engine.primary_clock_ms()
    points = {}
    for topic, state in states.items():
        typed = TypedSchemas(registry, (column_types or {}).get(topic, {}))
        newest = newest_event(bootstrap_servers, topic, state.marks, typed, kafka_extra)
        points[topic] = WatermarkPoint(
            offsets={partition: high for partition, (_, high) in state.marks.items()},
            ts_source_ms=clock_ms if newest is None else newest.ts_ms,
            wait_position=position,
            newest_event_position=None if newest is None else newest.position,
            newest_event_ts_ms=None if newest is None else newest.ts_ms,
            topic_id=state.topic_id,
        )
    return points
