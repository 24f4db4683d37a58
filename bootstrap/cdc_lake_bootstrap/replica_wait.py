"""Step 2: wait until the read replica has replayed past the watermark, before reading from it.

The exact rule, used whenever the watermark has a position: the replica's replay position reaches the
primary position saved with the watermark (Postgres ``pg_last_wal_replay_lsn()``; MariaDB
``MASTER_GTID_WAIT``; MySQL ``WAIT_FOR_EXECUTED_GTID_SET``).

The time rule, for a source without positions (MySQL without GTIDs): the replica's last replayed commit
is at or past ``Tₛ + Δ`` (``bootstrap.replica_delay_seconds``: Debezium's delay plus a buffer).  It is
weaker: Postgres' replay timestamp does not move while the primary is idle, and MySQL's
``Seconds_Behind_Source`` reads 0 while the I/O thread itself is behind.

Either way a replica that does not get there within ``bootstrap.replica_wait_timeout_seconds`` fails
the bootstrap, saying how far behind it is.  While waiting, the replica's replication state is checked
every :data:`CHECK_SECONDS` (the engine's ``check_replica``: still a standby, replay not paused; MySQL's
replication threads running): a replica that stopped replicating ends the wait at once, naming why and
``docs/runbooks/replica-lagging.md``, instead of after the whole timeout.

This wait runs on one connection of the bootstrap's, on every run (a resumed one may reach another
replica than the first).  Each JDBC session that then reads a partition asserts the same position on
its own server (:class:`cdc_lake.sources.snapshot.SessionWait`, :mod:`cdc_lake_bootstrap.partition_copy`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from cdc_lake.exceptions import BootstrapError, SourceEngineError
from cdc_lake.sources.snapshot import SnapshotSource
from cdc_lake.state.records import Watermark

POLL_SECONDS = 0.5
CHECK_SECONDS = 30.0
"""How long a wait runs before checking again that the replica still replicates."""
REPLICA_RUNBOOK = "docs/runbooks/replica-lagging.md"
TIMEOUT_SETTING = "bootstrap.replica_wait_timeout_seconds"
"""The setting bounding every wait for the replica (this one, and each read session's)."""


@dataclass(frozen=True)
class ReplicaWait:
    """The rule and limits of the wait (from the ``bootstrap`` config section)."""

    delay_seconds: float
    timeout_seconds: float


def wait_for_replica(
    table: str,
    engine: SnapshotSource,
    watermark: Watermark,
    wait: ReplicaWait,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Block until the replica is past ``watermark``; returns how it was decided, for the log."""
    position = watermark.source_position
    if position:
        return wait_replica_past(table, engine, position, wait.timeout_seconds, clock)
    if watermark.ts_source_ms is None:
        raise BootstrapError(f"table {table}: the watermark has neither a position nor a time to wait for")
    target_ms = watermark.ts_source_ms + int(wait.delay_seconds * 1000)
    deadline = clock() + wait.timeout_seconds
    checked = clock()
    while True:
        replayed_ms = engine.replica_replay_time_ms()
        if replayed_ms is not None and replayed_ms >= target_ms:
            return f"replica replayed a commit of {replayed_ms} ms, past Tₛ + Δ = {target_ms} ms"
        if clock() > deadline:
            behind = "unknown" if replayed_ms is None else f"{(target_ms - replayed_ms) / 1000:.1f}s"
            raise BootstrapError(
                f"table {table}: the read replica did not replay past Tₛ + Δ within "
                f"{wait.timeout_seconds:.0f}s ({TIMEOUT_SETTING}; behind by {behind})"
            )
        if clock() - checked >= CHECK_SECONDS:
            _check_replicating(table, engine, "past Tₛ + Δ")
            checked = clock()
        sleep(POLL_SECONDS)


def wait_replica_past(
    table: str,
    engine: SnapshotSource,
    position: str,
    timeout_seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Block until the replica has replayed ``position`` (the exact rule); returns how, for the log.

    The engine's wait runs for at most :data:`CHECK_SECONDS` at a time, the replication state checked
    in between.
    """
    deadline = clock() + timeout_seconds
    while True:
        try:
            reached = engine.wait_replica_past(position, max(0.0, min(CHECK_SECONDS, deadline - clock())))
        except SourceEngineError as exc:
            _check_replicating(table, engine, position)
            if clock() < deadline:
                continue
            lag = _lag(engine, position)
            raise BootstrapError(
                f"table {table}: the read replica did not replay past {position} within "
                f"{timeout_seconds:.0f}s ({TIMEOUT_SETTING}; {lag}); {exc}"
            ) from None
        return f"replica replayed {reached}, past the watermark position {position}"


def _check_replicating(table: str, engine: SnapshotSource, target: str) -> None:
    """Raise BootstrapError naming why when the replica no longer replicates (it would never get there)."""
    try:
        engine.check_replica()
    except SourceEngineError as exc:
        raise BootstrapError(
            f"table {table}: the read replica stopped replicating before it replayed {target}: {exc} "
            f"({REPLICA_RUNBOOK}); once it replicates again, run the command again"
        ) from None


def _lag(engine: SnapshotSource, position: str) -> str:
    try:
        return engine.replica_lag(position)
    except SourceEngineError as exc:
        return f"lag unknown: {exc}"
