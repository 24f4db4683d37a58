"""Typed source positions: parsing each engine's text, the one comparison, and what each engine declares."""

from __future__ import annotations

import importlib
import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc_lake.decode.envelope import EnvelopeSource
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources import ENGINES
from cdc_lake.sources.mysql.positions import MariaDbGtidPosition, MySqlGtidSet
from cdc_lake.sources.positions import LogPosition
from cdc_lake.sources.postgres.codec import CODEC as POSTGRES_CODEC
from cdc_lake.sources.postgres.positions import Lsn
from cdc_lake_bootstrap.watermark import describe_position

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_lsns_parse_as_numbers_and_print_as_postgres_does() -> None:
    assert Lsn.parse("0/16B3748") == Lsn(0x16B3748)
    assert Lsn.parse("1/0") == Lsn(1 << 32)
    assert str(Lsn.parse("16/b374d848")) == "16/B374D848"
    assert Lsn.parse("1/0").covers(Lsn.parse("0/FFFFFFFF"))
    assert not Lsn.parse("0/FFFFFFFF").covers(Lsn.parse("1/0"))
    assert Lsn.parse("0/10").covers(Lsn.parse("0/10"))


@pytest.mark.parametrize(
    ("kind", "text"),
    [(Lsn, "0-1-5"), (Lsn, ""), (MariaDbGtidPosition, "0/16B3748"), (MySqlGtidSet, f"{UUID}:x")],
)
def test_malformed_positions_are_named(kind: type[LogPosition], text: str) -> None:
    with pytest.raises(SourceEngineError, match="is not a"):
        kind.parse(text)


def test_mariadb_positions_keep_the_highest_sequence_per_domain() -> None:
    position = MariaDbGtidPosition.parse("0-1-345,1-2-10,0-2-7")

    assert position.highest == {0: 345, 1: 10}
    assert position.covers(MariaDbGtidPosition.parse("0-1-345"))
    assert not position.covers(MariaDbGtidPosition.parse("0-1-346"))
    assert not position.covers(MariaDbGtidPosition.parse("2-1-1"))
    assert position.covers(MariaDbGtidPosition.parse(""))


def test_mysql_gtid_sets_join_adjacent_intervals_before_comparing() -> None:
    have = MySqlGtidSet.parse(f"{UUID}:1-5:6-9:12,\n{UUID.upper()}:10")

    assert have.intervals == {UUID: ((1, 10), (12, 12))}
    assert have.covers(MySqlGtidSet.parse(f"{UUID}:3-10"))
    assert not have.covers(MySqlGtidSet.parse(f"{UUID}:10-12"))
    assert MySqlGtidSet.parse(f"{UUID}:tag1:1-3").intervals == {f"{UUID}:tag1": ((1, 3),)}


def test_every_engine_declares_its_position_type() -> None:
    declared = {
        name: getattr(importlib.import_module(caps.engine_module), caps.engine_class).position_type
        for name, caps in ENGINES.items()
    }

    assert declared == {"postgres": Lsn, "mysql": MySqlGtidSet, "mariadb": MariaDbGtidPosition}


def test_an_event_position_reads_as_the_engine_prints_it() -> None:
    source = EnvelopeSource(connector="x", name="n", db="d", table="t", ts_ms=0)

    assert describe_position(replace(source, lsn=(0x16 << 32) + 0xB374D848)) == "16/B374D848"
    assert describe_position(replace(source, gtid="0-1-42", file="b.000001", pos=4)) == "0-1-42"
    assert describe_position(replace(source, file="b.000001", pos=4)) == "b.000001:4"


def _json_stream_key(sequence: str) -> tuple[str, int] | None:
    """``PostgresPositionCodec.stream_key`` as written before its reader without the JSON parser."""
    try:
        parts = json.loads(sequence)
        last_commit, lsn = int(parts[0]), int(parts[1])
    except (ValueError, TypeError, IndexError):
        return None
    digits = f"{last_commit:020d}{lsn:020d}"
    return ("pg", int(digits)) if len(digits) == 40 and digits.isdigit() else None


_DIGITS = st.text(st.sampled_from("0123456789"), min_size=1, max_size=22)
_SEQUENCES = st.one_of(
    st.builds(lambda a, b: f'["{a}","{b}"]', _DIGITS, _DIGITS),
    st.builds(lambda b: f'[null,"{b}"]', _DIGITS),
    st.builds(lambda a, b: f'["{a}",{b}]', _DIGITS, _DIGITS),
    st.builds(lambda a, b, c: f'["{a}","{b}","{c}"]', _DIGITS, _DIGITS, _DIGITS),
    st.sampled_from(
        [
            "[]", '["1"]', '["\\uff11\\uff12","3"]', '["\uff11\uff12","3"]', '["\\u0031","2"]',
            '["1","2"] ', '"12"', '["-1","2"]', '["1","2",]', '["1"."2"]', '["","2"]', '["1",""]',
            '{"0": "1"}', "[1,2]",
        ]
    ),
    st.text(max_size=30),
)


@given(_SEQUENCES)
def test_a_postgres_sequence_is_read_as_its_json_says(sequence: str) -> None:
    """The codec reads Debezium's ``["<digits>","<digits>"]`` without the JSON parser (it is asked once per
    change); whatever the text, its stream key is the one the JSON reading gave."""
    try:
        expected: tuple[str, int] | type[Exception] | None = _json_stream_key(sequence)
    except Exception as exc:  # the JSON reading raised: so must the codec
        expected = type(exc)
    try:
        got: tuple[str, int] | type[Exception] | None = POSTGRES_CODEC.stream_key({"sequence": sequence})
    except Exception as exc:
        got = type(exc)
    assert got == expected, sequence
