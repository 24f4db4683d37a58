"""Source positions: numeric comparison across binlog rollover, snapshot lowest, fixed-width encoding."""

from __future__ import annotations

import random

import pytest

from cdc_lake.decode.ordering import (
    ORDERING_WIDTH,
    SNAPSHOT_ORDERING_VALUE,
    SourcePosition,
    binlog_file_number,
)
from cdc_lake.exceptions import DecodeError


def test_binlog_file_numbers_compare_as_numbers_across_rollover() -> None:
    assert "mysql-bin.000009" < "mysql-bin.000010"  # true as strings only thanks to padding ...
    assert "mysql-bin.999999" > "mysql-bin.1000000"  # ... which breaks when the extension grows
    before = SourcePosition.binlog("mysql-bin.000009", 987_654, 3)
    after = SourcePosition.binlog("mysql-bin.000010", 4, 0)
    assert before < after
    assert before.ordering_value() < after.ordering_value()
    grown_before = SourcePosition.binlog("mysql-bin.999999", 5_000, 0)
    grown_after = SourcePosition.binlog("mysql-bin.1000000", 4, 0)
    assert grown_before < grown_after
    assert grown_before.ordering_value() < grown_after.ordering_value()


def test_positions_within_a_file_compare_numerically() -> None:
    assert SourcePosition.binlog("mariadb-bin.000002", 99, 0) < SourcePosition.binlog(
        "mariadb-bin.000002", 100, 0
    )
    assert SourcePosition.binlog("b.000002", 100, 9) < SourcePosition.binlog("b.000002", 100, 10)
    assert SourcePosition.postgres(9) < SourcePosition.postgres(10)
    assert SourcePosition.postgres(9).ordering_value() < SourcePosition.postgres(10).ordering_value()


def test_snapshot_is_below_every_streamed_position() -> None:
    snapshot = SourcePosition.snapshot()
    assert snapshot.is_snapshot and snapshot.ordering_value() == SNAPSHOT_ORDERING_VALUE
    for streamed in (SourcePosition.postgres(1), SourcePosition.binlog("mysql-bin.000001", 4, 0)):
        assert snapshot < streamed and not streamed.is_snapshot
        assert streamed.ordering_value() > SNAPSHOT_ORDERING_VALUE


def test_encoding_is_fixed_width_and_sorts_like_the_positions() -> None:
    rng = random.Random(7)
    binlog = [
        SourcePosition.binlog(
            f"mysql-bin.{rng.randrange(1, 2_000_000):06d}", rng.randrange(4, 2**40), rng.randrange(0, 5_000)
        )
        for _ in range(500)
    ]
    postgres = [SourcePosition.postgres(rng.randrange(1, 2**64)) for _ in range(500)]
    for positions in (binlog, postgres):
        encoded = [p.ordering_value() for p in positions]
        assert {len(e) for e in encoded} == {ORDERING_WIDTH}
        assert all(e.isdigit() for e in encoded)
        assert sorted(positions, key=lambda p: p.ordering_value()) == sorted(positions)


def test_exact_encodings() -> None:
    assert SourcePosition.postgres(0x16B3748).ordering_value() == f"{0x16B3748:040d}"
    assert SourcePosition.binlog("mysql-bin.000123", 4567, 8).ordering_value() == (
        "0000000123" + "00000000000000004567" + "0000000008"
    )
    assert (
        SourcePosition.postgres(2**64 - 1).ordering_value() == "00000000000000000000" + "18446744073709551615"
    )


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: binlog_file_number("mysql-bin"), "does not end in a numeric extension"),
        (lambda: SourcePosition.binlog("mysql-bin.000001", 0, 0), "position 0"),
        (lambda: SourcePosition.binlog("mysql-bin.000001", -1, 0), "binlog position -1 is outside"),
        (lambda: SourcePosition.binlog("mysql-bin.000001", 4, 10**10), "binlog row"),
        (lambda: SourcePosition.binlog("mysql-bin.10000000000", 4, 0), "binlog file number"),
        (lambda: SourcePosition.postgres(0), "LSN 0"),
        (lambda: SourcePosition.postgres(10**20), "Postgres LSN"),
    ],
)
def test_impossible_positions_are_refused(build: object, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        build()  # type: ignore[operator]
