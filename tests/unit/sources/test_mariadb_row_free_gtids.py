"""Which binlog event groups after a connector's offset hold no row change (the MariaDB hand-off).

The listings are ``SHOW BINLOG EVENTS`` rows (type, info) as MariaDB 10.11 prints them.
"""

from __future__ import annotations

import pytest

from cdc_lake.config import Source
from cdc_lake.sources.mysql.engine import MariaDbEngine, row_free_gtids

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


def test_row_events_before_the_first_group_count_nothing() -> None:
    """A listing that starts inside a group (not at its GTID) cannot say that group is row-free."""
    inside = [("Table_map", "table_id: 40 (bts.items)"), ("Write_rows_v1", "table_id: 40"), ("Xid", "COMMIT")]

    assert row_free_gtids([*inside, *DDL], to_the_end=True) == []
    assert row_free_gtids([("Query", "drop table t"), *DDL], to_the_end=True) == []


class _Binlog:
    """A primary answering ``BINLOG_GTID_POS`` with ``there`` and ``SHOW BINLOG EVENTS`` with ``events``."""

    def __init__(self, there: str | None, events: list[tuple[str, str]]) -> None:
        self.there, self.events = there, events
        self.queries: list[str] = []

    def __enter__(self) -> _Binlog:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def cursor(self) -> _Binlog:
        return self

    def execute(self, query: str, args: tuple[object, ...]) -> None:
        self.queries.append(query)

    def fetchone(self) -> tuple[str | None]:
        return (self.there,)

    def fetchall(self) -> list[tuple[object, ...]]:
        return [("mysql-bin.000012", 100 + i, t, 1, 200 + i, info) for i, (t, info) in enumerate(self.events)]


def _streamed(monkeypatch: pytest.MonkeyPatch, offset: dict[str, object], binlog: _Binlog) -> str | None:
    source = {"port": 3306, "user": "cdc"}
    engine = MariaDbEngine(
        Source.model_validate({"name": "maria", "engine": "mariadb", "server_id": 9, "primary": source})
    )
    monkeypatch.setattr(engine, "_connect", lambda *_, **__: binlog)
    return engine.streamed_through(offset)


OFFSET = {"file": "mysql-bin.000012", "pos": 1038, "gtids": "0-1-5,1-1-16635"}


def test_the_offsets_own_position_and_the_ddl_after_it_are_streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _streamed(monkeypatch, OFFSET, _Binlog("1-1-16635,0-1-5", DDL)) == "1-1-16635,0-1-5,1-1-7"


@pytest.mark.parametrize(
    "there",
    ["0-1-5,1-1-16640", "0-1-9,1-1-16640", "0-1-5,1-1-16635,2-7-3", None],
    ids=["ahead-in-one-domain", "ahead-in-every-domain", "another-domain", "unknown-position"],
)
def test_a_binlog_position_not_exactly_the_offsets_reads_as_nothing(
    monkeypatch: pytest.MonkeyPatch, there: str | None
) -> None:
    """After a failover the new primary may hold the same file name and position further on."""
    binlog = _Binlog(there, DDL)

    assert _streamed(monkeypatch, OFFSET, binlog) is None
    assert not any(query.startswith("SHOW BINLOG EVENTS") for query in binlog.queries), "listed for nothing"


def test_an_offset_without_gtids_reads_as_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    binlog = _Binlog("0-1-5,1-1-16635", DDL)

    assert _streamed(monkeypatch, {"file": "mysql-bin.000012", "pos": 1038}, binlog) is None
    assert binlog.queries == []
