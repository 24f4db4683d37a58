"""Knowing when a registered connector actually streams changes, not just reports RUNNING.

A task turns RUNNING before it has fixed its start position in the WAL or binlog; a change made
in between may be missed.  Debezium emits heartbeat records only from its streaming loop, so the
first record on the connector's heartbeat topic proves that every later change is captured.
"""

from __future__ import annotations

from collections.abc import Mapping

from cdc_lake.exceptions import ConnectError, KafkaReadError
from cdc_lake.kafka.offsets import end_offsets, wait_for_messages

HEARTBEAT_TOPIC_PREFIX = "__debezium-heartbeat"


def heartbeat_topic(topic_prefix: str) -> str:
    """The topic Debezium writes heartbeats to for connectors with `topic.prefix` = `topic_prefix`."""
    return f"{HEARTBEAT_TOPIC_PREFIX}.{topic_prefix}"


def heartbeat_count(bootstrap_servers: str, topic_prefix: str, extra: Mapping[str, str] | None = None) -> int:
    """How many heartbeats the connector with this prefix has emitted so far (0 before the first).

    `extra` is the config's Kafka client settings (security), as for every other client.
    """
    return sum(end_offsets(bootstrap_servers, heartbeat_topic(topic_prefix), extra=extra).values())


def wait_streaming(
    bootstrap_servers: str,
    connector: str,
    topic_prefix: str,
    baseline: int = 0,
    timeout: float = 120.0,
    extra: Mapping[str, str] | None = None,
) -> None:
    """Block until `connector` emits a heartbeat beyond `baseline` (counted before it was (re)started)."""
    try:
        topic = heartbeat_topic(topic_prefix)
        wait_for_messages(bootstrap_servers, topic, at_least=baseline + 1, timeout=timeout, extra=extra)
    except KafkaReadError as exc:
        raise ConnectError(
            f"connector {connector!r} is not streaming: no heartbeat on {heartbeat_topic(topic_prefix)!r} "
            f"within {timeout:.0f}s (is heartbeat.interval.ms set?)"
        ) from exc
