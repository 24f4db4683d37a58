"""Bootstrap from the stack's Postgres streaming replica, handed off to the applier, on real Debezium.

The tables are CI-sized (tens of thousands of rows, with smaller partitions than production so a table
still spans several partitions and commits); ``benchmarks/bootstrap_bench.py`` runs the same on 1M rows.
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
from bootstrap_support import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    cli_run,
    commit_runs,
    kill_after_first_commit,
    load,
    onboard,
    postgres_db,
    state_of,
    wait_for_schema,
    write_config,
)
from pyspark.sql import SparkSession

from bootstrap import partitions
from bootstrap import run as bootstrap_run
from bootstrap.replica_wait import ReplicaWait, wait_for_replica
from bootstrap.write import ATTEMPT_KEY, PARTITIONS_KEY
from cdc_lake.config import Source
from cdc_lake.exceptions import BootstrapError
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.hudi.writer import read_table
from cdc_lake.lake.checkpoint import OFFSETS_KEY
from cdc_lake.sources import engine_for
from cdc_lake.sources.snapshot import SnapshotSource
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import LockPurpose, table_lock
from cdc_lake.state.records import Watermark
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

ITEMS = """
create table public.{name} (
    id bigint primary key, grp int not null, val text, amount numeric(12, 2), updated timestamp(6),
    flag boolean
);
insert into public.{name}
select g, g % 10, 'v' || g || repeat('x', {width}), g / 7.0, timestamp '2024-01-01' + g * interval '1 second',
       g % 2 = 0
from generate_series(1, {rows}) g;
analyze public.{name};
"""


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


@pytest.fixture
def small_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions of 5000 rows and commits of one partition per slot, so CI tables span several."""
    monkeypatch.setattr(partitions, "SINGLE_PARTITION_ROWS", 1000)
    monkeypatch.setattr(partitions, "ROWS_PER_PARTITION", 5000)
    monkeypatch.setattr(bootstrap_run, "PARTITIONS_PER_COMMIT_PER_SLOT", 1)


def _items(db: SourceDb, name: str, rows: int, width: int = 0) -> None:
    db.execute(ITEMS.format(name=name, rows=rows, width=width))


def test_bootstrap_while_the_table_changes_ends_equal_to_the_source(
    spark: SparkSession, db: SourceDb, tmp_path: Path, small_partitions: None
) -> None:
    _items(db, "items", 30_000)
    config_path = write_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("items")
    config = load(config_path)
    writer = ChangeWriter(db, "items", 30_000, max_transactions=2000).start()
    time.sleep(1)

    result = cli_run(config_path, "bootstrap", table, "--json")

    assert result.exit_code == 0, result.stderr
    [outcome] = json.loads(result.stdout)
    assert outcome["state"] == "CATCHING_UP"
    planned = outcome["partitions"]
    assert planned in (6, 7)
    assert outcome["rows"] >= 29_000
    writer.stop()
    assert writer.transactions > 100
    assert min(writer.ops.values()) > 20

    commit = latest_commit(spark, config.lake.table_base_path(table))
    assert commit is not None and commit.operation == "BULK_INSERT"
    assert ATTEMPT_KEY in commit.metadata and commit.metadata[PARTITIONS_KEY]
    with StateStore.open(config.state_store.url) as store:
        watermark = store.get_watermark(table)
        assert watermark is not None and watermark.replica_position_reached
        assert json.loads(commit.metadata[OFFSETS_KEY]) == {str(p): o for p, o in watermark.offsets.items()}
        assert all(p.done for p in watermark.partitions)
    commits = commit_runs(config_path, table)
    assert len(commits) > 1
    assert sorted(i for group in commits for i in group) == list(range(planned))

    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "items") > 25_000

    status = json.loads(cli_run(config_path, "status", "--json").stdout)
    [row] = [r for r in status if r["name"] == table]
    assert row["state"] == "LIVE"
    assert row["bootstrap"]["phase"] == "done"
    assert row["bootstrap"]["partitions_done"] == row["bootstrap"]["partitions_total"] == planned
    assert row["bootstrap"]["rows_written"] == outcome["rows"]
    assert row["bootstrap"]["last_run"]["outcome"] == "ok"


def test_a_killed_bootstrap_resumes_where_it_stopped(
    spark: SparkSession, db: SourceDb, tmp_path: Path, small_partitions: None
) -> None:
    _items(db, "killed", 40_000)
    config_path = write_config(tmp_path, db, [{"name": "killed"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("killed")
    config = load(config_path)
    writer = ChangeWriter(db, "killed", 40_000, max_transactions=3000, seed=5).start()

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
    _items(db, "dropped", 30_000, width=2000)
    config_path = write_config(tmp_path, db, [{"name": "dropped"}], str(tmp_path / "lake"))
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
        with caplog.at_level(logging.INFO, logger="bootstrap.run"):
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
    _items(db, "lost", 2_000)
    tables = [{"name": "nokey"}, {"name": "lost"}]
    # A lake under a regular file: nothing can be written there until the file goes.
    blocked = tmp_path / "blocked"
    blocked.write_text("not a directory")
    config_path = write_config(tmp_path, db, tables, str(blocked))
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

    not_a_replica = write_config(tmp_path / "primary-as-replica", db, tables, str(tmp_path / "lake"))
    ports = db.stack.layout.ports
    text = not_a_replica.read_text().replace(
        f"port: {ports.postgres_replica}", f"port: {ports.postgres_primary}"
    )
    not_a_replica.write_text(text)
    _register(not_a_replica, db, ["lost"])
    refused = cli_run(not_a_replica, "bootstrap", lost)
    _one_line_error(refused.stderr, "is not a standby")

    failed = cli_run(config_path, "bootstrap", lost)
    _one_line_error(failed.stderr, f"table {lost}: writing partitions [0] failed", "run the bootstrap again")
    assert state_of(config, lost) is TableState.BOOTSTRAPPING
    with StateStore.open(config.state_store.url) as store:
        watermark = store.get_watermark(lost)
    assert watermark is not None and [p.index for p in watermark.pending_partitions] == [0]

    blocked.unlink()
    # The hand-off needs Debezium to capture the table (no time fallback): onboard it for real now.
    onboard(write_config(tmp_path / "onboard", db, [{"name": "lost"}], str(blocked)), db.source)
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


TYPES = """
create type public.mood as enum ('happy', 'sad', 'meh');
create table public.types (
    id int primary key, si smallint, i integer, bi bigint, r real, dp double precision, amount numeric(12, 2),
    free numeric, wide numeric(50, 10), flag boolean, name varchar(40), code char(5), note text,
    data bytea, d date, t time(6), ts timestamp(6), tstz timestamptz, uid uuid, doc json, docb jsonb,
    mood public.mood, tags text[], nums int[]
);
"""
TYPE_ROW = """
insert into public.types
select g, (g % 30000)::smallint, g * 1000, g::bigint * 1000000000, g / 3.0, g / 7.0, g / 9.0,
       round(g / 11.0, 12), (g::numeric * 10^20) / 7, g % 2 = 0, 'name-' || g, 'c' || (g % 100),
       'note ''quoted'' ünï', decode(lpad(to_hex(g), 8, '0'), 'hex'), date '1900-02-28' + g,
       time '00:00:01.5' + g * interval '17 minutes',
       timestamp '2024-03-01 12:34:56.654321' + g * interval '1 hour',
       timestamptz '2024-03-01 10:00+02' + g * interval '1 day', gen_random_uuid(),
       json_build_object('k', g, 'list', json_build_array(1, 2)), jsonb_build_object('n', g),
       (array['happy', 'sad', 'meh'])[1 + g % 3]::public.mood, array['a', 'b' || g, 'with,comma'],
       array[g, -g, 0]
from generate_series({first}, {last}) g;
insert into public.types (id) values ({nulls});
"""


def test_every_mapped_type_agrees_with_the_applier(spark: SparkSession, db: SourceDb, tmp_path: Path) -> None:
    db.execute(TYPES, TYPE_ROW.format(first=1, last=300, nulls=100_000))
    config_path = write_config(tmp_path, db, [{"name": "types"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    config = load(config_path)
    table = db.qualified("types")
    # An event makes Debezium register the table's value schema, which the bootstrap checks its types against.
    db.execute(TYPE_ROW.format(first=301, last=310, nulls=100_001))
    wait_for_schema(config, table)

    result = cli_run(config_path, "bootstrap", table)

    assert result.exit_code == 0, result.stderr
    base_path = config.lake.table_base_path(table)
    bootstrapped = read_table(spark, base_path).schema
    assert_lake_equals_source(spark, config, db, "types")
    db.execute(
        "update public.types set amount = amount + 1, tags = array['x'], t = '23:59:59.999999' where id < 50",
        "delete from public.types where id between 50 and 60",
        TYPE_ROW.format(first=400, last=410, nulls=100_002),
    )
    apply_until_live(spark, config, table)
    assert_lake_equals_source(spark, config, db, "types")
    assert read_table(spark, base_path).schema == bootstrapped, "the applier changed the bootstrapped schema"
