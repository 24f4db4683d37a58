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

There is no fallback: the hand-off publishes nothing on a guess.  Kafka Connect is asked through
:class:`cdc_lake.connect.client.KafkaConnectClient` (each request retried with backoff); while it is
unreachable, or its connectors have not committed past the point, the bootstrap keeps polling (each
unreachable spell logged) up to ``bootstrap.handoff_timeout_seconds``, then fails the table's hand-off
with one line naming what it saw.  The table stays BOOTSTRAPPING (the applier leaves it alone) and
running the bootstrap again resumes at the hand-off.  When Connect answers but no connector captures
the table, the hand-off fails at once: the source must be onboarded first.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cdc_lake.exceptions import BootstrapError, ConnectError

_LOG = logging.getLogger(__name__)

POLL_SECONDS = 1.0
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


class ConnectOffsets(Protocol):
    """What the hand-off asks Kafka Connect (:class:`cdc_lake.connect.client.KafkaConnectClient`)."""

    url: str

    def list_configs(self) -> dict[str, dict[str, str]]:
        """Every connector's config by name."""
        ...

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """The source offsets committed for connector ``name``."""
        ...


def capturing_connectors(connect: ConnectOffsets, topic_prefix: str, table: str) -> list[str]:
    """Connectors in Kafka Connect that write ``table`` (``schema.table``) under ``topic_prefix``."""
    return [
        name
        for name, config in sorted(connect.list_configs().items())
        if config.get("topic.prefix") == topic_prefix
        and _includes(config.get("table.include.list", ""), table)
    ]


@dataclass(frozen=True)
class HandoffWait:
    """Where to look and how long to wait (``bootstrap.handoff_timeout_seconds``)."""

    engine: str
    topic_prefix: str
    timeout_seconds: float


def wait_until_streamed(
    table: str,
    source_table: str,
    point: SnapshotPoint,
    wait: HandoffWait,
    connect: ConnectOffsets,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> str:
    """Block until every connector capturing the table has committed offsets past ``point``.

    Raises BootstrapError when no connector captures the table, or when ``wait.timeout_seconds`` pass
    first (Connect unreachable, or Debezium behind): the table is then not handed off.
    """
    deadline = monotonic() + wait.timeout_seconds
    while True:
        try:
            found = _pending(connect, source_table, point, wait)
        except ConnectError as exc:
            seen = f"Kafka Connect unreachable: {exc}"
            _LOG.warning("%s: hand-off waits for Debezium past %s: %s", table, point.position, seen)
        else:
            if isinstance(found, str):
                return found
            if not found:
                raise BootstrapError(
                    f"table {table}: no connector at {connect.url} captures {source_table} under topic "
                    f"prefix {wait.topic_prefix}; run cdc-lake onboard for its source, then the bootstrap "
                    "again"
                )
            seen = "; ".join(f"{name}: {offsets or 'no offsets'}" for name, offsets in found.items())
        if monotonic() >= deadline:
            raise BootstrapError(
                f"table {table}: not handed off, Debezium not seen past the snapshot point {point.position} "
                f"within {wait.timeout_seconds:.0f}s ({seen}); the table stays BOOTSTRAPPING: fix that, then "
                f"run cdc-lake bootstrap {table} again (it resumes at the hand-off)"
            )
        sleep(POLL_SECONDS)


def _pending(
    connect: ConnectOffsets, source_table: str, point: SnapshotPoint, wait: HandoffWait
) -> str | dict[str, list[dict[str, Any]]]:
    """What passed (a sentence), or the capturing connectors still behind with their offsets."""
    connectors = capturing_connectors(connect, wait.topic_prefix, source_table)
    behind: dict[str, list[dict[str, Any]]] = {}
    for name in connectors:
        offsets = connect.offsets(name)
        if not offsets or not all(offset_passed(wait.engine, o, point.position) for o in offsets):
            behind[name] = offsets
    if connectors and not behind:
        return (
            f"Debezium ({', '.join(connectors)}) committed offsets past the snapshot point {point.position}"
        )
    return behind if connectors else {}
