"""Which binlog event groups after a connector's offset hold no row change (the MariaDB hand-off).

The listings are ``SHOW BINLOG EVENTS`` rows (type, info) as MariaDB 10.11 prints them.
"""

from __future__ import annotations

from cdc_lake.sources.mysql.engine import row_free_gtids

DDL = [("Gtid", "GTID 1-1-7"), ("Query", "create table `other`.`elsewhere` (id int primary key)")]
GRANT = [("Gtid", "GTID 1-1-8"), ("Query", "grant select on *.* to 'reader'@'%'")]
INSERT = [
    ("Gtid", "BEGIN GTID 1-1-9"),
    ("Annotate_rows", "insert into items values (3, 'c')"),
    ("Table_map", "table_id: 40 (bts.items)"),
    ("Write_rows_v1", "table_id: 40 flags: STMT_END_F"),
    ("Xid", "COMMIT /* xid=812 */"),
]


def test_standalone_ddl_groups_count_up_to_the_first_transaction() -> None:
    assert row_free_gtids([*DDL, *GRANT, *INSERT, *DDL], to_the_end=True) == ["1-1-7", "1-1-8"]


def test_the_last_group_counts_only_at_the_end_of_the_binlog_or_of_its_file() -> None:
    assert row_free_gtids(DDL, to_the_end=True) == ["1-1-7"]
    assert row_free_gtids(DDL, to_the_end=False) == []
    assert row_free_gtids([*DDL, ("Rotate", "mysql-bin.000013;pos=4")], to_the_end=False) == ["1-1-7"]


def test_a_transaction_first_counts_nothing() -> None:
    assert row_free_gtids([*INSERT, *DDL], to_the_end=True) == []


def test_a_standalone_group_with_rows_ends_the_list_without_it() -> None:
    create_select = [
        ("Gtid", "GTID 1-1-10"),
        ("Query", "create table t2 select * from t1"),
        ("Table_map", "table_id: 41 (bts.t2)"),
        ("Write_rows_v1", "table_id: 41 flags: STMT_END_F"),
    ]

    assert row_free_gtids([*DDL, *create_select, *GRANT], to_the_end=True) == ["1-1-7"]


def test_a_commit_id_after_the_gtid_still_reads_as_standalone() -> None:
    assert row_free_gtids([("Gtid", "GTID 0-1-3 cid=17"), ("Query", "drop table t")], True) == ["0-1-3"]


def test_events_between_groups_are_skipped() -> None:
    listing = [("Binlog_checkpoint", "mysql-bin.000012"), *DDL]

    assert row_free_gtids(listing, to_the_end=True) == ["1-1-7"]
