"""Source positions: per-key monotonic values, snapshot lowest, fixed-width encoding."""

from __future__ import annotations

import random

import pytest

from cdc_lake.decode.ordering import ORDERING_WIDTH, SNAPSHOT_ORDERING_VALUE, SourcePosition
from cdc_lake.exceptions import DecodeError
from cdc_lake.sources import mysql, postgres


def _binlog(kafka_offset: int) -> SourcePosition:
    return SourcePosition.streamed(mysql.MARIADB.positions, {}, kafka_offset)


def _postgres(lsn: int) -> SourcePosition:
    return SourcePosition.streamed(postgres.CAPABILITIES.positions, {"lsn": lsn}, 0)


def test_binlog_positions_are_kafka_offsets_and_compare_as_numbers() -> None:
    assert _binlog(9) < _binlog(10)
    assert _binlog(9).ordering_value() < _binlog(10).ordering_value()
    assert _binlog(0) > SourcePosition.snapshot()
    assert _postgres(9) < _postgres(10)
    assert _postgres(9).ordering_value() < _postgres(10).ordering_value()


def test_snapshot_is_below_every_streamed_position() -> None:
    snapshot = SourcePosition.snapshot()
    assert snapshot.is_snapshot and snapshot.ordering_value() == SNAPSHOT_ORDERING_VALUE
    for streamed in (_postgres(1), _binlog(0)):
        assert snapshot < streamed and not streamed.is_snapshot
        assert streamed.ordering_value() > SNAPSHOT_ORDERING_VALUE


def test_binlog_values_win_over_values_stored_by_the_binlog_coordinate_encoding() -> None:
    # Before failover support, binlog rows stored file number (10 digits) + position (20) + row (10).
    stored = "0000999999" + "00000000004294967296" + "0000000007"
    assert _binlog(0).ordering_value() > stored


def test_encoding_is_fixed_width_and_sorts_like_the_positions() -> None:
    rng = random.Random(7)
    binlog = [_binlog(rng.randrange(0, 2**63)) for _ in range(500)]
    postgres = [_postgres(rng.randrange(1, 2**64)) for _ in range(500)]
    for positions in (binlog, postgres):
        encoded = [p.ordering_value() for p in positions]
        assert {len(e) for e in encoded} == {ORDERING_WIDTH}
        assert all(e.isdigit() for e in encoded)
        assert sorted(positions, key=lambda p: p.ordering_value()) == sorted(positions)


def test_exact_encodings() -> None:
    assert _postgres(0x16B3748).ordering_value() == f"{0x16B3748:040d}"
    assert _binlog(4567).ordering_value() == "1" + f"{4567:039d}"
    assert (
        _postgres(2**64 - 1).ordering_value() == "00000000000000000000" + "18446744073709551615"
    )


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: _binlog(-1), "Kafka offset -1 is outside"),
        (lambda: _postgres(0), "LSN 0"),
        (lambda: _postgres(10**20), "Postgres LSN"),
    ],
)
def test_impossible_positions_are_refused(build: object, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        build()  # type: ignore[operator]
