"""Composite key values Hudi's record key cannot tell apart (``cdc_lake/hudi/keys.py``), and the applier
stopping a table at the first change carrying one (a bad message naming table, key column and way out).

The write-side refusal (a Spark expression in every Hudi write) runs against real Hudi in
``tests/integration/test_hudi_record_keys.py``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType, TimestampType
from support import debezium as dbz
from support.fake_registry import InMemorySchemas
from support.wire import framed

from cdc_lake.apply.decoding import BadMessage, DecodedChange, DecodeSettings, decode_messages
from cdc_lake.hudi.keys import ambiguous_key_column, ambiguous_key_reason, row_writer_key_pattern
from cdc_lake.kafka.reader import RawMessage

KEY = ("note", "uid")


@pytest.mark.parametrize(
    ("row", "column"),
    [
        # Hudi writes both of these as note:x,uid:y,uid:z.
        ({"note": "x,uid:y", "uid": "z"}, "note"),
        ({"note": "x", "uid": "y,uid:z"}, "uid"),
        # The empty string and the placeholder both become note:__empty__.
        ({"note": "__empty__", "uid": "z"}, "note"),
        ({"note": "a", "uid": "__null__"}, "uid"),
        # Another key column's name after a comma counts, whichever column holds it.
        ({"note": "a", "uid": "b,note:c"}, "uid"),
    ],
)
def test_a_composite_key_value_hudi_cannot_tell_apart_is_named(row: dict[str, Any], column: str) -> None:
    assert ambiguous_key_column(row, KEY) == column


@pytest.mark.parametrize(
    "row",
    [
        {"note": "x,y", "uid": "uid:z"},
        {"note": "x:note", "uid": ",uid"},
        {"note": "", "uid": "z"},
        {"note": "__empty__x", "uid": "z"},
        {"note": "a", "uid": 7, "other": ",note:x"},  # a key value that is no string, a column not in the key
    ],
)
def test_composite_key_values_hudi_tells_apart_pass(row: dict[str, Any]) -> None:
    assert ambiguous_key_column(row, KEY) is None


def test_a_single_key_column_is_never_ambiguous() -> None:
    # Hudi writes a single key bare (or note:<value>) and refuses an empty one itself.
    assert ambiguous_key_column({"note": "x,note:y"}, ("note",)) is None
    assert ambiguous_key_column({"note": "__empty__"}, ("note",)) is None


def test_the_reason_names_table_column_key_and_way_out_on_one_line() -> None:
    reason = ambiguous_key_reason("pg.public.orders", "uid", KEY)

    assert reason.startswith("table pg.public.orders: key column 'uid' holds a value Hudi's composite ")
    assert "(key note, uid)" in reason and "set key in the table's config" in reason
    assert reason.endswith("re-bootstrap the table (cdc-lake rebootstrap)")
    assert "\n" not in reason


KEY_ID, VALUE_ID = 1, 2
SCHEMAS = InMemorySchemas({KEY_ID: dbz.pg_key(), VALUE_ID: dbz.pg_envelope()})
SETTINGS = DecodeSettings(topic=dbz.PG_TOPIC, registry=SCHEMAS, key_fields=KEY, soft_deletes=False)


def _message(offset: int, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> RawMessage:
    value = dbz.value(op, before, after, dbz.pg_source(1000 + offset))
    key = framed(KEY_ID, dbz.pg_key(), {"id": 1})
    return RawMessage(0, offset, key, framed(VALUE_ID, dbz.pg_envelope(), value))


def _row(note: str, uid: str) -> dict[str, Any]:
    return dbz.empty_row(dbz.PG_COLUMNS, id=1, note=note, uid=uid)


def test_the_applier_stops_at_a_change_whose_key_hudi_cannot_tell_apart() -> None:
    messages = [
        _message(0, "c", None, _row("x", "z")),
        _message(1, "c", None, _row("x,uid:y", "z")),
        # An update moving the row away from an ambiguous key: its old key's delete is refused too.
        _message(2, "u", _row("a", "__empty__"), _row("a", "b")),
    ]

    records = list(decode_messages(SETTINGS, messages))

    assert [type(r) for r in records] == [DecodedChange, BadMessage, BadMessage, DecodedChange]
    first, second = records[1], records[2]
    assert isinstance(first, BadMessage) and isinstance(second, BadMessage)
    assert (first.offset, first.reason) == (1, ambiguous_key_reason("public.orders", "note", KEY))
    assert (second.offset, second.reason) == (2, ambiguous_key_reason("public.orders", "uid", KEY))


@pytest.mark.parametrize(
    ("key", "record_key", "written_by_the_row_writer"),
    [
        (("ts",), "2024-01-01 12:00:00.123", True),
        (("ts",), "1704110400123475", False),
        (("ts",), "-1", False),
        (("b",), "[B@45000dd1", True),
        (("b",), "000f", False),
        (("id", "ts"), "id:1,ts:2024-01-01 12:00:00.0", True),
        (("id", "ts"), "id:1,ts:1704110400123475", False),
        (("note", "b"), "note:2024-01-01 12:00:00 [B@1,b:0f", False),  # the look-alikes are the string's
        (("note", "b"), "note:x,b:[B@3d7d4d3d", True),
    ],
)
def test_a_record_key_the_row_writer_built_is_recognised(
    key: tuple[str, ...], record_key: str, written_by_the_row_writer: bool
) -> None:
    schema = StructType([
        StructField("id", IntegerType()), StructField("ts", TimestampType()), StructField("b", BinaryType()),
        StructField("note", StringType()),
    ])
    pattern = row_writer_key_pattern(schema, key)
    assert pattern is not None
    assert bool(re.search(pattern, record_key)) is written_by_the_row_writer
    assert row_writer_key_pattern(schema, ("id", "note")) is None
