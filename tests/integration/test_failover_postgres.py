"""Scenario 1, Postgres failover: the stack's replica is promoted under writes and the lake is repaired,
not copied again (issue 38).

A Postgres 15 logical slot does not follow a failover, so the new primary needs a new slot, and the lake
holds rows the new primary never had.  The test makes that happen for real: a LIVE table is written by
a writer; the replica stops receiving WAL (a partition); the old primary goes on committing transactions
the replica never receives (bulk WAL first, so its LSNs run far ahead of where the replica stops, then a
row set to values the new primary will also write later); Debezium streams them and the lake applies
them; the old primary stops; the replica is promoted and written at once (changes made before any slot
exists on it); the stack rebuilds its pair (the old primary's server becomes a standby of the new one).

The operator's path (docs/runbooks/position-lost.md) as the CLI runs it: the config re-pointed at the new
pair, ``offboard SOURCE``, ``onboard SOURCE --after-failover`` (new slot; the table CATCHING_UP, its lake
copy kept, possibly diverged), the applier until LIVE under a second writer, ``repair TABLE`` (the keys
validate finds different and every key above the fork), a change of the equal-valued lost row on the
new primary at an LSN below the lost row's, the writer stopped, the table drained, ``validate`` (exit 0,
the mark cleared), and the lake equal to the new primary in every column with Spark+Hudi, the second
reader and Trino through the catalog, no duplicate key.  Afterwards the stack's pair is restored
(:func:`cdc_lake.stack.postgres.restore_pair`).  Reduced size in CI; ``benchmarks/failover_bench.py``
times it on 1M rows against the full copy.

Failed first: on the code before ``--after-failover`` the onboard option does not exist.  It has teeth
(both mutations tried on the stack): without the keys above the fork the lost row keeps its LSN, the new
primary's later change of it is dropped and the final ``validate`` exits 4; without the restart offsets
the old primary's re-send marks skip the new one's changes and it exits 4 too.  The same rules fail the
model (tests/unit/apply/test_apply_model.py,
``test_a_row_the_new_primary_never_had_is_repaired_even_when_equal``,
``test_a_recapture_read_under_the_old_marks_fails_the_model``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from support.bootstrap import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    postgres_db,
    state_of,
    wait_for_schema,
    write_db_config,
)
from support.common import cli_run, load
from support.engines import POSTGRES

from cdc_lake.hudi.writer import read_table
from cdc_lake.sources.postgres.positions import Lsn
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.postgres import PostgresServer, restore_pair
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.serial, pytest.mark.spark, pytest.mark.timeout(1500)]

ROWS = 300
LOST_ROW = 2
"""Set by a transaction only the old primary has, to the values the new primary writes later."""
SAME = "grp = 7, val = 'same on both', amount = 1.00, updated = '2025-01-01', flag = true"


@pytest.fixture
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def _lsn(server: PostgresServer) -> Lsn:
    """A primary's WAL write position, a standby's replay position."""
    with server.connect() as conn:
        row = conn.execute(
            "select (case when pg_is_in_recovery() then pg_last_wal_replay_lsn() "
            "else pg_current_wal_lsn() end)::text"
        ).fetchone()
    assert row is not None
    return Lsn.parse(str(row[0]))


def _running(server: PostgresServer) -> None:
    """Start ``server`` again if it was stopped, and wait until it answers."""
    server.start()
    deadline = time.monotonic() + 60
    while True:
        try:
            with server.connect() as conn:
                conn.execute("select 1")
            return
        except psycopg.OperationalError:
            pass
        assert time.monotonic() < deadline, f"{server.name} does not answer"
        time.sleep(0.5)


def _stop_receiving(replica: PostgresServer) -> None:
    replica.stop_receiving()
    deadline = time.monotonic() + 30
    with replica.connect() as conn:
        while conn.execute("select count(*) from pg_stat_wal_receiver").fetchone() != (0,):
            assert time.monotonic() < deadline, "the replica still receives WAL"
            time.sleep(0.2)


def _pair_config(tmp_path: Path, db: SourceDb, primary: PostgresServer, replica: PostgresServer) -> Path:
    """The test's config with the source's primary and replica on the given servers."""
    entry = db.source_config([{"name": "items"}])
    settings = {
        "primary": {**entry["primary"], "port": primary.port},
        "replica": {**entry["replica"], "port": replica.port},
    }
    path: Path = write_db_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"), settings)
    return path


def test_a_postgres_failover_is_repaired_without_a_copy(
    spark: SparkSession, local_stack: LocalStack, db: SourceDb, tmp_path: Path
) -> None:
    old, new = local_stack.postgres_primary, local_stack.postgres_replica
    POSTGRES.aware_items(db, "items", ROWS)
    config_path = _pair_config(tmp_path, db, old, new)
    onboard(config_path, db.source)
    table = db.qualified("items")
    config = load(config_path)
    db.execute("update public.items set val = 'first' where id = 1")
    wait_for_schema(config, table)
    assert cli_run(config_path, "bootstrap", table).exit_code == 0
    apply_until_live(spark, config, table)

    failed_over = False
    try:
        writer = ChangeWriter(db, "items", ROWS, max_transactions=150, pause=0.02).start()
        time.sleep(2)
        _stop_receiving(new)
        failed_over = True
        fork = _lsn(new)
        time.sleep(2)  # the writer's transactions from here on are lost with the old primary
        writer.stop()
        db.execute(
            "create table public.filler as "
            "select g, repeat('x', 400) as pad from generate_series(1, 200000) g"
        )
        db.execute(f"update public.items set {SAME} where id = {LOST_ROW}")
        # A row only the old primary has; its event's stream position starts from the lost row's commit
        # (Postgres 15 sends no empty transaction), so the old re-send mark lies above the new primary's.
        db.execute(
            "insert into public.items (id, grp, val, amount, updated, flag) "
            "values (100002, 2, 'lost insert', 3.50, '2025-03-03 00:00:00+00', true)"
        )
        lost_at = _lsn(old)
        # Above what the new primary writes in this test, base backups' WAL switches (16 MB each) included.
        assert lost_at.value - fork.value > 64 * 2**20, (str(fork), str(lost_at))
        apply_until_live(spark, config, table)
        lake = read_table(spark, config.lake.table_base_path(table))
        [lost] = lake.where(F.col("id") == LOST_ROW).collect()
        assert lost["val"] == "same on both", lost
        assert lake.where(F.col("id") == 100002).count() == 1

        old.stop()
        new.promote()
        promoted = replace(db, postgres=new)
        # Before any slot exists on the new primary: never streamed.
        promoted.execute(
            "update public.items set val = 'gap' where id = 3",
            "delete from public.items where id = 4",
            "insert into public.items (id, grp, val, amount, updated, flag) "
            "values (100001, 1, 'gap insert', 2.50, '2025-02-02 00:00:00+00', false)",
        )
        old.follow(new)  # the stack's pair again: the old primary's server is a standby of the new one
        config_path = _pair_config(tmp_path, db, new, old)
        config = load(config_path)

        offboarded = cli_run(config_path, "offboard", db.source)
        assert offboarded.exit_code == 0, offboarded.stderr or offboarded.output
        recaptured = cli_run(config_path, "onboard", db.source, "--after-failover", "--json")
        assert recaptured.exit_code == 0, recaptured.stderr or recaptured.output
        assert any("recaptured" in a for a in json.loads(recaptured.stdout)["actions"]), recaptured.stdout
        assert state_of(config, table) is TableState.CATCHING_UP
        with StateStore.open(config.state_store.url) as store:
            assert "cdc-lake repair" in (store.require_table(table).possibly_diverged or "")

        writer = ChangeWriter(promoted, "items", ROWS, max_transactions=120, pause=0.05, seed=12,
                              new_ids_from=200_000).start()
        promoted.execute(f"update public.items set {SAME} where id = {LOST_ROW}")
        apply_until_live(spark, config, table)
        repaired = cli_run(config_path, "repair", table, "--json")
        assert repaired.exit_code == 0, repaired.stderr or repaired.output
        outcome = json.loads(repaired.stdout)
        assert outcome["above_fork"] >= 1 and outcome["keys"] >= 3 and outcome["commit"], outcome

        # The lost row was equal: only its place above the fork made the repair rewrite it.  The new
        # primary's next change of it is written below the lost row's LSN, and must win.
        promoted.execute(f"update public.items set val = 'after the repair' where id = {LOST_ROW}")
        assert _lsn(new).value < lost_at.value, "the new primary's LSNs must stay below the lost row's"
        writer.stop()
        apply_until_live(spark, config, table)
        validated = cli_run(config_path, "validate", table)
        assert validated.exit_code == 0, validated.stderr or validated.output
        with StateStore.open(config.state_store.url) as store:
            assert store.require_table(table).possibly_diverged is None
            assert store.recapture(table) is None
        assert assert_lake_equals_source(spark, config, promoted, "items") >= ROWS // 2
    finally:
        if failed_over:
            _running(new)
            if not new.in_recovery():  # promoted: the old primary takes over again
                restore_pair(old, new)
            else:  # stopped receiving, never promoted
                _running(old)
                new.follow(old)
