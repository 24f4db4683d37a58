"""Bootstrap from the stack's MariaDB replica (GTID replication), handed off to the applier.

CI-sized tables with small partitions, as in the Postgres tests; the 1M-row run is in benchmarks/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

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
    mariadb_db,
    onboard,
    state_of,
    wait_for_schema,
    write_config,
)
from pyspark.sql import SparkSession

from bootstrap import partitions
from bootstrap import run as bootstrap_run
from cdc_lake.hudi.writer import read_table
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

ITEMS = (
    "create table {name} (id bigint primary key, grp int not null, val varchar(200), amount decimal(12, 2), "
    "updated datetime(6), flag boolean)",
    "insert into {name} select seq, seq % 10, concat('v', seq), seq / 7, "
    "timestamp'2024-01-01 00:00:00' + interval seq second, seq % 2 = 0 from seq_1_to_{rows}",
    "analyze table {name}",
)


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with mariadb_db(local_stack) as created:
        yield created


@pytest.fixture
def small_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions of 5000 rows and commits of one partition per slot, so CI tables span several."""
    monkeypatch.setattr(partitions, "SINGLE_PARTITION_ROWS", 1000)
    monkeypatch.setattr(partitions, "ROWS_PER_PARTITION", 5000)
    monkeypatch.setattr(bootstrap_run, "PARTITIONS_PER_COMMIT_PER_SLOT", 1)


def _items(db: SourceDb, name: str, rows: int) -> None:
    db.execute(*(statement.format(name=name, rows=rows) for statement in ITEMS))


def test_bootstrap_while_the_table_changes_ends_equal_to_the_source(
    spark: SparkSession, db: SourceDb, tmp_path: Path, small_partitions: None
) -> None:
    _items(db, "items", 30_000)
    config_path = write_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("items")
    config = load(config_path)
    writer = ChangeWriter(db, "items", 30_000, max_transactions=2000).start()
    # `flag boolean` is tinyint(1) in the catalog; Debezium's registered schema says what it streams.
    wait_for_schema(config, table)

    result = cli_run(config_path, "bootstrap", "--source", db.source, "--all-pending", "--json")

    assert result.exit_code == 0, result.stderr
    [outcome] = json.loads(result.stdout)
    assert outcome["table"] == table and outcome["state"] == "CATCHING_UP"
    assert outcome["partitions"] >= 6
    writer.stop()
    assert writer.transactions > 100
    commits = commit_runs(config_path, table)
    assert len(commits) > 1
    assert sorted(i for group in commits for i in group) == list(range(outcome["partitions"]))
    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "items") > 25_000
    again = cli_run(config_path, "bootstrap", "--source", db.source, "--all-pending", "--json")
    assert json.loads(again.stdout) == [], "a LIVE table is no longer pending"


def test_a_killed_bootstrap_resumes_where_it_stopped(
    spark: SparkSession, db: SourceDb, tmp_path: Path, small_partitions: None
) -> None:
    _items(db, "killed", 40_000)
    config_path = write_config(tmp_path, db, [{"name": "killed"}], str(tmp_path / "lake"))
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
    with StateStore.open(config.state_store.url) as store:
        watermark = store.get_watermark(table)
    assert watermark is not None and len(watermark.partitions) >= 8
    commits = commit_runs(config_path, table)
    assert sorted(i for group in commits for i in group) == list(range(len(watermark.partitions)))
    assert len(commits) > len(done_before)
    apply_until_live(spark, config, table)
    assert_lake_equals_source(spark, config, db, "killed")


TYPES = (
    "create table types (id int primary key, ti tinyint, flag tinyint(1), su smallint unsigned, "
    "mi mediumint, i int, iu int unsigned, bi bigint, bu bigint unsigned, amount decimal(12, 2), "
    "big decimal(30, 10), "
    "f float, d2 double, name varchar(40), code char(5), note text, e enum('a', 'b'), st set('x', 'y'), "
    "doc json, data blob, b bit(1), y year, dt date, dtm datetime(3), ts timestamp(6) null, t time(6))"
)
TYPE_ROWS = (
    "insert into types select seq, cast(seq as signed) % 100 - 50, seq % 2, seq % 60000, seq * 7, "
    "seq * 1000, seq * 4000000, seq * 1000000000, 18446744073709551615 - seq, seq / 9, "
    "seq * 12345.6789, seq / 4, seq / 7, "
    "concat('name-', seq), concat('c', seq % 100), 'note ''quoted'' ünï', if(seq % 2, 'a', 'b'), "
    "if(seq % 3, 'x,y', 'y'), json_object('k', seq), unhex(lpad(hex(seq), 8, '0')), seq % 2, "
    "1901 + seq % 200, "
    "date'1900-02-28' + interval seq day, timestamp'2024-03-01 12:34:56.654' + interval seq hour, "
    "timestamp'2024-03-01 10:00:00.123456' + interval seq day, "
    "if(seq % 2, time'-838:59:59.000000', time'00:00:01.5') + interval seq minute "
    "from seq_{first}_to_{last}",
    "insert into types (id) values ({nulls})",
)


def test_every_mapped_type_agrees_with_the_applier(spark: SparkSession, db: SourceDb, tmp_path: Path) -> None:
    db.execute(TYPES, *(s.format(first=1, last=300, nulls=100_000) for s in TYPE_ROWS))
    config_path = write_config(tmp_path, db, [{"name": "types"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    config = load(config_path)
    table = db.qualified("types")
    db.execute(*(s.format(first=301, last=310, nulls=100_001) for s in TYPE_ROWS))
    wait_for_schema(config, table)

    result = cli_run(config_path, "bootstrap", table)

    assert result.exit_code == 0, result.stderr
    base_path = config.lake.table_base_path(table)
    bootstrapped = read_table(spark, base_path).schema
    assert_lake_equals_source(spark, config, db, "types")
    db.execute(
        "update types set amount = amount + 1, t = '12:00:00.25', ts = null where id < 50",
        "delete from types where id between 50 and 60",
        *(s.format(first=400, last=410, nulls=100_002) for s in TYPE_ROWS),
    )
    apply_until_live(spark, config, table)
    assert_lake_equals_source(spark, config, db, "types")
    assert read_table(spark, base_path).schema == bootstrapped, "the applier changed the bootstrapped schema"


def test_a_server_that_is_not_a_replica_is_refused(db: SourceDb, tmp_path: Path) -> None:
    _items(db, "plain", 100)
    config_path = write_config(tmp_path, db, [{"name": "plain"}], str(tmp_path / "lake"))
    ports = db.stack.layout.ports
    text = config_path.read_text().replace(f"port: {ports.mariadb_replica}", f"port: {ports.mariadb_primary}")
    config_path.write_text(text)
    config = load(config_path)
    table = db.qualified("plain")
    with StateStore.open(config.state_store.url) as store:
        store.upsert_source(db.source, "mariadb", [])
        store.upsert_table(table, db.source, 1, config.lake.table_base_path(table))

    result = cli_run(config_path, "bootstrap", table)

    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "is not a replica (SHOW SLAVE STATUS is empty)" in result.stderr
    assert state_of(config, table) is TableState.PENDING_BOOTSTRAP
