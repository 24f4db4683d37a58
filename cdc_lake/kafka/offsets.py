"""Offsets of table topics: where each partition ends now, and ranges to read."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from cdc_lake.exceptions import KafkaReadError
from cdc_lake.kafka.unreachable import rdkafka_logger


@dataclass(frozen=True)
class OffsetRange:
    """Messages ``[start, end)`` of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        """How many offsets the range spans (compacted or aborted ones included)."""
        return max(0, self.end - self.start)


def _consumer(bootstrap_servers: str, extra: Mapping[str, str] | None = None) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": "cdc-lake-reader",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "logger": rdkafka_logger(),
        **(extra or {}),
    })


def watermarks(
    bootstrap_servers: str, topic: str, timeout: float = 10.0, extra: Mapping[str, str] | None = None
) -> dict[int, tuple[int, int]]:
    """The (low, high) watermark of every partition of `topic`; empty when the topic does not exist.

    `low` is the first offset still stored (retention deletes older ones), `high` the next offset to be
    written.  `extra` is librdkafka configuration (security settings) from the config's `kafka.consumer`.
    """
    consumer = _consumer(bootstrap_servers, extra)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            return {}
        marks = {}
        for partition in described.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
            marks[partition] = (int(low), int(high))
        return marks
    except KafkaException as exc:
        raise KafkaReadError(f"cannot read the offsets of topic {topic!r}: {exc}") from exc
    finally:
        consumer.close()


def end_offsets(
    bootstrap_servers: str, topic: str, timeout: float = 10.0, extra: Mapping[str, str] | None = None
) -> dict[int, int]:
    """The high watermark of every partition of `topic`; empty when the topic does not exist."""
    return {p: high for p, (_, high) in watermarks(bootstrap_servers, topic, timeout, extra).items()}


def read_ranges(
    bootstrap_servers: str, ranges: list[OffsetRange], timeout: float = 60.0
) -> list[Message]:
    """Every message in `ranges`, read on this process (small ranges: tests, demos, probes)."""
    pending = {(r.topic, r.partition): r for r in ranges if r.count > 0}
    if not pending:
        return []
    consumer = _consumer(bootstrap_servers)
    consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in pending.values()])
    messages: list[Message] = []
    deadline = time.monotonic() + timeout
    try:
        while pending:
            if time.monotonic() > deadline:
                left = ", ".join(f"{t}[{p}] from {r.start} to {r.end}" for (t, p), r in pending.items())
                raise KafkaReadError(f"timed out after {timeout:.0f}s reading {left}")
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaReadError(f"topic {message.topic()!r} partition {message.partition()}: {error}")
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is None or partition is None or offset is None:
                continue
            wanted = pending.get((topic, partition))
            if wanted is None:
                continue
            if offset < wanted.end:
                messages.append(message)
            if offset + 1 >= wanted.end:
                del pending[(topic, partition)]
                consumer.incremental_unassign([TopicPartition(topic, partition)])
    finally:
        consumer.close()
    return messages


def wait_for_messages(bootstrap_servers: str, topic: str, at_least: int, timeout: float) -> dict[int, int]:
    """Wait until `topic` holds at least `at_least` messages in all; returns its end offsets."""
    deadline = time.monotonic() + timeout
    while True:
        ends = end_offsets(bootstrap_servers, topic)
        if sum(ends.values()) >= at_least:
            return ends
        if time.monotonic() > deadline:
            raise KafkaReadError(
                f"topic {topic!r} has {sum(ends.values())} messages, expected at least {at_least} "
                f"within {timeout:.0f}s"
            )
        time.sleep(0.5)
