"""Helpers for the onboarding tests: connectors in Connect, Kafka keys, and leaving the stack clean.

Every test run uses names with a random suffix (:func:`support.common.suffix`: databases, sources, so
topics, slots and connectors too), so reruns against the same stack never collide.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import requests

from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.kafka.offsets import OffsetRange, end_offsets, read_ranges
from cdc_lake.stack.manager import LocalStack
from support.common import run_json

KAFKA = "127.0.0.1:19092"
CONNECT = "http://127.0.0.1:18083"
WRITES_AROUND = 5
"""Writes :func:`onboard_while_writing` makes before the command and after it returns."""


def connectors_of(source: str) -> list[str]:
    """Connectors registered in Connect for ``source``."""
    names = requests.get(f"{CONNECT}/connectors", timeout=10).json()
    return sorted(filter(of_source(source), names))


def delete_connectors(stack: LocalStack, matches: Callable[[str], bool]) -> None:
    """Delete every connector whose name ``matches`` from both Connect workers (the secured one with
    its credentials), retrying as the product's client does: a worker busy rebalancing can take more
    than one request's timeout to answer."""
    creds = stack.layout.credentials
    for url, auth in (
        (stack.connect.url, None),
        (stack.connect_secure.url, (creds.connect_user, creds.connect_password)),
    ):
        client = KafkaConnectClient(url, timeout=60, auth=auth)
        for name in client.list_connectors():
            if matches(name):
                client.delete(name)


def of_source(source: str) -> Callable[[str], bool]:
    """A connector-name filter for ``source``'s connectors (``cdc-lake.SOURCE`` and ``cdc-lake.SOURCE.*``)."""
    return lambda name: name == f"cdc-lake.{source}" or name.startswith(f"cdc-lake.{source}.")


def _zigzag_varint(data: bytes) -> int:
    result = shift = 0
    for byte in data:
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1)


def topic_keys(topic: str) -> list[int]:
    """The integer key of every message in ``topic`` (keys are Confluent-framed Avro records of one int)."""
    ranges = [OffsetRange(topic, partition, 0, end) for partition, end in end_offsets(KAFKA, topic).items()]
    return [_zigzag_varint(message.key()[5:]) for message in read_ranges(KAFKA, ranges) if message.key()]


def wait_for_keys(topic: str, expected: Iterable[int], timeout: float = 90.0) -> set[int]:
    """Wait until events for every key in ``expected`` are in ``topic``; returns the keys seen."""
    wanted = set(expected)
    deadline = time.monotonic() + timeout
    while True:
        seen = set(topic_keys(topic))
        if wanted <= seen:
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: no events for keys {sorted(wanted - seen)} after {timeout:.0f}s")
        time.sleep(1)


def onboard_while_writing(config: Path, source: str, write: Callable[[int], object]) -> tuple[Any, list[int]]:
    """Run ``onboard SOURCE --json`` while a thread calls ``write(key)`` for keys 100, 101, ... every 0.1 s.

    The writes start before the command and go on for :data:`WRITES_AROUND` keys after it returns, and
    some land while it runs (asserted here, not left to how long onboarding happens to take): a table
    added while another one changes must lose none of the events written before, during and after the
    connector update.  Returns the onboard report and the keys written.
    """
    written: list[int] = []
    stop = threading.Event()

    def keep_writing() -> None:
        key = 100
        while not stop.is_set():
            write(key)
            written.append(key)
            key += 1
            time.sleep(0.1)

    def wait_for_writes(count: int) -> None:
        deadline = time.monotonic() + 60
        while len(written) < count:
            assert writer.is_alive(), "the writer thread died"
            assert time.monotonic() < deadline, f"only {len(written)} of {count} writes in 60 s"
            time.sleep(0.05)

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        wait_for_writes(WRITES_AROUND)
        before = len(written)
        added = run_json(config, "onboard", source)
        during = len(written) - before
        wait_for_writes(len(written) + WRITES_AROUND)
    finally:
        stop.set()
        writer.join()
    assert during > 0, "no write landed while onboard ran"
    return added, written
