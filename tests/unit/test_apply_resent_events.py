"""Stream positions: Debezium's emission order, and the applied high mark that skips re-sent events."""

from __future__ import annotations

from typing import Any

from fixtures import debezium as dbz
from fixtures.fake_registry import InMemorySchemas
from fixtures.wire import framed

from cdc_lake.apply.redelivery import PartitionMarks, advance, already_applied, stream_position
from cdc_lake.decode.envelope import ChangeEvent, decode_message

PG = InMemorySchemas({1: dbz.pg_envelope()})
MY = InMemorySchemas({1: dbz.mysql_envelope()})


def _event(
    registry: InMemorySchemas, envelope: dict[str, Any], columns: list[dict[str, Any]], source: dict[str, Any]
) -> ChangeEvent:
    value = dbz.value("c", None, dbz.empty_row(columns, id=1), source)
    event = decode_message(registry, "t", 0, 0, None, framed(1, envelope, value))
    assert isinstance(event, ChangeEvent)
    return event


def _pg(last_commit: int | None, lsn: int, snapshot: str = "false") -> str | None:
    source = {**dbz.pg_source(lsn, snapshot=snapshot), "sequence": f'[{_text(last_commit)},"{lsn}"]'}
    return stream_position(_event(PG, dbz.pg_envelope(), dbz.PG_COLUMNS, source))


def _text(value: int | None) -> str:
    return "null" if value is None else f'"{value}"'


def _my(file: str, pos: int, row: int, server: int = 223344) -> str | None:
    source = {**dbz.mysql_source(file, pos, row), "server_id": server}
    return stream_position(_event(MY, dbz.mysql_envelope(), dbz.MYSQL_COLUMNS, source))


def test_postgres_positions_follow_commit_order_not_change_lsns() -> None:
    # Recorded on the stack: T2 (change 504) commits before T1 (changes 280, 632, 808), then T3.
    emitted = [
        _pg(69033072, 69033504),
        _pg(69033808, 69033280),
        _pg(69033808, 69033632),
        _pg(69033808, 69033808),
        _pg(69033984, 69034008),
    ]

    assert all(p is not None for p in emitted)
    assert emitted == sorted(emitted)  # type: ignore[type-var]


def test_binlog_positions_compare_as_numbers_within_one_server() -> None:
    assert _my("mysql-bin.000009", 900, 0) < _my("mysql-bin.000010", 4, 0)  # type: ignore[operator]
    assert _my("mysql-bin.000010", 4, 1) > _my("mysql-bin.000010", 4, 0)  # type: ignore[operator]
    assert not already_applied(
        _my("mysql-bin.000001", 4, 0, server=2), _my("mysql-bin.000009", 4, 0, server=1)
    )


def test_snapshot_reads_and_incomplete_positions_have_none() -> None:
    assert _pg(100, 200, snapshot="true") is None
    assert _pg(None, 200) is None


def test_already_applied_is_at_or_below_the_mark_of_the_same_server() -> None:
    mark = _pg(500, 900)
    assert already_applied(_pg(500, 900), mark)
    assert already_applied(_pg(400, 950), mark)
    assert not already_applied(_pg(500, 901), mark)
    assert not already_applied(_pg(500, 901), None)
    assert not already_applied(None, mark)


def test_the_high_mark_follows_the_server_of_the_newest_event() -> None:
    old_server, new_server = (
        _my("mysql-bin.000050", 10, 0, server=1),
        _my("mysql-bin.000002", 10, 0, server=2),
    )
    assert old_server is not None and new_server is not None
    marks = PartitionMarks()
    marks.add(5, old_server)
    other = PartitionMarks()
    other.add(9, new_server)
    marks.merge(other)

    assert marks.high_mark() == new_server
    assert advance({0: old_server, 1: "pg:x"}, {0: marks}) == {0: new_server, 1: "pg:x"}
    stale = PartitionMarks()
    stale.add(3, _my("mysql-bin.000001", 10, 0, server=1) or "")
    assert advance({0: old_server}, {0: stale}) == {0: old_server}
