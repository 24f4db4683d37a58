"""Table swaps (gh-ost, pt-online-schema-change): the RENAME statements of a MySQL/MariaDB schema history.

The statement parsing of the MySQL family's hook, the history records that name a captured table, and
the offset each table has checked so far.
"""

from __future__ import annotations

import json

import pytest

from cdc_lake.capture.history import HistoryRename, renames_in
from cdc_lake.sources import capabilities_for
from cdc_lake.sources.mysql.ddl import table_renames


@pytest.mark.parametrize(
    ("statement", "pairs"),
    [
        ("RENAME TABLE swaps TO _swaps_old, _swaps_new TO swaps",
         [("db.swaps", "db._swaps_old"), ("db._swaps_new", "db.swaps")]),
        ("rename table `swaps` to `_swaps_old`", [("db.swaps", "db._swaps_old")]),
        ("Rename Tables `shop`.`orders` TO `shop`.`_orders_del`, shop._orders_gho to shop.orders",
         [("shop.orders", "shop._orders_del"), ("shop._orders_gho", "shop.orders")]),
        ("rename /* gh-ost */ table `a` to `_a_del`, `_a_gho` to `a`",
         [("db.a", "db._a_del"), ("db._a_gho", "db.a")]),
        ("-- pt-osc\nRENAME TABLE `db`.`t` TO `db`.`_t_old`, # swap\n `db`.`_t_new` TO `db`.`t`",
         [("db.t", "db._t_old"), ("db._t_new", "db.t")]),
        ("RENAME TABLE IF EXISTS a WAIT 5 TO b, c NOWAIT TO d", [("db.a", "db.b"), ("db.c", "db.d")]),
        ("rename table `we``ird` to `x`", [("db.we`ird", "db.x")]),
        ("ALTER TABLE t RENAME TO t2", [("db.t", "db.t2")]),
        ("alter online table `s`.`t` add column c int, rename as `s`.`u`", [("s.t", "s.u")]),
    ],
)
def test_the_mysql_family_reads_the_pairs_of_a_rename(statement: str, pairs: list[tuple[str, str]]) -> None:
    assert [(r.old, r.new) for r in table_renames(statement, "db")] == pairs


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE t RENAME COLUMN a TO b",
        "alter table t rename index i to j, rename key k to l",
        "CREATE TABLE `rename` (id int)",
        "insert into t values ('RENAME TABLE a TO b')",
        "/* RENAME TABLE a TO b */ select 1",
        "DROP TABLE a",
        "",
    ],
)
def test_other_statements_rename_no_table(statement: str) -> None:
    assert table_renames(statement, "db") == ()


def test_an_unqualified_name_without_a_default_database_stays_unqualified() -> None:
    [rename] = table_renames("rename table a to b", "")

    assert (rename.old, rename.new) == ("a", "b")


def test_only_the_mysql_family_reports_table_renames() -> None:
    assert capabilities_for("postgres").table_renames is None
    assert capabilities_for("mysql").table_renames is table_renames
    assert capabilities_for("mariadb").table_renames is table_renames


def _record(ddl: str, database: str = "db") -> bytes:
    return json.dumps({"source": {"server": "s"}, "databaseName": database, "ddl": ddl}).encode()


def test_history_records_yield_the_renames_with_their_offsets() -> None:
    records = [
        (3, _record("CREATE TABLE _swaps_new LIKE swaps")),
        (4, _record("ALTER TABLE _swaps_new ADD COLUMN note varchar(20)")),
        (5, _record("RENAME TABLE swaps TO _swaps_old,\n  _swaps_new TO swaps")),
        (6, None),
        (7, _record("rename table other to other2", database="elsewhere")),
    ]

    found = renames_in(records, table_renames)

    assert [r.offset for r in found] == [5, 7]
    assert found[0].statement == "RENAME TABLE swaps TO _swaps_old, _swaps_new TO swaps"
    assert found[0].touches("db.swaps") and found[0].touches("DB.Swaps")
    assert not found[0].touches("db.other") and found[1].touches("elsewhere.other2")


def test_a_table_renamed_away_is_touched_too() -> None:
    [rename] = renames_in([(9, _record("rename table a to a_archive"))], table_renames)

    assert isinstance(rename, HistoryRename)
    assert rename.touches("db.a") and rename.touches("db.a_archive")
