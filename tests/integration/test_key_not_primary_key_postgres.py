"""Scenario: a Postgres table whose configured ``key`` is not its primary key, on the real stack.

``items`` has the primary key ``id`` and a unique ``code``; the config keys it by ``code``.  With
REPLICA IDENTITY DEFAULT, pgoutput sends no old ``code`` when it changes and a delete's before image
carries only ``id``, so onboarding must refuse the table by name and create nothing.  With REPLICA
IDENTITY FULL (set by ``onboard --replica-identity-full``), updates that change ``code`` (also two rows
trading codes in one transaction, and a code moved then deleted) and deletes end with the lake equal to
the source, read with Spark+Hudi and with hudi-rs.  A table whose identity is set back to DEFAULT after
onboarding stops at the first update that lacks the old ``code`` (issue 34 review 6).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.apply import config_dict, postgres_capture, record_catching_up
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    postgres_db,
    state_of,
    wait_streamed,
    write_db_config,
)
from support.common import assert_one_line_failure, cli_run, load, run_json, write_and_load
from support.onboard import connectors_of
from support.second_reader import second_reader_rows

from cdc_lake.hudi.writer import read_table
from cdc_lake.sources import engine_for
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ITEMS = """
create table public.{name} (id bigint primary key, code text not null unique, val text, n integer);
insert into public.{name} select g, 'c' || g, 'v' || g, g from generate_series(1, 40) g;
"""
COLUMNS = ("id", "code", "val", "n")


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def _identity(db: SourceDb, table: str) -> str:
    with db.connect_pg() as conn:
        row = conn.execute("select relreplident::text from pg_class where oid = %s::regclass", (table,))
        found = row.fetchone()
    assert found is not None
    return str(found[0])


def test_key_not_primary_key_with_default_identity_is_refused_by_name_and_creates_nothing(
    db: SourceDb, tmp_path: Path
) -> None:
    db.execute(ITEMS.format(name="refused"))
    config_path = write_db_config(
        tmp_path, db, [{"name": "refused", "key": ["code"]}], str(tmp_path / "lake")
    )

    result = cli_run(config_path, "onboard", db.source)

    assert_one_line_failure(
        result,
        "replica identity",
        "public.refused (key code; identity DEFAULT = primary key id)",
        "REPLICA IDENTITY FULL",
        "--replica-identity-full",
    )
    assert connectors_of(db.source) == []
    with db.connect_pg() as conn:
        assert conn.execute("select count(*) from pg_publication").fetchone() == (0,)
        slots = conn.execute(
            "select count(*) from pg_replication_slots where slot_name like %s", (f"%{db.suffix}%",)
        ).fetchone()
        assert slots == (0,)
    with StateStore.open(load(config_path).state_store.url) as store:
        assert store.list_tables() == []
    assert _identity(db, "public.refused") == "d"


def test_a_configured_key_no_unique_index_covers_is_refused_by_name_and_creates_nothing(
    db: SourceDb, tmp_path: Path
) -> None:
    """Issue 34 review 7: a configured key must be unique in the source, or the bootstrap's bulk insert
    stores rows sharing it as two lake rows of one record key.  A unique index over a nullable column
    does not make it unique, nor does a partial one; once the column is NOT NULL the key passes."""
    db.execute(
        "create table public.loose (id bigint primary key, code text, val text)",
        "create unique index loose_code on public.loose (code)",
        "create table public.partial (id bigint primary key, grp int not null)",
        "create unique index partial_grp on public.partial (grp) where grp > 0",
    )
    tables = [{"name": "loose", "key": ["code"]}, {"name": "partial", "key": ["grp"]}]
    config_path = write_db_config(tmp_path, db, tables, str(tmp_path / "lake"))

    result = cli_run(config_path, "onboard", db.source, "--replica-identity-full")

    assert_one_line_failure(
        result,
        "primary keys: configured key not unique in the source",
        "public.loose (code), public.partial (grp)",
        "CREATE UNIQUE INDEX",
    )
    assert connectors_of(db.source) == []
    assert _identity(db, "public.loose") == "d"
    db.execute("alter table public.loose alter column code set not null")
    report = run_json(
        config_path, "onboard", db.source, "--dry-run", "--tables", "public.loose", "--replica-identity-full"
    )
    assert [c["outcome"] for c in report["checks"] if c["check"] == "primary keys"] == ["pass"]


def test_key_not_primary_key_with_full_identity_key_changes_and_deletes_end_equal(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(ITEMS.format(name="items"))
    config_path = write_db_config(tmp_path, db, [{"name": "items", "key": ["code"]}], str(tmp_path / "lake"))
    result = cli_run(config_path, "onboard", db.source, "--replica-identity-full")
    assert result.exit_code == 0, result.stderr or result.output
    assert _identity(db, "public.items") == "f"
    table = db.qualified("items")
    config = load(config_path)
    bootstrapped = cli_run(config_path, "bootstrap", table, "--json")
    assert bootstrapped.exit_code == 0, bootstrapped.stderr
    assert json.loads(bootstrapped.stdout)[0]["state"] == "CATCHING_UP"

    db.execute(
        # A key change, then its old key taken by another row in the same transaction.
        "update public.items set code = 'moved-1', val = 'm1' where id = 1",
        "update public.items set code = 'c1', val = 'took c1' where id = 2",
    )
    db.execute(
        # Two rows trading codes through a temporary one, in one transaction.
        "update public.items set code = 'tmp' where id = 3",
        "update public.items set code = 'c3' where id = 4",
        "update public.items set code = 'c4' where id = 3",
    )
    db.execute(
        "update public.items set code = 'gone-5' where id = 5",
        "delete from public.items where id = 5",  # the moved row deleted under its new key
        "delete from public.items where id = 6",
        "update public.items set n = -7 where id = 7",  # no key change
        "update public.items set code = 'c6', val = 'reused' where id = 8",  # the deleted row's key reused
    )
    db.execute("update public.items set code = 'x' || code where id between 20 and 30")
    db.execute("delete from public.items where id between 25 and 35")

    apply_until_live(spark, config, table)

    assert state_of(config, table) is TableState.LIVE
    assert assert_lake_equals_source(spark, config, db, "items", key=("code",)) == 27
    source = sorted(tuple(row[c] for c in COLUMNS) for row in db.rows("items", ("code",)))
    base_path = config.lake.table_base_path(table)
    lake = sorted(tuple(row[c] for c in COLUMNS) for row in second_reader_rows(base_path, COLUMNS))
    assert lake == source


def test_a_unique_index_dropped_after_onboarding_stops_the_hand_off_and_rebootstrap_leads_out(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    """Issue 34 review 7: onboarding checked the unique index over ``code``; it is dropped afterwards and
    two rows share a code.  The bootstrap's copy holds both (a bulk insert stores every row), so it
    refuses the hand-off naming the table, the key and the shared value: the table stays BOOTSTRAPPING
    (never published), a second run refuses again, and once the source is fixed `cdc-lake rebootstrap`
    copies it anew and publishes it equal to the source."""
    db.execute(ITEMS.format(name="unindexed"))
    config_path = write_db_config(
        tmp_path, db, [{"name": "unindexed", "key": ["code"]}], str(tmp_path / "lake")
    )
    onboarded = cli_run(config_path, "onboard", db.source, "--replica-identity-full")
    assert onboarded.exit_code == 0, onboarded.stderr or onboarded.output
    db.execute(
        "alter table public.unindexed drop constraint unindexed_code_key",
        "update public.unindexed set code = 'c7' where id = 8",
    )
    table = db.qualified("unindexed")
    config = load(config_path)

    refused = cli_run(config_path, "bootstrap", table)

    fragments = (
        f"table {table}: not handed off: its copy holds 2 rows with key {{\"code\":\"c7\"}}",
        "key columns (code) are not unique in the source",
        "the table stays BOOTSTRAPPING: make the key unique on the source",
        f"then run cdc-lake rebootstrap {table}",
    )
    assert_one_line_failure(refused, *fragments)
    assert state_of(config, table) is TableState.BOOTSTRAPPING
    assert_one_line_failure(cli_run(config_path, "bootstrap", table), *fragments)

    db.execute(
        "update public.unindexed set code = 'c8' where id = 8",
        "alter table public.unindexed add constraint unindexed_code_key unique (code)",
    )
    # The changes made while two rows shared a key stay before the new copy's watermark (never replayed).
    wait_streamed(config, table)
    rebootstrapped = cli_run(config_path, "rebootstrap", table)

    assert rebootstrapped.exit_code == 0, rebootstrapped.stderr or rebootstrapped.output
    assert state_of(config, table) is TableState.LIVE
    with StateStore.open(config.state_store.url) as store:
        path = store.current_copy(table).path
    assert path != config.lake.table_base_path(table)
    assert assert_lake_equals_source(spark, config, db, "unindexed", key=("code",), base_path=path) == 40


def test_replica_identity_set_back_to_default_stops_the_table_at_the_update_without_the_old_key(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    """Issue 34 review 6: after onboarding (FULL), the identity is set to DEFAULT, a key changes, and the
    identity is set back to FULL before the applier runs: the update carries no old ``code``.  The table
    stops FAILED at it, naming REPLICA IDENTITY FULL and the re-bootstrap; the lake keeps one row per
    row (before the fix the moved row was upserted beside its old one, LIVE).  The one identity under
    which such an update is normal, USING INDEX over the key, is what the source is asked for."""
    ddl = (
        "create table {table} (id bigint primary key, code text not null unique, val text);"
        "alter table {table} replica identity full;"
        "insert into {table} select g, 'c' || g, 'v' || g from generate_series(1, 5) g"
    )
    with postgres_capture(local_stack, ddl) as capture:
        table = f'"{capture.schema}"."{capture.table}"'
        config_path = tmp_path / "cdc-lake.yaml"
        config = write_and_load(
            config_path,
            config_dict(
                local_stack, [capture], str(tmp_path / "lake"), f"sqlite:///{tmp_path}/state.db",
                tables={capture.qualified_name: {"key": ["code"]}},
            ),
        )
        record_catching_up(config)
        capture.execute(f"update {table} set val = 'first' where id = 1")
        capture.wait_for(1)
        assert cli_run(config_path, "apply", "--once").exit_code == 0
        capture.execute(
            f"alter table {table} replica identity default",
            f"update {table} set code = 'moved-1' where id = 1",
            f"alter table {table} replica identity full",
            f"update {table} set val = 'later' where id = 2",
        )
        capture.wait_for(3)

        result = cli_run(config_path, "apply", "--once")

        assert result.exit_code == 1, result.output
        assert "update without the old value of key column(s) code (key code)" in result.output
        assert f"ALTER TABLE {capture.schema}.{capture.table} REPLICA IDENTITY FULL" in result.output
        assert "cdc-lake rebootstrap" in result.output
        assert state_of(config, capture.qualified_name) is TableState.FAILED
        lake = read_table(spark, config.lake.table_base_path(capture.qualified_name))
        assert sorted(r["code"] for r in lake.select("code").collect()) == ["c1"], "no row under moved-1"

        engine = engine_for(config.source(capture.source_name))
        name = f"{capture.schema}.{capture.table}"
        assert engine.update_may_omit_old_key(name, ("code",)) is False
        capture.execute(f'alter table {table} replica identity using index "{capture.table}_code_key"')
        assert engine.update_may_omit_old_key(name, ("code",)) is True
        assert engine.update_may_omit_old_key(name, ("val",)) is False
