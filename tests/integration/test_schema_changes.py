"""Source schema changes on both engines while the source keeps changing.

Six LIVE tables: one gains a nullable column without a default (it evolves in place and loses no row,
under concurrent writes: the source's existing rows hold NULL in it, as the lake's do), one drops a
column, one changes a column's type incompatibly, one widens a decimal (``numeric(12,2)`` to
``numeric(14,2)``: Hudi cannot change a decimal column's precision in place and failed the write mid-
batch), one gains ``NOT NULL DEFAULT 'eu'`` (the source's existing rows hold 'eu' and no row event says
so) with, in the same DDL, a nullable column whose default Debezium's schema drops (MariaDB ``DEFAULT
(uuid())``, Postgres ``bytea DEFAULT '\\x01'``: only the source's catalog shows it, and the report names
it as added with a default too), and one narrows a ``varchar(200)`` to ``varchar(20)`` (a string in the
lake either way: only the length the connector propagates shows it; the bootstrap's commits recorded
200): each of those five stops alone in SCHEMA_CHANGED with a readable report naming ``cdc-lake
rebootstrap TABLE``, while the first keeps applying; ``cdc-lake rebootstrap`` is the way out and ends
equal to the source (the widened decimal in the new copy's type).

On MariaDB a seventh table is swapped as gh-ost and pt-online-schema-change do (a copy created, altered,
filled, then ``RENAME TABLE swaps TO _swaps_old, _swaps_new TO swaps``; no row event says so): it stops
naming the rename, and a plain ``cdc-lake rebootstrap`` (read from the replica) brings it back equal to
the source, after which it applies again without stopping on the same statement.  On Postgres a seventh
table's column is rewritten in place by ``ALTER ... TYPE numeric(12, 2) USING amount * 2`` (its own
type: the writer schema does not change and no row event says so): onboarding installed the source's
table-rewrite log, the table stops naming the statement, and the re-bootstrap brings the doubled amounts.
On Postgres an eighth gains ``tag uuid DEFAULT gen_random_uuid()`` whose default is dropped before the
applier asks the catalog: the source's rewrite log still names it, and the table stops as "added with a
default".  On both engines a last table is truncated and gains one row: it stops FAILED before the
truncate (no connector skips truncates) and the re-bootstrap brings the one row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    wait_for_schema,
    wait_streamed,
    write_db_config,
)
from support.common import cli_run, load
from support.engines import StackEngine
from support.second_reader import second_reader_rows

from cdc_lake.apply.runner import SCHEMA_CHANGE_RUN
from cdc_lake.config import Config
from cdc_lake.hudi.writer import read_table
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

ROWS = 500
# The tables are StackEngine.aware_items_ddl (``updated`` time-zone-aware: hudi-rs 0.5.0 cannot read a
# timestamp_ntz column, docs/schema-changes.md).
CHANGES = {
    "postgres": {
        "grows": "alter table public.grows add column note text",
        "drops": "alter table public.drops drop column val",
        "retypes": "alter table public.retypes alter column grp type text",
        "widens": "alter table public.widens alter column amount type numeric(14, 2)",
        "regional": "alter table public.regional add column region text not null default 'eu', "
        "add column raw bytea default '\\x01'",
        "narrows": "alter table public.narrows alter column val type varchar(20)",
        # A volatile default, dropped before the applier asks (STAMPED_AFTER): every row predating the DDL
        # holds a UUID of its own, the catalog shows no default and keeps no ``attmissingval`` (a stable
        # ``now()`` would keep one); the rewrite log names it.
        "stamped": "alter table public.stamped add column tag uuid default gen_random_uuid()",
    },
    "mariadb": {
        "grows": "alter table grows add column note varchar(40)",
        "drops": "alter table drops drop column val",
        "retypes": "alter table retypes modify grp varchar(20) not null",
        "widens": "alter table widens modify amount decimal(14, 2)",
        "regional": "alter table regional add column region varchar(8) not null default 'eu', "
        "add column u varchar(36) default (uuid())",
        "narrows": "alter table narrows modify val varchar(20)",
    },
}
# The column of ``regional``'s DDL whose default only the source's catalog shows (issue 21's gap).
SOURCE_ONLY_DEFAULT = {
    "postgres": "column 'raw' added with a default: '\\x01'::bytea at the source",
    "mariadb": "column 'u' added with a default: uuid() at the source",
}
REBOOTSTRAP = "re-bootstrap the table: cdc-lake rebootstrap {table}"
# How a stop's line ends (REBOOTSTRAP unless named here): MariaDB's replica drew UUIDs of its own for
# ``u``, so only a copy of the primary resolves ``regional`` there (docs/schema-changes.md, "Defaults").
RESOLVED_BY: dict[str, dict[str, str]] = {
    "postgres": {},
    "mariadb": {
        "regional": "re-bootstrap the table from the primary: cdc-lake rebootstrap {table} --from-primary"
    },
}
# MariaDB only: an online schema-change tool's swap (Postgres' pg_repack keeps the table's identity and
# values: nothing to detect, docs/schema-changes.md).
SWAP = [
    "create table _swaps_new like swaps",
    "alter table _swaps_new add column note varchar(20)",
    "insert into _swaps_new select s.*, 'copied' from swaps s",
    "rename table swaps to _swaps_old, _swaps_new to swaps",
]
SWAPPED = "swapped: rename table swaps"
# Postgres only: a rewrite of every row that keeps the column's type (docs/schema-changes.md, "Table
# rewrites").
REWRITE = "alter table public.rewrites alter column amount type numeric(12, 2) using amount * 2"
REWRITTEN = "'public.rewrites' rewritten: a column's values"
STAMPED = "column 'tag' added with a default: computed for every row"
STAMPED_AFTER = {"postgres": ["alter table public.stamped alter column tag drop default"], "mariadb": []}
# Both engines: a TRUNCATE, then a new row.  The connectors send truncates (``skipped.operations``
# ``none``; Postgres publications publish them), and the table stops FAILED before the truncate.
TRUNCATE = {
    "postgres": [
        "truncate table public.truncates",
        "insert into public.truncates (id, grp) values (900002, 2)",
    ],
    "mariadb": ["truncate table truncates", "insert into truncates (id, grp) values (900002, 2)"],
}
# ``val`` is a varchar(200) before onboarding (MariaDB's items table has it so already).
PREPARE = {"postgres": ["alter table public.narrows alter column val type varchar(200)"], "mariadb": []}
TOUCH = {
    "postgres": "update public.{name} set amount = amount + 1 where id <= 5",
    "mariadb": "update {name} set amount = amount + 1 where id <= 5",
}


@pytest.fixture(scope="module")
def db(engine: StackEngine, local_stack: LocalStack) -> Iterator[SourceDb]:
    with engine.database(local_stack) as created:
        yield created


def assert_second_reader_agrees(db: SourceDb, name: str, base_path: str, column: str) -> None:
    """hudi-rs reads the source's keys and ``column`` (as text) at ``base_path``."""
    source = {int(r["id"]): str(r[column]) for r in db.rows(name, ("id",))}
    lake = {int(r["id"]): str(r[column]) for r in second_reader_rows(base_path, ["id", column])}
    assert lake == source, f"{name}: hudi-rs reads other rows or {column} values than the source"


def assert_swap_resolved(
    spark: SparkSession, config: Config, db: SourceDb, config_path: Path, table: str
) -> None:
    """The swapped table's stop names the whole rename; a plain re-bootstrap (the replica's copy) ends
    equal to the source with the new table's column, and the table applies on without stopping again."""
    with StateStore.open(config.state_store.url) as store:
        error = store.require_table(table).last_error
    # The connector records each pair of the RENAME as a statement of its own: the stop names both.
    both = "rename table swaps to _swaps_old; rename table _swaps_new to swaps"
    assert error is not None and both in error, error
    rebooted = cli_run(config_path, "rebootstrap", table, "--reason", "the swap")
    assert rebooted.exit_code == 0, rebooted.stderr
    db.execute(TOUCH[db.engine].format(name="swaps"))
    apply_until_live(spark, config, table)
    new_path = config.lake.table_base_path(table) + "__v2"
    assert assert_lake_equals_source(spark, config, db, "swaps", base_path=new_path) == ROWS
    assert_second_reader_agrees(db, "swaps", new_path, "note")


def test_a_nullable_column_evolves_and_breaking_changes_stop_only_their_table(
    engine: StackEngine, spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    names = ["grows", "drops", "retypes", "widens", "regional", "narrows"]
    names += (["swaps"] if db.engine == "mariadb" else ["rewrites", "stamped"]) + ["truncates"]
    for name in names:
        engine.aware_items(db, name, ROWS)
    db.execute(*PREPARE[db.engine])
    # Registered in the stack's metastore: every comparison below also reads through Trino's catalog entry.
    hive = {"uri": db.stack.hive_metastore.uri, "database": f"lake_{db.engine}"}
    tables_config = [{"name": n} for n in names]
    config_path = write_db_config(tmp_path, db, tables_config, str(tmp_path / "lake"), catalog={"hive": hive})
    onboard(config_path, db.source)
    config = load(config_path)
    tables = {name: db.qualified(name) for name in names}
    writer = ChangeWriter(db, "grows", ROWS, max_transactions=100_000, pause=0.05).start()
    for name in names:
        db.execute(TOUCH[db.engine].format(name=name))
        wait_for_schema(config, tables[name])
    first = cli_run(config_path, "bootstrap", *tables.values(), "--apply")
    assert first.exit_code == 0, first.stderr

    note = "note"
    db.execute(*(CHANGES[db.engine][name] for name in names if name in CHANGES[db.engine]))
    db.execute(*STAMPED_AFTER[db.engine], *(SWAP if "swaps" in names else [REWRITE]))
    db.execute(*TRUNCATE[db.engine])
    grows_insert = (
        "insert into public.grows (id, grp, val, note) values (900001, 1, 'n', 'with a note')"
        if db.engine == "postgres"
        else "insert into grows (id, grp, val, note) values (900001, 1, 'n', 'with a note')"
    )
    touched = [name for name in names[1:] if name != "truncates"]
    db.execute(grows_insert, *(TOUCH[db.engine].format(name=name) for name in touched))
    for name in names:
        wait_streamed(config, tables[name])
    applied = cli_run(config_path, "apply", "--once")

    assert applied.exit_code == 1
    writer.stop()
    apply_until_live(spark, config, tables["grows"])
    assert assert_lake_equals_source(spark, config, db, "grows") >= ROWS // 2
    lake = read_table(spark, config.lake.table_base_path(tables["grows"]))
    assert note in lake.columns
    assert [r[note] for r in lake.where("id = 900001").collect()] == ["with a note"]
    assert_second_reader_agrees(db, "grows", config.lake.table_base_path(tables["grows"]), note)
    expected = {
        "drops": "column 'val' dropped",
        "retypes": "column 'grp' type changed: int -> string",
        "widens": "column 'amount' type changed: decimal(12,2) -> decimal(14,2)",
        "regional": "column 'region' added with a default: 'eu'",
        "narrows": "column 'val' narrowed: character length 200 -> 20",
        **({"swaps": SWAPPED} if "swaps" in names else {"rewrites": REWRITTEN, "stamped": STAMPED}),
    }
    with StateStore.open(config.state_store.url) as store:
        for name, fragment in expected.items():
            info = store.require_table(tables[name])
            assert info.state is TableState.SCHEMA_CHANGED, (name, info.last_error)
            assert info.last_error is not None and fragment in info.last_error, info.last_error
            resolved_by = RESOLVED_BY[db.engine].get(name, REBOOTSTRAP)
            assert info.last_error.endswith(resolved_by.format(table=tables[name])), info.last_error
            [run] = [r for r in store.list_runs(tables[name]) if r.command == SCHEMA_CHANGE_RUN]
            assert any(fragment in line and line.startswith("BREAKS") for line in run.detail["report"])
            assert all(len(line) <= 80 for line in run.detail["report"])
            if name == "regional":
                assert SOURCE_ONLY_DEFAULT[db.engine] in info.last_error, info.last_error
                line = next(x for x in run.detail["report"] if SOURCE_ONLY_DEFAULT[db.engine][:24] in x)
                assert line.startswith("BREAKS"), run.detail["report"]
        assert store.require_table(tables["grows"]).state is TableState.LIVE
        truncated = store.require_table(tables["truncates"])
        assert truncated.state is TableState.FAILED, truncated.last_error
        assert truncated.last_error is not None and "TRUNCATE event" in truncated.last_error
        assert "re-bootstrap the table" in truncated.last_error
    status = json.loads(cli_run(config_path, "status", "--json").stdout)
    assert {r["name"]: r["state"] for r in status}[tables["drops"]] == "SCHEMA_CHANGED"

    # On MariaDB the copies are read from the primary: ``regional``'s UUIDs are the primary's alone.
    rebooted_tables = ["drops", "widens", "truncates"]
    rebooted_tables += ["regional"] if db.engine == "mariadb" else ["rewrites", "stamped"]
    primary = ["--from-primary"] if db.engine == "mariadb" else []
    rebooted = cli_run(
        config_path, "rebootstrap", *(tables[n] for n in rebooted_tables), "--reason", "the DDL", *primary
    )

    assert rebooted.exit_code == 0, rebooted.stderr
    for name in rebooted_tables:
        new_path = config.lake.table_base_path(tables[name]) + "__v2"
        rows = 1 if name == "truncates" else ROWS
        assert assert_lake_equals_source(spark, config, db, name, base_path=new_path) == rows
        assert_second_reader_agrees(db, name, new_path, "u" if name == "regional" else "amount")
        with StateStore.open(config.state_store.url) as store:
            assert store.require_table(tables[name]).state is TableState.LIVE
    if "swaps" in names:
        assert_swap_resolved(spark, config, db, config_path, tables["swaps"])
    widened = read_table(spark, config.lake.table_base_path(tables["widens"]) + "__v2").schema["amount"]
    assert widened.dataType.simpleString() == "decimal(14,2)"
