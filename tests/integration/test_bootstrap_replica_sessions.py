"""Every session that reads a partition asserts the watermark's position on its own server, on every run.

The bootstrap waits for the replica on one connection of its own; Spark's partitions open their own,
which a load-balanced reader endpoint (a cloud reader endpoint, HAProxy, a pooler) may send to another
replica, one further behind.  Here the stack's replica stops replaying (Postgres ``pg_wal_replay_pause()``,
MariaDB ``STOP SLAVE SQL_THREAD``) while the primary writes; the bootstrap's own connections (its
replica check and its wait) are answered as an up-to-date replica of the pool would answer them, so only
the partition sessions reach the stale one.  Before, the copy read it silently: the rows written before
the watermark were in neither the lake nor the replayed changes.  Each run now fails in one line naming
the position and ``bootstrap.replica_wait_timeout_seconds``, a resumed run too (it waits for the replica
again); once replay resumes, the next run completes and the lake equals the source.

``serial``: the replica it stops is every test's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    state_of,
    wait_for_schema,
    write_db_config,
)
from support.common import assert_one_line_failure, cli_run, load
from support.engines import StackEngine

from cdc_lake.sources import engine_for
from cdc_lake.sources.snapshot import SnapshotSource
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap import run as bootstrap_run

pytestmark = [pytest.mark.integration, pytest.mark.serial, pytest.mark.spark, pytest.mark.timeout(600)]

WAIT_SECONDS = 3
"""``bootstrap.replica_wait_timeout_seconds`` of these runs: each failing wait costs this much."""
SERVER_SAYS = {
    # A paused standby short of the position fails at once; MariaDB's wait takes its timeout.
    "postgres": "its WAL replay is paused",
    "mariadb": f"in {WAIT_SECONDS}s (docs/runbooks/replica-lagging.md)",
}
"""What the stale server's session says, as the one-line error quotes it."""


@pytest.fixture(scope="module")
def db(engine: StackEngine, local_stack: LocalStack) -> Iterator[SourceDb]:
    with engine.database(local_stack) as created:
        yield created


@contextmanager
def replay_stopped(engine: StackEngine, stack: LocalStack) -> Iterator[None]:
    """The stack's replica of ``engine`` replays nothing inside; resumed on the way out, whatever happens."""
    if engine.name == "postgres":
        with stack.postgres_replica.connect() as replica:
            replica.execute("select pg_wal_replay_pause()")
            try:
                yield
            finally:
                replica.execute("select pg_wal_replay_resume()")
        return
    # Stopping replication is administration (REPLICATION SLAVE ADMIN): root, not the application user.
    replica = stack.mariadb_replica.root_connection()
    try:
        with replica.cursor() as cur:
            cur.execute("STOP SLAVE SQL_THREAD")
        yield
    finally:
        with replica.cursor() as cur:
            cur.execute("START SLAVE SQL_THREAD")
        replica.close()


def test_a_partition_session_on_a_replica_behind_the_watermark_fails_the_bootstrap_until_it_catches_up(
    engine: StackEngine,
    spark: SparkSession,
    db: SourceDb,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine.items(db, "stale", 2000)
    config_path = write_db_config(
        tmp_path,
        db,
        [{"name": "stale"}],
        str(tmp_path / "lake"),
        bootstrap={"replica_delay_seconds": 2, "replica_wait_timeout_seconds": WAIT_SECONDS},
    )
    onboard(config_path, db.source)
    config = load(config_path)
    table = db.qualified("stale")
    db.execute("update stale set grp = grp + 1 where id = 1")  # registers the value schema
    wait_for_schema(config, table)
    source, _ = config.table(table)
    engine_class = type(engine_for(source))

    with replay_stopped(engine, db.stack):
        db.execute(
            "insert into stale select id + 100000, grp, 'written after the pause', amount, updated, flag "
            "from stale where id <= 300",
            "update stale set val = 'updated after the pause' where id between 301 and 400",
            "delete from stale where id between 401 and 450",
        )
        # The bootstrap's own connections reach an up-to-date replica of the pool; Spark's, this one.
        monkeypatch.setattr(engine_class, "check_replica", lambda _self: "a replica of the pool")
        monkeypatch.setattr(bootstrap_run, "wait_for_replica", _waited_elsewhere)

        first = cli_run(config_path, "bootstrap", table)

        position = _watermark_position(config_path, table)
        assert_one_line_failure(
            first,
            f"table {table}: partitions [0] not read: their session's server had not replayed the "
            f"watermark position {position}, waiting at most {WAIT_SECONDS}s "
            "(bootstrap.replica_wait_timeout_seconds): ",
            SERVER_SAYS[engine.name],
            "docs/runbooks/replica-lagging.md",
            f"run cdc-lake bootstrap {table} again",
        )
        assert state_of(config, table) is TableState.BOOTSTRAPPING

        # Resumed, with the replica still behind: the run waits for it again, on its own connection.
        monkeypatch.setattr(bootstrap_run, "wait_for_replica", _real_wait_for_replica)
        resumed = cli_run(config_path, "bootstrap", table)

        assert_one_line_failure(
            resumed,
            f"table {table}: the read replica did not replay past {position} within {WAIT_SECONDS}s "
            "(bootstrap.replica_wait_timeout_seconds; ",
        )
        assert state_of(config, table) is TableState.BOOTSTRAPPING
    monkeypatch.undo()

    cast(SnapshotSource, engine_for(source)).wait_replica_past(position, 60)
    again = cli_run(config_path, "bootstrap", table)

    assert again.exit_code == 0, again.stderr or again.output
    assert state_of(config, table) is TableState.CATCHING_UP
    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "stale") == 2000 + 300 - 50


_real_wait_for_replica = bootstrap_run.wait_for_replica


def _waited_elsewhere(*_args: Any) -> str:
    return "another replica of the pool replayed the watermark position"


def _watermark_position(config_path: Path, table: str) -> str:
    with StateStore.open(load(config_path).state_store.url) as store:
        watermark = store.get_watermark(table)
    assert watermark is not None and watermark.source_position and watermark.replica_position_reached
    return watermark.source_position
