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

The offsets compare exactly, as the source engine's position type says
(:mod:`cdc_lake.sources.positions`): Postgres ``lsn_commit`` (a transaction committed before the point
has a lower commit LSN and was streamed earlier, in commit order), MariaDB GTIDs per domain, MySQL GTID
sets by containment.

An offset short of the point is then judged on the source (``HandoffWait.streamed_through``, the
engine's :meth:`~cdc_lake.sources.snapshot.SnapshotSource.streamed_through`).  Debezium adds a GTID to
its offset only once the next event group starts, so on a MySQL/MariaDB source left idle after a group
without rows (a DDL or a GRANT, in any database, captured or not) its committed GTIDs never reach the
point.  MariaDB reads its binlog from the offset's ``file``/``pos`` (where the connector would restart):
the GTID position there plus the standalone, row-free groups right after it; those hold no change to
stream, so a position that covers the point that way is past it.  MySQL has no such reading yet.

There is no fallback: the hand-off publishes nothing on a guess.  Kafka Connect is asked through
:class:`cdc_lake.connect.client.KafkaConnectClient` (each request retried with backoff); while it is
unreachable, or its connectors have not committed past the point, the bootstrap keeps polling (each
unreachable spell logged) up to ``bootstrap.handoff_timeout_seconds``, then fails the table's hand-off
with one line naming what it saw.  The table stays BOOTSTRAPPING (the applier leaves it alone) and
running the bootstrap again resumes at the hand-off.  When Connect answers but no connector captures
the table, the hand-off fails at once: the source must be onboarded first.  So it does when a capturing
connector or one of its tasks is FAILED (checked at every poll, as ``cdc-lake lag``'s
CdcLakeConnectorFailed checks it): its offsets cannot move until it is restarted, and the error names
the task's cause and ``docs/runbooks/connector-failed.md``.

Nor does it hand off a copy it cannot publish: one holding rows that share a configured key that is not
the primary key (:func:`check_unique_copy`; a unique index dropped since onboarding), or one whose
watermark offsets are of a topic deleted and created again under its name since (:func:`check_same_topic`:
another Kafka topic id, whose offsets start over, so replaying from them would skip or repeat changes).
Running the bootstrap again would refuse the same copy, so the table stays BOOTSTRAPPING and the error
names the way out that makes a new one, ``cdc-lake rebootstrap TABLE`` (:func:`rebootstrap_way_out`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cdc_lake.config import KafkaSettings
from cdc_lake.connect.client import ConnectorStatus, connector_failure
from cdc_lake.exceptions import BootstrapError, ConnectError, SourceEngineError
from cdc_lake.kafka.offsets import topic_state
from cdc_lake.lake.format import LakeFormat
from cdc_lake.lake.target import TableTarget
from cdc_lake.sources.positions import LogPosition
from cdc_lake.sources.snapshot import SnapshotSource, TableShape
from cdc_lake.spark.errors import JVM_ERRORS, root_cause
from cdc_lake.state.records import Watermark
from cdc_lake_bootstrap.keys import duplicate_key, unique_by_definition

_LOG = logging.getLogger(__name__)

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class SnapshotPoint:
    """The position every partition's read is at or before, and the primary's clock then."""

    position: str
    clock_ms: int


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

    def status(self, name: str) -> ConnectorStatus:
        """The state of connector ``name`` and its tasks."""
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
    """Where to look and how long to wait (``bootstrap.handoff_timeout_seconds``).

    ``streamed_through`` is the engine's :meth:`~cdc_lake.sources.snapshot.SnapshotSource.streamed_through`:
    how far an offset that stops short of the point has streamed, read on the source.
    """

    position_type: type[LogPosition]
    topic_prefix: str
    timeout_seconds: float
    streamed_through: Callable[[Mapping[str, Any]], str | None]

    @classmethod
    def of(cls, engine: SnapshotSource, topic_prefix: str, timeout_seconds: float) -> HandoffWait:
        """The wait for a table of ``engine``'s source."""
        return cls(engine.position_type, topic_prefix, timeout_seconds, engine.streamed_through)


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
            found = _pending(table, connect, source_table, point, wait)
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
    table: str, connect: ConnectOffsets, source_table: str, point: SnapshotPoint, wait: HandoffWait
) -> str | dict[str, list[dict[str, Any]]]:
    """What passed (a sentence), or the capturing connectors still behind with their offsets.

    Raises BootstrapError when one of them (or its task) FAILED: its offsets will not move.
    """
    connectors = capturing_connectors(connect, wait.topic_prefix, source_table)
    failure = connector_failure(connect, connectors)
    if failure is not None:
        raise BootstrapError(
            f"table {table}: not handed off: {failure}; the table stays BOOTSTRAPPING: once the connector "
            f"streams again, run cdc-lake bootstrap {table} again (it resumes at the hand-off)"
        )
    behind: dict[str, list[dict[str, Any]]] = {}
    read_on_source: list[str] = []
    for name in connectors:
        offsets = connect.offsets(name)
        if offsets and all(wait.position_type.offset_covers(o, point.position) for o in offsets):
            continue
        if offsets and all(_streamed_past(table, wait, o, point.position) for o in offsets):
            read_on_source.append(name)
            continue
        behind[name] = offsets
    if connectors and not behind:
        how = (
            f"; {', '.join(read_on_source)} past it in the source's log (only groups without rows after "
            "its committed GTIDs)"
            if read_on_source
            else ""
        )
        return (
            f"Debezium ({', '.join(connectors)}) committed offsets past the snapshot point {point.position}"
            + how
        )
    return behind if connectors else {}


def _streamed_past(table: str, wait: HandoffWait, offset: Mapping[str, Any], position: str) -> bool:
    """Whether ``offset`` covers ``position`` by its own position or by what the source's log says.

    The source's log is a refinement: when it cannot be read (the primary unreachable, the binlog
    listing refused), the offset's own position decides and the wait goes on; an offset the engine
    cannot parse still fails at once.
    """
    if wait.position_type.offset_covers(offset, position):
        return True
    try:
        through = wait.streamed_through(offset)
    except SourceEngineError as exc:
        _LOG.warning("%s: hand-off cannot read the source's log past the connector's offset: %s", table, exc)
        return False
    parse = wait.position_type.parse
    return through is not None and parse(through).covers(parse(position))


def rebootstrap_way_out(target: TableTarget) -> str:
    """The command that leads a table out of a hand-off refused for good: a new copy by re-bootstrap (a
    re-bootstrap's own copy, ``TABLE~vN``, is rolled back first, or the re-bootstrap would resume it)."""
    if target.lake_name is None:
        return f"cdc-lake rebootstrap {target.qualified_name}"
    return f"cdc-lake rebootstrap {target.lake_name} --abort, then cdc-lake rebootstrap {target.lake_name}"


def check_unique_copy(target: TableTarget, lake: LakeFormat, key: tuple[str, ...], shape: TableShape) -> None:
    """Refuse the hand-off of a copy holding two rows with one value of ``key`` (never checked for a key
    that holds the primary key: no two rows can share it)."""
    if unique_by_definition(key, shape):
        return
    table, path = target.qualified_name, target.base_path
    try:
        shared = duplicate_key(lake.read(path), key)
    except JVM_ERRORS as exc:
        raise BootstrapError(
            f"table {table}: reading its copy at {path} for rows sharing a key failed: {root_cause(exc)}"
        ) from exc
    if shared is None:
        return
    value, rows = shared
    raise BootstrapError(
        f"table {table}: not handed off: its copy holds {rows} rows with key {value} (the key columns "
        f"({', '.join(key)}) are not unique in the source: a unique index dropped since onboarding?); the "
        "table stays BOOTSTRAPPING: make the key unique on the source (a unique index over NOT NULL "
        f"columns) or set tables[].key to columns that are, then run {rebootstrap_way_out(target)}"
    )


def check_same_topic(target: TableTarget, watermark: Watermark, kafka: KafkaSettings) -> None:
    """Refuse the hand-off when the table's topic is not the one whose offsets the watermark holds: its
    Kafka id differs now, or it is gone.  A watermark without an id (saved before ids were recorded, or
    by a broker without them) is not compared."""
    if watermark.topic_id is None:
        return
    now = topic_state(kafka.bootstrap_servers, watermark.topic, extra=kafka.consumer).topic_id
    if now == watermark.topic_id:
        return
    raise BootstrapError(
        f"table {target.qualified_name}: not handed off: topic {watermark.topic!r} was deleted "
        f"{'and created again ' if now else ''}since the watermark (topic id {watermark.topic_id}, now "
        f"{now or 'none'}), so the watermark's offsets are of another log; the table stays BOOTSTRAPPING: "
        f"run {rebootstrap_way_out(target)}"
    )
