"""librdkafka's connection errors during a broker restart: one line per interval, the rest untouched."""

from __future__ import annotations

import logging

from cdc_lake.kafka.unreachable import UnreachableFilter, rdkafka_logger

REFUSED = (
    "[thrd:127.0.0.1:19092/bootstrap]: 127.0.0.1:19092/bootstrap: Connect to ipv4#127.0.0.1:19092 failed: "
    "Connection refused"
)


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("cdc_lake.kafka.librdkafka", logging.ERROR, __file__, 1, message, None, None)


def test_a_restart_logs_one_line_per_interval() -> None:
    now = [0.0]
    gate = UnreachableFilter(interval=60, clock=lambda: now[0], wall_clock=lambda: 0.0)
    passed = []
    for second in range(0, 120):  # ten refused connections a second for two minutes
        now[0] = float(second)
        for _ in range(10):
            record = _record(REFUSED)
            if gate.filter(record):
                passed.append(record.getMessage())

    assert len(passed) == 2
    assert passed[0].startswith("Kafka unreachable since ") and passed[0].endswith("Connection refused)")
    assert passed[1].endswith(", retrying (600 connection errors)")


def test_other_messages_pass_and_a_later_outage_starts_afresh() -> None:
    now = [0.0]
    gate = UnreachableFilter(interval=60, clock=lambda: now[0], wall_clock=lambda: 0.0)

    assert gate.filter(_record("Group coordinator changed"))
    assert gate.filter(_record(REFUSED))
    assert not gate.filter(_record(REFUSED))
    now[0] = 500.0
    record = _record(REFUSED)
    assert gate.filter(record)
    assert record.getMessage().startswith("Kafka unreachable since ")


def test_the_filter_is_installed_once() -> None:
    rdkafka_logger()
    logger = rdkafka_logger()

    assert sum(isinstance(f, UnreachableFilter) for f in logger.filters) == 1
