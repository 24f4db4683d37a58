"""The config's Kafka client settings (``kafka.consumer``: security, timeouts) reach every Kafka client.

A SASL/TLS cluster fails with misleading errors ("no heartbeat") when one client is created without
them.  librdkafka refuses an unknown property when the client is constructed, before any connection:
so each entry point given a probe property must fail naming it, which proves the settings got there.
No broker is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from confluent_kafka import KafkaException

from cdc_lake.connect.streaming import heartbeat_count, wait_streaming
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.kafka.offsets import (
    OffsetRange,
    end_offsets,
    read_ranges,
    topic_watermarks,
    wait_for_messages,
    watermarks,
)

PROBE = {"cdc.lake.probe.property": "1"}
BROKER = "127.0.0.1:9"

ENTRY_POINTS: dict[str, Callable[[Mapping[str, str]], object]] = {
    "topic_watermarks": lambda extra: topic_watermarks(BROKER, ["t"], 1.0, extra),
    "watermarks": lambda extra: watermarks(BROKER, "t", 1.0, extra),
    "end_offsets": lambda extra: end_offsets(BROKER, "t", 1.0, extra),
    "read_ranges": lambda extra: read_ranges(BROKER, [OffsetRange("t", 0, 0, 1)], 1.0, extra),
    "wait_for_messages": lambda extra: wait_for_messages(BROKER, "t", 1, 1.0, extra),
    "heartbeat_count (onboarding)": lambda extra: heartbeat_count(BROKER, "pg", extra),
    "wait_streaming (onboarding)": lambda extra: wait_streaming(BROKER, "c", "pg", 0, 1.0, extra),
}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_every_client_gets_the_configured_settings(name: str) -> None:
    with pytest.raises((KafkaException, CdcLakeError), match=r"cdc\.lake\.probe\.property"):
        ENTRY_POINTS[name](PROBE)
