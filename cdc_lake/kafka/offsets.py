"""Offsets of table topics: where each partition ends now, and ranges to read.

Watermarks of many topics are read in one batch (:func:`topic_states`): one metadata request
(``DescribeTopics``) for every topic, then one ``ListOffsets`` request for the earliest and one for the
latest offsets of all their partitions, so the cost of a poll over 200 tables is a few round trips, not
200 consumers.  The metadata also carries each topic's id (Kafka 2.8 and later): a topic deleted and
created again under its name gets a new one, which is how the applier tells it from the topic it applied
(:func:`cdc_lake.apply.plan.plan_batch`), at no extra request.  One ``DescribeConfigs`` request for all
the topics that exist reads their ``cleanup.policy``: the plan refuses a compacted topic
(:mod:`cdc_lake.kafka.topic_rules`), whose config may change any time after onboarding.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
    Uuid,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    OffsetSpec,
    ResourceType,
)

from cdc_lake.exceptions import KafkaReadError
from cdc_lake.kafka.topic_rules import CLEANUP_POLICY
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


Marks = dict[int, tuple[int, int]]
"""The (low, high) watermark of each partition of a topic."""

_NO_TOPIC_ID = str(Uuid(0, 0))
"""The id brokers without topic ids (before Kafka 2.8) report (``Uuid`` compares by identity: text)."""
_ABSENT = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE)
"""Errors describing a topic that does not exist, or is still being created (no leaders yet)."""


@dataclass(frozen=True)
class TopicState:
    """A topic as Kafka describes it now: its id and the watermarks of its partitions.

    ``topic_id`` is Kafka's id of the topic (a topic deleted and created again under its name gets a new
    one); None when the topic does not exist or the brokers predate topic ids.  ``marks`` is empty when
    the topic does not exist.  ``cleanup_policy`` is the topic's ``cleanup.policy`` (None: no topic).
    """

    topic_id: str | None
    marks: Marks
    cleanup_policy: str | None = None


def topic_states(
    bootstrap_servers: str,
    topics: Iterable[str],
    timeout: float = 10.0,
    extra: Mapping[str, str] | None = None,
) -> dict[str, TopicState]:
    """The id and the (low, high) watermark of every partition of each of `topics`, in one batch.

    A topic that does not exist (or is still being created) has no id and no partitions.  `low` is the
    first offset still stored (retention deletes older ones), `high` the last stable offset (the next
    offset to be written, read committed).  `extra` is librdkafka configuration (security settings) from
    the config's `kafka.consumer`.
    """
    wanted = list(dict.fromkeys(topics))
    states = {topic: TopicState(None, {}) for topic in wanted}
    if not wanted:
        return states
    settings: dict[str, Any] = {
        **(extra or {}), "bootstrap.servers": bootstrap_servers, "logger": rdkafka_logger()
    }
    admin = AdminClient(settings)
    try:
        described = admin.describe_topics(TopicCollection(wanted), request_timeout=timeout)
        partitions: list[TopicPartition] = []
        for topic, future in described.items():
            description = _unless_absent(future)
            if description is None:
                continue
            states[topic] = TopicState(_topic_id(description.topic_id), {})
            partitions.extend(TopicPartition(topic, info.id) for info in description.partitions)
        if not partitions:
            return states
        existing = list(dict.fromkeys(tp.topic for tp in partitions))
        for topic, policy in _cleanup_policies(admin, existing, timeout):
            states[topic] = TopicState(states[topic].topic_id, {}, policy)
        low = _list_offsets(admin, partitions, OffsetSpec.earliest(), timeout)  # type: ignore[no-untyped-call]
        high = _list_offsets(admin, partitions, OffsetSpec.latest(), timeout)  # type: ignore[no-untyped-call]
        for topic, partition in low:
            states[topic].marks[partition] = (low[(topic, partition)], high[(topic, partition)])
        return states
    except KafkaException as exc:
        shown = ", ".join(repr(topic) for topic in wanted[:3]) + (" …" if len(wanted) > 3 else "")
        raise KafkaReadError(f"cannot read the offsets of topic(s) {shown}: {exc}") from exc


def _cleanup_policies(admin: AdminClient, topics: list[str], timeout: float) -> Iterator[tuple[str, str]]:
    """The ``cleanup.policy`` of each of ``topics`` that exists (one ``DescribeConfigs`` request)."""
    futures = admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic) for topic in topics], request_timeout=timeout
    )
    for resource, future in futures.items():
        entries = _unless_absent(future)
        entry = None if entries is None else entries.get(CLEANUP_POLICY)
        if entry is not None and entry.value is not None:
            yield resource.name, str(entry.value)


def _unless_absent(future: Future[Any]) -> Any:
    """``future``'s result; None when it failed because its topic does not exist (or has no leader yet)."""
    try:
        return future.result()
    except KafkaException as exc:
        if _error_code(exc) in _ABSENT:
            return None
        raise


def _topic_id(raw: Uuid | None) -> str | None:
    text = None if raw is None else str(raw)
    return None if text == _NO_TOPIC_ID else text


def _error_code(exc: KafkaException) -> int | None:
    error = exc.args[0] if exc.args else None
    return error.code() if isinstance(error, KafkaError) else None


def topic_watermarks(
    bootstrap_servers: str,
    topics: Iterable[str],
    timeout: float = 10.0,
    extra: Mapping[str, str] | None = None,
) -> dict[str, Marks]:
    """The (low, high) watermark of every partition of each of `topics` (see :func:`topic_states`)."""
    return {
        topic: state.marks for topic, state in topic_states(bootstrap_servers, topics, timeout, extra).items()
    }


def topic_state(
    bootstrap_servers: str, topic: str, timeout: float = 10.0, extra: Mapping[str, str] | None = None
) -> TopicState:
    """The id and watermarks of `topic` (see :func:`topic_states`)."""
    return topic_states(bootstrap_servers, [topic], timeout, extra)[topic]


def _list_offsets(
    admin: AdminClient, partitions: list[TopicPartition], spec: OffsetSpec, timeout: float
) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets(
        {partition: spec for partition in partitions},
        isolation_level=IsolationLevel.READ_COMMITTED,
        request_timeout=timeout,
    )
    return {(tp.topic, tp.partition): int(future.result().offset) for tp, future in futures.items()}


def watermarks(
    bootstrap_servers: str, topic: str, timeout: float = 10.0, extra: Mapping[str, str] | None = None
) -> Marks:
    """The (low, high) watermark of every partition of `topic`; empty when the topic does not exist."""
    return topic_state(bootstrap_servers, topic, timeout, extra).marks


def end_offsets(
    bootstrap_servers: str, topic: str, timeout: float = 10.0, extra: Mapping[str, str] | None = None
) -> dict[int, int]:
    """The high watermark of every partition of `topic`; empty when the topic does not exist."""
    return {p: high for p, (_, high) in watermarks(bootstrap_servers, topic, timeout, extra).items()}


def read_ranges(
    bootstrap_servers: str,
    ranges: list[OffsetRange],
    timeout: float = 60.0,
    extra: Mapping[str, str] | None = None,
) -> list[Message]:
    """Every message in `ranges`, read on this process (small ranges: tests, demos, probes)."""
    pending = {(r.topic, r.partition): r for r in ranges if r.count > 0}
    if not pending:
        return []
    consumer = _consumer(bootstrap_servers, extra)
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


def wait_for_messages(
    bootstrap_servers: str,
    topic: str,
    at_least: int,
    timeout: float,
    extra: Mapping[str, str] | None = None,
) -> dict[int, int]:
    """Wait until `topic` holds at least `at_least` messages in all; returns its end offsets."""
    deadline = time.monotonic() + timeout
    while True:
        ends = end_offsets(bootstrap_servers, topic, extra=extra)
        if sum(ends.values()) >= at_least:
            return ends
        if time.monotonic() > deadline:
            raise KafkaReadError(
                f"topic {topic!r} has {sum(ends.values())} messages, expected at least {at_least} "
                f"within {timeout:.0f}s"
            )
        time.sleep(0.5)
