"""Reading Kafka offset ranges into Spark: the executors fetch their own ranges, never the driver.

Two ways, both giving an RDD of :class:`RawMessage` in offset order within each range:

- ``KafkaReader.CONSUMER`` (default): the ranges are split into slices and parallelized; each Spark task
  opens a librdkafka consumer (confluent-kafka) on its executor and reads its slice.  The bytes go from
  Kafka straight into the Python worker that decodes them, and the consumer takes the same ``kafka.consumer``
  settings (librdkafka names) as every other cdc-lake Kafka client.
- ``KafkaReader.SPARK``: Spark's own Kafka source (``spark-sql-kafka-0-10``) reads the ranges in the JVM;
  the rows are then handed to Python.  ``kafka.consumer`` settings are passed as ``kafka.<name>`` options,
  so they must be Java client names there.

docs/applier.md compares the two (events/s measured by benchmarks/apply_bench.py).
"""

from __future__ import annotations

import enum
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from confluent_kafka import Consumer, KafkaError, TopicPartition
from pyspark import RDD
from pyspark.sql import SparkSession

from cdc_lake.exceptions import KafkaReadError
from cdc_lake.kafka.offsets import OffsetRange
from cdc_lake.kafka.unreachable import rdkafka_logger

if TYPE_CHECKING:
    from cdc_lake.config import KafkaSettings

_LOG = logging.getLogger(__name__)
_CONSUME_BATCH = 1000


class KafkaReader(enum.StrEnum):
    """Which client reads the offset ranges on the executors."""

    CONSUMER = "consumer"
    SPARK = "spark"


class RawMessage(NamedTuple):
    """One Kafka message as read: where it is, its undecoded key and value bytes, its headers' names.

    The names only: Debezium marks each half of a primary-key update with a header
    (:data:`cdc_lake.apply.key_change.KEY_UPDATE_HEADERS`), whose presence is all the applier reads.
    """

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[str, ...] = ()


def header_names(headers: Mapping[str, object] | Sequence[tuple[str, object]] | None) -> tuple[str, ...]:
    """The names of a consumed message's headers (confluent-kafka gives a list of pairs)."""
    if not headers:
        return ()
    if isinstance(headers, Mapping):
        return tuple(headers)
    return tuple(name for name, _ in headers)


@dataclass(frozen=True)
class KafkaReadSettings:
    """What an executor needs to read a range: the brokers, extra client settings, and a time limit.

    Shipped to executors with the task, so it must stay picklable; ``consumer`` may hold credentials and
    is never logged.
    """

    bootstrap_servers: str
    consumer: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = 120.0

    @classmethod
    def of(cls, kafka: KafkaSettings) -> KafkaReadSettings:
        """The config's ``kafka`` section: its brokers and client settings."""
        return cls(kafka.bootstrap_servers, dict(kafka.consumer))


def split_ranges(ranges: list[OffsetRange], pieces: int, min_slice: int = 5_000) -> list[OffsetRange]:
    """Cut ``ranges`` into about ``pieces`` slices of at least ``min_slice`` offsets, keeping order.

    A topic usually has one partition; slicing it lets several Spark tasks decode it in parallel.
    """
    total = sum(r.count for r in ranges)
    if total == 0:
        return []
    size = max(min_slice, -(-total // max(1, pieces)))
    slices = []
    for whole in ranges:
        for start in range(whole.start, whole.end, size):
            slices.append(OffsetRange(whole.topic, whole.partition, start, min(whole.end, start + size)))
    return slices


def _bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _consumer(settings: KafkaReadSettings) -> Consumer:
    return Consumer({
        "bootstrap.servers": settings.bootstrap_servers,
        "group.id": "cdc-lake-applier",
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "fetch.max.bytes": 16 * 1024 * 1024,
        "logger": rdkafka_logger(),
        **settings.consumer,
        # Never jump: a range whose start retention deleted must fail, not read as empty (the config
        # refuses these keys in kafka.consumer).
        "auto.offset.reset": "error",
        "enable.auto.commit": False,
    })


def deleted_by_retention(wanted: OffsetRange) -> KafkaReadError:
    """The error for a planned range whose start was deleted (retention) before it could be read."""
    return KafkaReadError(
        f"topic {wanted.topic!r} partition {wanted.partition}: offsets {wanted.start}..{wanted.end - 1} were "
        "deleted by retention before they were read; re-bootstrap the table"
    )


def iter_range(settings: KafkaReadSettings, wanted: OffsetRange) -> Iterator[RawMessage]:
    """Every message of ``wanted`` in offset order, read with a consumer of its own.

    Offsets without a message (transaction markers, compacted records) are skipped: the range ends
    when the consumer's position reaches ``wanted.end``.  Raises KafkaReadError on a broker error or
    when the range cannot be read within ``settings.timeout_seconds``.
    """
    if wanted.count == 0:
        return
    where = f"topic {wanted.topic!r} partition {wanted.partition}"
    topic_partition = TopicPartition(wanted.topic, wanted.partition, wanted.start)
    consumer = _consumer(settings)
    deadline = time.monotonic() + settings.timeout_seconds
    following = wanted.start
    try:
        consumer.assign([topic_partition])
        while True:
            # librdkafka's batch consume returns when it holds the count asked for or the timeout passed:
            # asking for more than the range has left made every range short of 1,000 messages that ends
            # at the partition's end (an applier's usual batch) wait the whole second.
            messages = consumer.consume(min(_CONSUME_BATCH, wanted.end - following), timeout=1.0)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        raise deleted_by_retention(wanted)
                    raise KafkaReadError(f"{where}: {error}")
                offset = message.offset()
                if offset is None or offset >= wanted.end:
                    return
                yield RawMessage(
                    wanted.partition, offset, _bytes(message.key()), _bytes(message.value()),
                    header_names(message.headers()),
                )
                following = offset + 1
                if following >= wanted.end:
                    return
            position = consumer.position([TopicPartition(wanted.topic, wanted.partition)])[0].offset
            if position >= wanted.end:
                return
            following = max(following, position)
            if time.monotonic() > deadline:
                raise KafkaReadError(
                    f"{where}: timed out after {settings.timeout_seconds:.0f}s reading offsets "
                    f"{wanted.start} to {wanted.end} (position {position})"
                )
    finally:
        consumer.close()


def read_with_consumers(
    spark: SparkSession, settings: KafkaReadSettings, ranges: list[OffsetRange]
) -> RDD[RawMessage]:
    """An RDD with one partition per range; each task reads its range with a librdkafka consumer."""

    def read(slices: Iterable[OffsetRange]) -> Iterator[RawMessage]:
        for wanted in slices:
            yield from iter_range(settings, wanted)

    return spark.sparkContext.parallelize(ranges, max(1, len(ranges))).mapPartitions(read)


def read_with_spark_source(
    spark: SparkSession, settings: KafkaReadSettings, ranges: list[OffsetRange]
) -> RDD[RawMessage]:
    """An RDD read by Spark's Kafka source: one task per range (``minPartitions`` splits them further)."""
    if not ranges:
        return spark.sparkContext.emptyRDD()
    topic = ranges[0].topic
    if any(r.topic != topic for r in ranges):
        raise KafkaReadError("the Spark Kafka source reads one topic per batch")
    per_partition: dict[int, OffsetRange] = {}
    for r in ranges:
        known = per_partition.get(r.partition)
        start = r.start if known is None else min(known.start, r.start)
        end = r.end if known is None else max(known.end, r.end)
        per_partition[r.partition] = OffsetRange(topic, r.partition, start, end)
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("kafka.isolation.level", "read_committed")
        .option("assign", json.dumps({topic: sorted(per_partition)}))
        .option("startingOffsets", json.dumps({topic: {str(p): r.start for p, r in per_partition.items()}}))
        .option("endingOffsets", json.dumps({topic: {str(p): r.end for p, r in per_partition.items()}}))
        .option("minPartitions", str(len(ranges)))
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true")
    )
    for key, value in settings.consumer.items():
        reader = reader.option(f"kafka.{key}", value)
    frame = reader.load().select("partition", "offset", "key", "value", "headers.key")
    return frame.rdd.map(lambda row: RawMessage(row[0], row[1], row[2], row[3], tuple(row[4] or ())))


def read_ranges_in_spark(
    spark: SparkSession, settings: KafkaReadSettings, ranges: list[OffsetRange], reader: KafkaReader
) -> RDD[RawMessage]:
    """The messages of ``ranges`` as an RDD read on the executors by ``reader``."""
    _LOG.debug("reading %d slices with the %s reader", len(ranges), reader.value)
    if reader is KafkaReader.SPARK:
        return read_with_spark_source(spark, settings, ranges)
    return read_with_consumers(spark, settings, ranges)
