"""Helpers for the onboarding tests: config files, CLI runs, Kafka keys, and leaving the stack clean.

Every test run uses names with a random suffix (databases, sources, so topics, slots and
connectors too), so reruns against the same stack never collide.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import requests
import yaml
from click.testing import CliRunner, Result

from cdc_lake.cli.main import cli
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.kafka.offsets import OffsetRange, end_offsets, read_ranges
from cdc_lake.stack.manager import LocalStack

KAFKA = "127.0.0.1:19092"
CONNECT = "http://127.0.0.1:18083"
# The stack's Connect worker has this variable; the config reads the password from it too.
PASSWORD_REF = "${CDC_LAKE_DB_PASSWORD:-cdc-lake-local}"
ONE_LINE_ERROR = "error: "


def suffix() -> str:
    """A short random suffix for this run's names."""
    return uuid.uuid4().hex[:8]


def write_config(directory: Path, sources: dict[str, dict[str, Any]], **sections: Any) -> Path:
    """A cdc-lake.yaml in ``directory`` with its own state store and lake, ``sources`` and extra sections."""
    directory.mkdir(parents=True, exist_ok=True)
    data = {
        "state_store": {"url": f"sqlite:///{directory / 'state.db'}"},
        "lake": {"base_path": str(directory / "lake")},
        **sections,
        "sources": sources,
    }
    path = directory / "cdc-lake.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def run(config: Path, *args: str) -> Result:
    """``cdc-lake --config CONFIG ARGS...`` in-process."""
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def run_json(config: Path, *args: str) -> Any:
    """Run a command with ``--json`` that must succeed, and return its JSON output."""
    result = run(config, *args, "--json")
    assert result.exit_code == 0, result.stderr or result.output
    return json.loads(result.stdout)


def assert_one_line_failure(result: Result, *fragments: str, exit_code: int = 1) -> None:
    """The command failed with one ``error:`` line on stderr containing every fragment."""
    assert result.exit_code == exit_code, result.output
    assert result.stderr.startswith(ONE_LINE_ERROR), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


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


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(0.5)


def onboard_while_writing(config: Path, source: str, write: Callable[[int], object]) -> tuple[Any, list[int]]:
    """Run ``onboard SOURCE --json`` while a thread calls ``write(key)`` for keys 100, 101, ... every 0.1 s.

    Returns the onboard report and the keys written: a table added while another one changes must lose
    none of its events.
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

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        added = run_json(config, "onboard", source)
    finally:
        stop.set()
        writer.join()
    return added, written
