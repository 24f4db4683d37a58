"""Bootstrap behaviour on every engine of the stack: from its replica, handed off to the applier.

Each test runs once per engine (the ``engine`` fixture, tests/support/engines.py) against a
throwaway database of that engine, onboarded for real.  The tables are CI-sized (tens of thousands of
rows, with smaller partitions than production so a table still spans several partitions and commits);
``benchmarks/bootstrap_bench.py`` runs the same on 1M rows.  Postgres-only behaviour (a read dropped by
the server, WAL lag, the failure paths) is in test_bootstrap_postgres.py, and so is the resume of a killed
bootstrap: its plan, partitions and commits are the state store's and the lake's, the same for every
engine, and each engine's partitioned read is the first test's (one engine there saves CI 80 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pymysql
import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    commit_runs,
    onboard,
    state_of,
    wait_for_schema,
    write_db_config,
)
from support.common import cli_run, load
from support.engines import StackEngine

from cdc_lake.config import Source
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.hudi.writer import read_table
from cdc_lake.lake.commit_metadata import ATTEMPT_KEY, OFFSETS_KEY, PARTITIONS_KEY
from cdc_lake.sources import engine_for
from cdc_lake.sources.snapshot import SESSION_WAIT_FAILED, SessionWait
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap import partition_copy, partitions

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def db(engine: StackEngine, local_stack: LocalStack) -> Iterator[SourceDb]:
    with engine.database(local_stack) as created:
        yield created


@pytest.fixture
def small_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions of 5000 rows and commits of one partition per slot, so CI tables span several."""
    monkeypatch.setattr(partitions, "SINGLE_PARTITION_ROWS", 1000)
    monkeypatch.setattr(partitions, "ROWS_PER_PARTITION", 5000)
    monkeypatch.setattr(partition_copy, "PARTITIONS_PER_COMMIT_PER_SLOT", 1)


def test_bootstrap_while_the_table_changes_ends_equal_to_the_source(
    engine: StackEngine, spark: SparkSession, db: SourceDb, tmp_path: Path, small_partitions: None
) -> None:
    engine.items(db, "items", 30_000)
    config_path = write_db_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("items")
    config = load(config_path)
    writer = ChangeWriter(db, "items", 30_000, max_transactions=2000).start()
    # The bootstrap checks its types against Debezium's registered schema (MariaDB's `flag boolean` is
    # tinyint(1) in the catalog: the registered schema says what it streams); a change registers it.
    wait_for_schema(config, table)

    result = cli_run(config_path, "bootstrap", "--source", db.source, "--all-pending", "--json")

    assert result.exit_code == 0, result.stderr
    [outcome] = json.loads(result.stdout)
    assert outcome["table"] == table and outcome["state"] == "CATCHING_UP"
    planned = outcome["partitions"]
    assert planned >= 6
    if engine.partitions_of_30k is not None:
        assert planned in engine.partitions_of_30k
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
    # Kafka's own lag tool sees the copy's consumer group from the hand-off on, at the watermark.
    [handed] = [r for r in json.loads(cli_run(config_path, "status", "--json").stdout) if r["name"] == table]
    described = subprocess.run(
        [
            sys.executable,
            "-m",
            "cdc_lake",
            "stack",
            "kafka",
            "consumer-groups",
            "--describe",
            "--group",
            handed["consumer_group"],
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert described.returncode == 0, described.stderr
    rows = [
        line.split() for line in described.stdout.splitlines() if line.startswith(handed["consumer_group"])
    ]
    assert {int(r[2]): int(r[3]) for r in rows} == watermark.offsets, described.stdout

    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "items") > 25_000

    status = json.loads(cli_run(config_path, "status", "--json").stdout)
    [row] = [r for r in status if r["name"] == table]
    assert row["state"] == "LIVE"
    assert row["bootstrap"]["phase"] == "done"
    assert row["bootstrap"]["partitions_done"] == row["bootstrap"]["partitions_total"] == planned
    assert row["bootstrap"]["rows_written"] == outcome["rows"]
    assert row["bootstrap"]["last_run"]["outcome"] == "ok"
    again = cli_run(config_path, "bootstrap", "--source", db.source, "--all-pending", "--json")
    assert json.loads(again.stdout) == [], "a LIVE table is no longer pending"


def test_every_mapped_type_agrees_with_the_applier(
    engine: StackEngine, spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(engine.types_ddl)
    engine.types(db, 1, 300, nulls=100_000)
    config_path = write_db_config(tmp_path, db, [{"name": "types"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    config = load(config_path)
    table = db.qualified("types")
    # An event makes Debezium register the table's value schema, which the bootstrap checks its types against.
    engine.types(db, 301, 310, nulls=100_001)
    wait_for_schema(config, table)

    result = cli_run(config_path, "bootstrap", table)

    assert result.exit_code == 0, result.stderr
    base_path = config.lake.table_base_path(table)
    bootstrapped = read_table(spark, base_path).schema
    assert_lake_equals_source(spark, config, db, "types")
    db.execute(*engine.type_changes)
    engine.types(db, 400, 410, nulls=100_002)
    apply_until_live(spark, config, table)
    assert_lake_equals_source(spark, config, db, "types")
    assert read_table(spark, base_path).schema == bootstrapped, "the applier changed the bootstrapped schema"


def test_a_server_that_is_not_a_replica_is_refused(engine: StackEngine, db: SourceDb, tmp_path: Path) -> None:
    engine.items(db, "plain", 100)
    config_path = write_db_config(tmp_path, db, [{"name": "plain"}], str(tmp_path / "lake"))
    replica, primary = engine.replica_port(db.stack), engine.primary_port(db.stack)
    config_path.write_text(config_path.read_text().replace(f"port: {replica}", f"port: {primary}"))
    config = load(config_path)
    table = db.qualified("plain")
    with StateStore.open(config.state_store.url) as store:
        store.upsert_source(db.source, engine.name, [])
        store.upsert_table(table, db.source, 1, config.lake.table_base_path(table))

    result = cli_run(config_path, "bootstrap", table)

    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert engine.not_a_replica in result.stderr
    assert state_of(config, table) is TableState.PENDING_BOOTSTRAP


SERVER_ERRORS = (psycopg.Error, pymysql.MySQLError)


def _ahead(engine: StackEngine, position: str) -> str:
    """A position the primary has not reached: the WAL a GiB on, or every domain 1000 GTIDs on."""
    if engine.name == "postgres":
        high, low = position.split("/")
        return f"{int(high, 16) + 1:X}/{low}"
    return ",".join(
        f"{domain}-{server}-{int(seq) + 1000}"
        for domain, server, seq in (part.split("-") for part in position.split(","))
    )


def test_each_read_session_waits_for_the_watermark_position_on_its_own_server(
    engine: StackEngine, db: SourceDb
) -> None:
    # The session statements of a replica read (cdc_lake.sources.snapshot.SessionWait), run as Spark's
    # JDBC sessions run them, on the stack's servers: a replayed position passes at once; one the
    # replica has not replayed fails after the wait; the primary is no replica to read.
    entry = db.source_config([])
    password = os.environ.get("CDC_LAKE_DB_PASSWORD") or "cdc-lake-local"
    for role in ("primary", "replica"):
        entry[role] = {**entry[role], "password": password}
    source_engine = engine_for(Source.model_validate({**entry, "name": db.source}))
    reached = source_engine.current_position()
    source_engine.wait_replica_past(reached, 60)
    stack = db.stack

    def session(position: str, server: str) -> float:
        """Run the session statements waiting for ``position`` on ``server``; the seconds they took."""
        statement = source_engine.jdbc_access("replica", SessionWait(position, 2)).session_init
        began = time.monotonic()
        if engine.name == "postgres":
            target = stack.postgres_replica if server == "replica" else stack.postgres_primary
            with target.connect(db.database) as conn:
                conn.execute(statement.encode())
        else:
            maria = stack.mariadb_replica if server == "replica" else stack.mariadb_primary
            with maria.connect(db.database) as conn, conn.cursor() as cur:
                cur.execute(statement)
        return time.monotonic() - began

    assert session(reached, "replica") < 1
    began = time.monotonic()
    late = f"{SESSION_WAIT_FAILED} this (standby replayed|server applied) [^ ]+ in 2s"
    with pytest.raises(SERVER_ERRORS, match=late):
        session(_ahead(engine, reached), "replica")
    assert time.monotonic() - began >= 2
    refused = "this server is not a standby" if engine.name == "postgres" else "this server applied nothing"
    with pytest.raises(SERVER_ERRORS, match=f"{SESSION_WAIT_FAILED} {refused}"):
        session(reached, "primary")


KEYED_TABLES = {
    # Keys a microsecond apart (the row writer's millisecond text made them one), and binary keys.
    "postgres": (
        "create table ts_keyed (k timestamptz primary key, note text)",
        "insert into ts_keyed select timestamptz '2024-01-01 12:00:00.123475+00' "
        "+ g * interval '1 microsecond', 'v' || g from generate_series(0, 19) g",
        "create table bin_keyed (k bytea primary key, note text)",
        "insert into bin_keyed select decode(lpad(to_hex(g), 4, '0'), 'hex'), 'v' || g "
        "from generate_series(0, 19) g",
    ),
    "mariadb": (
        "create table ts_keyed (k timestamp(6) not null primary key, note text)",
        "insert into ts_keyed select timestamp'2024-01-01 12:00:00.123475' + interval seq microsecond, "
        "concat('v', seq) from seq_0_to_19",
        "create table bin_keyed (k varbinary(8) not null primary key, note text)",
        "insert into bin_keyed select unhex(lpad(hex(seq), 4, '0')), concat('v', seq) from seq_0_to_19",
    ),
}


def test_timestamp_and_binary_keys_keep_one_row_per_key_after_the_hand_off(
    engine: StackEngine, spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    # Issue 34's scenario: 20 rows bootstrapped, every row updated, 9 deleted, applied; the lake held 31
    # rows for the source's 11 when the bootstrap and the applier built different record keys.
    db.execute(*KEYED_TABLES[engine.name])
    names = ("ts_keyed", "bin_keyed")
    config_path = write_db_config(tmp_path, db, [{"name": n} for n in names], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    config = load(config_path)
    concat = "note || '!'" if engine.name == "postgres" else "concat(note, '!')"
    for name in names:
        db.execute(f"update {name} set note = 'w0' where note = 'v0'")  # registers the value schema
        wait_for_schema(config, db.qualified(name))
    result = cli_run(config_path, "bootstrap", "--source", db.source, "--all-pending")
    assert result.exit_code == 0, result.stderr

    for name in names:
        db.execute(f"update {name} set note = {concat}", f"delete from {name} where note like 'v_!'")
    for name in names:
        apply_until_live(spark, config, db.qualified(name))
        assert assert_lake_equals_source(spark, config, db, name, key=("k",)) == 11
