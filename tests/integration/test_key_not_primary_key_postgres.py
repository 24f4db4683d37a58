"""Scenario: a Postgres table whose configured ``key`` is not its primary key, on the real stack.

``items`` has the primary key ``id`` and a unique ``code``; the config keys it by ``code``.  With
REPLICA IDENTITY DEFAULT, pgoutput sends no old ``code`` when it changes and a delete's before image
carries only ``id``, so onboarding must refuse the table by name and create nothing.  With REPLICA
IDENTITY FULL (set by ``onboard --replica-identity-full``), updates that change ``code`` (also two rows
trading codes in one transaction, and a code moved then deleted) and deletes end with the lake equal to
the source, read with Spark+Hudi and with hudi-rs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    postgres_db,
    state_of,
    write_db_config,
)
from support.common import assert_one_line_failure, cli_run, load
from support.onboard import connectors_of
from support.second_reader import second_reader_rows

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
