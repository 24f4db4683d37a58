"""Step 6: handing the table to the applier only once Kafka holds every change up to the snapshot point.

Partitions were read at different moments, all at or before the *snapshot point*: the position the read
replica (or the primary, when the config lets the bootstrap read it) has replayed once the last partition
was written.  Replaying from the watermark converges on the source, but
only a lake that has applied every change up to the snapshot point shows a state the source had;
before that a multi-row change can be half visible.  So the table must not be published before then.

The applier publishes a CATCHING_UP table (LIVE) after a batch that leaves no lag against the end
offsets it saw.  The bootstrap therefore marks the table CATCHING_UP only when Debezium has *committed*
its source offset past the snapshot point, read from Kafka Connect (``GET /connectors/{name}/offsets``;
Connect commits a source offset only after every record before it is acknowledged by Kafka): from then
on, any end offsets the applier reads include every change up to the snapshot point.

The offsets compare exactly: Postgres ``lsn_commit`` (a transaction committed before the point has a
lower commit LSN and was streamed earlier, in commit order), MariaDB GTIDs per domain, MySQL GTID sets.
When Connect cannot tell (it is unreachable, or no connector there captures the table) the time rule
stands in: wait until the snapshot point's time plus ``bootstrap.replica_delay_seconds``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from cdc_lake.exceptions import BootstrapError

POLL_SECONDS = 1.0
_REQUEST_TIMEOUT = 10.0
_LSN = re.compile(r"^([0-9A-Fa-f]+)/([0-9A-Fa-f]+)$")


@dataclass(frozen=True)
class SnapshotPoint:
    """The position every partition's read is at or before, and the primary's clock then."""

    position: str
    clock_ms: int


def parse_lsn(text: str) -> int:
    """A Postgres LSN ``X/Y`` as a number."""
    match = _LSN.match(text.strip())
    if match is None:
        raise BootstrapError(f"{text!r} is not a Postgres LSN")
    return (int(match.group(1), 16) << 32) + int(match.group(2), 16)


def mariadb_gtids(text: str) -> dict[int, int]:
    """A MariaDB GTID position ``domain-server-seq,...`` as the highest sequence number per domain."""
    highest: dict[int, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        domain, _, seq = part.split("-")
        highest[int(domain)] = max(highest.get(int(domain), 0), int(seq))
    return highest


def mysql_gtids(text: str) -> dict[str, list[tuple[int, int]]]:
    """A MySQL GTID set ``uuid:1-5:7,...`` as intervals per source uuid."""
    sets: dict[str, list[tuple[int, int]]] = {}
    for part in filter(None, (p.strip() for p in text.replace("\n", "").split(","))):
        uuid, *ranges = part.split(":")
        for item in ranges:
            low, _, high = item.partition("-")
            sets.setdefault(uuid.lower(), []).append((int(low), int(high or low)))
    return sets


def _mysql_contains(have: dict[str, list[tuple[int, int]]], want: dict[str, list[tuple[int, int]]]) -> bool:
    for uuid, intervals in want.items():
        for low, high in intervals:
            if not any(a <= low and high <= b for a, b in have.get(uuid, [])):
                return False
    return True


def offset_passed(engine: str, offset: Mapping[str, Any], position: str) -> bool:
    """Whether a Debezium connector's committed source ``offset`` is at or past the primary ``position``."""
    if engine == "postgres":
        committed = offset.get("lsn_commit", offset.get("lsn"))
        return committed is not None and int(committed) >= parse_lsn(position)
    gtids = offset.get("gtids")
    if not gtids:
        return False
    if engine == "mariadb":
        have = mariadb_gtids(str(gtids))
        return all(have.get(domain, -1) >= seq for domain, seq in mariadb_gtids(position).items())
    return _mysql_contains(mysql_gtids(str(gtids)), mysql_gtids(position))


def _includes(include_list: str, table: str) -> bool:
    """Whether Debezium's ``table.include.list`` (comma-separated anchored regexes) matches ``table``."""
    return any(re.fullmatch(entry.strip(), table) for entry in include_list.split(",") if entry.strip())


def capturing_connectors(connect_url: str, topic_prefix: str, table: str) -> list[str]:
    """Connectors in Kafka Connect that write ``table`` (``schema.table``) under ``topic_prefix``."""
    response = requests.get(
        f"{connect_url.rstrip('/')}/connectors", params={"expand": "info"}, timeout=_REQUEST_TIMEOUT
    )
    response.raise_for_status()
    found = []
    for name, described in sorted(response.json().items()):
        config = described.get("info", {}).get("config", {})
        captured = _includes(config.get("table.include.list", ""), table)
        if captured and config.get("topic.prefix") == topic_prefix:
            found.append(name)
    return found


def committed_offsets(connect_url: str, connector: str) -> list[Mapping[str, Any]]:
    """The source offsets Kafka Connect has committed for ``connector`` (one per source partition)."""
    response = requests.get(
        f"{connect_url.rstrip('/')}/connectors/{quote(connector, safe='')}/offsets",
        timeout=_REQUEST_TIMEOUT,
    )
    response.raise_for_status()
    return [entry.get("offset", {}) for entry in response.json().get("offsets", [])]


@dataclass(frozen=True)
class HandoffWait:
    """Where to look and how long to wait."""

    connect_url: str
    engine: str
    topic_prefix: str
    delay_seconds: float
    timeout_seconds: float


def wait_until_streamed(
    table: str,
    source_table: str,
    point: SnapshotPoint,
    wait: HandoffWait,
    clock_ms: Callable[[], int],
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Block until Debezium's committed offsets pass ``point`` (or, failing that, its time + Δ)."""
    try:
        connectors = capturing_connectors(wait.connect_url, wait.topic_prefix, source_table)
    except requests.RequestException as exc:
        connectors = []
        reason = f"Kafka Connect unreachable ({type(exc).__name__})"
    else:
        reason = "no connector captures it"
    if connectors:
        return _wait_offsets(table, connectors, point, wait, sleep)
    target = point.clock_ms + int(wait.delay_seconds * 1000)
    while clock_ms() < target:
        sleep(min(POLL_SECONDS, max(0.05, (target - clock_ms()) / 1000)))
    return f"{reason}: waited until the snapshot point's time + {wait.delay_seconds:.0f}s"


def _wait_offsets(
    table: str,
    connectors: Sequence[str],
    point: SnapshotPoint,
    wait: HandoffWait,
    sleep: Callable[[float], None],
) -> str:
    deadline = time.monotonic() + wait.timeout_seconds
    pending = list(connectors)
    last: dict[str, list[Mapping[str, Any]]] = {}
    while True:
        for connector in list(pending):
            try:
                offsets = committed_offsets(wait.connect_url, connector)
            except requests.RequestException:
                continue
            last[connector] = offsets
            if offsets and all(offset_passed(wait.engine, o, point.position) for o in offsets):
                pending.remove(connector)
        if not pending:
            names = ", ".join(connectors)
            return f"Debezium ({names}) committed offsets past the snapshot point {point.position}"
        if time.monotonic() > deadline:
            seen = "; ".join(f"{c}: {last.get(c) or 'no offsets'}" for c in pending)
            raise BootstrapError(
                f"table {table}: Debezium did not stream past the snapshot point {point.position} within "
                f"{wait.timeout_seconds:.0f}s ({seen}); check the connector, then run the bootstrap again"
            )
        sleep(POLL_SECONDS)
