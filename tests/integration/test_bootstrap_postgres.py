"""Bootstrap behaviour only Postgres has: a read dropped by the server, WAL lag, the failure paths.

What every engine does (bootstrap while the table changes, every mapped type, a server that is not a
replica) is in test_bootstrap_behaviors.py.  The resume of a killed bootstrap is here, on Postgres only:
what it resumes (the plan, the partitions done, the commits) is engine-independent state.  The tables
are CI-sized, with smaller partitions than production so a table still spans several partitions and
commits.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    commit_runs,
    kill_after_first_commit,
    onboard,
    state_of,
    wait_for_schema,
    wait_streamed,
    write_db_config,
)
from support.common import cli_run, load
from support.engines import POSTGRES

from cdc_lake.config import Source
from cdc_lake.exceptions import BootstrapError
from cdc_lake.hudi import writer as hudi_writer
from cdc_lake.sources import engine_for
from cdc_lake.sources.snapshot import SnapshotSource
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import LockPurpose, table_lock
from cdc_lake.state.records import Watermark
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap import partition_copy, partitions
from cdc_lake_bootstrap.replica_wait import ReplicaWait, wait_for_replica

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with POSTGRES.database(local_stack) as created:
        yield created


@pytest.fixture
def small_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions of 5000 rows and commits of one partition per slot, so CI tables span several."""
    monkeypatch.setattr(partitions, "SINGLE_PARTITION_ROWS", 1000)
    monkeypatch.setattr(partitions, "ROWS_PER_PARTITION", 5000)
    monkeypatch.setattr(partition_copy, "PARTITIONS_PER_COMMIT_PER_SLOT", 1)


def test_a_killed_bootstrap_resumes_where_it_stopped(
    spark: SparkSession, db: SourceDb, tmp_path: Path, small_partitions: None
) -> None:
    POSTGRES.items(db, "killed", 40_000)
    config_path = write_db_config(tmp_path, db, [{"name": "killed"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("killed")
    config = load(config_path)
    writer = ChangeWriter(db, "killed", 40_000, max_transactions=3000, seed=5).start()
    wait_for_schema(config, table)

    done_before = kill_after_first_commit(config_path, table)

    assert state_of(config, table) is TableState.BOOTSTRAPPING
    result = cli_run(config_path, "bootstrap", table)
    assert result.exit_code == 0, result.stderr
    writer.stop()
    commits = commit_runs(config_path, table)
    with StateStore.open(config.state_store.url) as store:
        watermark = store.get_watermark(table)
    assert watermark is not None and len(watermark.partitions) >= 8
    indexes = sorted(i for group in commits for i in group)
    assert indexes == list(range(len(watermark.partitions))), "each partition committed once in all"
    assert len(commits) > len(done_before)
    apply_until_live(spark, config, table)
    assert_lake_equals_source(spark, config, db, "killed")


def test_a_connection_dropped_mid_read_is_read_again(
    spark: SparkSession,
    db: SourceDb,
    tmp_path: Path,
    small_partitions: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    POSTGRES.items(db, "dropped", 30_000, width=2000)
    config_path = write_db_config(tmp_path, db, [{"name": "dropped"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("dropped")
    config = load(config_path)
    replica = db.stack.postgres_replica
    killed: list[int] = []
    stop = threading.Event()

    def drop_one_read() -> None:
        with replica.connect(db.database) as conn:
            conn.autocommit = True
            while not stop.is_set() and not killed:
                rows = conn.execute(
                    "select pid from pg_stat_activity where application_name = 'cdc-lake-bootstrap' "
                    "and state = 'active' and query like %s",
                    ('%FROM "public"."dropped" WHERE%',),
                ).fetchall()
                for (pid,) in rows[:1]:
                    if conn.execute("select pg_terminate_backend(%s)", (pid,)).fetchone() == (True,):
                        killed.append(pid)
                time.sleep(0.01)

    watcher = threading.Thread(target=drop_one_read, daemon=True)
    watcher.start()
    try:
        with caplog.at_level(logging.INFO, logger="cdc_lake_bootstrap.partition_copy"):
            result = cli_run(config_path, "bootstrap", table)
    finally:
        stop.set()
        watcher.join()

    assert result.exit_code == 0, result.stderr
    assert killed, "no bootstrap read was caught running"
    assert any("trying again" in record.getMessage() for record in caplog.records)
    assert sorted(i for group in commit_runs(config_path, table) for i in group) == list(range(6))
    apply_until_live(spark, config, table)
    assert_lake_equals_source(spark, config, db, "dropped")


def _register(config_path: Path, db: SourceDb, tables: list[str]) -> None:
    """Record tables as onboarded (PENDING_BOOTSTRAP) without a connector: the failures come first."""
    config = load(config_path)
    with StateStore.open(config.state_store.url) as store:
        store.upsert_source(db.source, "postgres", [])
        for name in tables:
            qualified = db.qualified(name)
            store.upsert_table(qualified, db.source, 1, config.lake.table_base_path(qualified))


def _one_line_error(result_stderr: str, *fragments: str) -> None:
    assert result_stderr.startswith("error: ") and result_stderr.count("\n") == 1, result_stderr
    for fragment in fragments:
        assert fragment in result_stderr, result_stderr


def test_bad_input_fails_clearly_and_publishes_nothing(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(
        "create table public.nokey (x int, y text)",
        "insert into public.nokey select g, 'y' from generate_series(1, 10) g",
    )
    POSTGRES.items(db, "lost", 2_000)
    tables = [{"name": "nokey"}, {"name": "lost"}]
    # A lake under a regular file: nothing can be written there until the file goes.
    blocked = tmp_path / "blocked"
    blocked.write_text("not a directory")
    config_path = write_db_config(tmp_path, db, tables, str(blocked))
    _register(config_path, db, ["nokey", "lost"])
    config = load(config_path)
    lost = db.qualified("lost")

    no_key = cli_run(config_path, "bootstrap", db.qualified("nokey"))
    assert no_key.exit_code == 1
    _one_line_error(no_key.stderr, f"table {db.qualified('nokey')} has no primary key")
    assert state_of(config, db.qualified("nokey")) is TableState.PENDING_BOOTSTRAP

    with table_lock(config.state_store.url, LockPurpose.BOOTSTRAP, lost) as held:
        assert held
        busy = cli_run(config_path, "bootstrap", lost)
    _one_line_error(busy.stderr, "another bootstrap of this table is running")
    assert state_of(config, lost) is TableState.PENDING_BOOTSTRAP

    failed = cli_run(config_path, "bootstrap", lost)
    _one_line_error(failed.stderr, f"table {lost}: writing partitions [0] failed", "run the bootstrap again")
    assert state_of(config, lost) is TableState.BOOTSTRAPPING
    with StateStore.open(config.state_store.url) as store:
        watermark = store.get_watermark(lost)
    assert watermark is not None and [p.index for p in watermark.pending_partitions] == [0]

    blocked.unlink()
    # The hand-off needs Debezium to capture the table (no time fallback): onboard it for real now.
    onboard(write_db_config(tmp_path / "onboard", db, [{"name": "lost"}], str(blocked)), db.source)
    resumed = cli_run(config_path, "bootstrap", lost)

    assert resumed.exit_code == 0, resumed.stderr
    with StateStore.open(config.state_store.url) as store:
        again = store.get_watermark(lost)
    assert again is not None and again.created_at == watermark.created_at
    assert state_of(config, lost) is TableState.CATCHING_UP
    assert assert_lake_equals_source(spark, config, db, "lost") == 2_000


def test_a_replica_that_lags_forever_fails_saying_how_far_behind(db: SourceDb) -> None:
    entry = db.source_config([])
    password = os.environ.get("CDC_LAKE_DB_PASSWORD") or "cdc-lake-local"
    for role in ("primary", "replica"):
        entry[role] = {**entry[role], "password": password}
    engine = engine_for(Source.model_validate({**entry, "name": db.source}))
    high, low = (int(part, 16) for part in engine.current_position().split("/"))
    ahead = f"{high + 1:X}/{low:X}"
    watermark = Watermark(
        table="t",
        topic="t",
        offsets={},
        ts_source_ms=None,
        source_position=ahead,
        created_at=dt.datetime.now(dt.UTC),
        replica_position_reached=False,
        partitions=(),
    )

    with pytest.raises(BootstrapError) as raised:
        wait_for_replica("t", cast(SnapshotSource, engine), watermark, ReplicaWait(1, 2))

    assert f"did not replay past {ahead} within 2s" in str(raised.value)
    assert "bytes of WAL behind" in str(raised.value)



def test_a_table_an_earlier_version_bootstrapped_with_row_writer_keys_stops_naming_rebootstrap(
    spark: SparkSession, db: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 34 review 8: cdc-lake before 419a223 bulk-inserted a timestamp key through Hudi's row writer
    # (millisecond text), which the applier never writes: every update left a second row.  Such a table
    # stops FAILED at its next batch, naming the way out, instead of going on doubling rows.
    db.execute(
        "create table old_keys (k timestamptz primary key, note text)",
        "insert into old_keys select timestamptz '2024-01-01 12:00:00.123475+00' "
        "+ g * interval '1 microsecond', 'v' || g from generate_series(0, 4) g",
    )
    config_path = write_db_config(tmp_path, db, [{"name": "old_keys"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    config = load(config_path)
    table = db.qualified("old_keys")
    db.execute("update old_keys set note = 'w0' where note = 'v0'")  # registers the value schema
    wait_for_schema(config, table)
    monkeypatch.setattr(hudi_writer, "row_writer_keys_agree", lambda schema, keys: True)  # the old choice
    assert cli_run(config_path, "bootstrap", table).exit_code == 0
    monkeypatch.undo()
    db.execute("update old_keys set note = note || '!'")
    wait_streamed(config, table)

    applied = cli_run(config_path, "apply", "--once", "--tables", table)

    assert applied.exit_code != 0, applied.output
    assert state_of(config, table) is TableState.FAILED, (applied.output, applied.stderr)
    status = cli_run(config_path, "status", "--json")
    assert "see docs/runbooks/table-failed.md" in status.stderr, status.stderr
    reason = next(t for t in json.loads(status.stdout) if t["name"] == table)["last_error"]
    assert "'2024-01-01 12:00:00.123', written by the bootstrap of an earlier cdc-lake" in reason, reason
    assert "cdc-lake rebootstrap" in reason and "\n" not in reason
