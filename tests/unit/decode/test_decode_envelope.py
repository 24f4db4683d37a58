"""Decoding whole Debezium messages: c/r/u/d, tombstones, truncate, TOAST, errors naming the message."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from support import debezium as dbz
from support.fake_registry import InMemorySchemas
from support.wire import framed, unscaled, variable_scale

from cdc_lake.decode import UNAVAILABLE, ChangeEvent, Tombstone, decode_message
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE
from cdc_lake.exceptions import DecodeError, SchemaRegistryError

PG_KEY_ID, PG_VALUE_ID, MY_KEY_ID, MY_VALUE_ID, CONNECT_VALUE_ID = 1, 2, 3, 4, 5


@pytest.fixture
def schemas() -> InMemorySchemas:
    return InMemorySchemas(
        {
            PG_KEY_ID: dbz.pg_key(),
            PG_VALUE_ID: dbz.pg_envelope(),
            MY_KEY_ID: dbz.mysql_key(),
            MY_VALUE_ID: dbz.mysql_envelope(),
            CONNECT_VALUE_ID: dbz.mysql_connect_mode_envelope(),
        }
    )


def pg_row(**values: Any) -> dict[str, Any]:
    return dbz.empty_row(dbz.PG_COLUMNS, **values)


def my_row(**values: Any) -> dict[str, Any]:
    return dbz.empty_row(dbz.MYSQL_COLUMNS, **values)


def pg_message(
    schemas: InMemorySchemas, op: str, before: Any, after: Any, *, offset: int = 10, **source: Any
) -> ChangeEvent:
    key = framed(PG_KEY_ID, dbz.pg_key(), {"id": (after or before)["id"]})
    value = framed(PG_VALUE_ID, dbz.pg_envelope(), dbz.value(op, before, after, dbz.pg_source(**source)))
    event = decode_message(schemas, dbz.PG_TOPIC, 3, offset, key, value, timestamp_ms=1_700_000_000_123)
    assert isinstance(event, ChangeEvent)
    return event


def test_postgres_insert_decodes_every_column_type(schemas: InMemorySchemas) -> None:
    after = pg_row(
        id=7,
        qty=-3,
        amount=unscaled(Decimal("1234567890.12"), 2),
        price_money=unscaled(Decimal("-0.50"), 2),
        ratio=variable_scale(Decimal("3.14159265358979")),
        tiny_ratio=variable_scale(Decimal("-0.000000000000000001")),
        hundreds=unscaled(Decimal("400"), -2),
        note="hello",
        payload='{"a": [1, 2]}',
        tags=["x", None, "z"],
        scores=[1, None, 3],
        uid="3f2504e0-4f89-11d3-9a0c-0305e82c3301",
        status="paid",
        created_on=19_723,
        at_time=(13 * 3600 + 5) * 1_000_000 + 17,
        created_at=1_700_000_000_123_456,
        created_ms=1_700_000_000_123,
        updated_at="2023-11-14T22:13:20.123456Z",
        at_timetz="10:15:30.5Z",
        span=90_061_000_001,
        blob=b"\x00\xffbytes",
        flag=True,
        bits=b"\x05\x02",
        location={"x": 1.5, "y": -2.25, "wkb": None, "srid": 4326},
        weight=2.5,
        ratio_f=0.25,
        big=-(2**63),
    )
    event = pg_message(schemas, "c", None, after)

    assert event.op == "c" and event.before is None and event.key == {"id": 7}
    row = event.after
    assert row is not None
    assert row["id"] == 7 and row["qty"] == -3
    assert row["amount"] == Decimal("1234567890.12") and row["amount"].as_tuple().exponent == -2
    assert row["price_money"] == Decimal("-0.50")
    assert row["ratio"] == Decimal("3.14159265358979")
    assert row["tiny_ratio"] == Decimal("-0.000000000000000001")
    assert row["hundreds"] == Decimal("400")
    assert row["note"] == "hello" and row["payload"] == '{"a": [1, 2]}'
    assert row["tags"] == ["x", None, "z"] and row["scores"] == [1, None, 3]
    assert row["uid"] == "3f2504e0-4f89-11d3-9a0c-0305e82c3301" and row["status"] == "paid"
    assert row["created_on"] == dt.date(2024, 1, 1)
    assert row["at_time"] == (13 * 3600 + 5) * 1_000_000 + 17
    assert row["created_at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456)
    assert row["created_ms"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000)
    assert row["updated_at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC)
    assert row["at_timetz"] == "10:15:30.5Z" and row["span"] == 90_061_000_001
    assert row["blob"] == b"\x00\xffbytes" and row["flag"] is True and row["bits"] == b"\x05\x02"
    assert row["location"] == {"x": 1.5, "y": -2.25, "wkb": None, "srid": 4326}
    assert row["weight"] == 2.5 and row["ratio_f"] == 0.25 and row["big"] == -(2**63)

    assert event.ref.topic == dbz.PG_TOPIC and event.ref.partition == 3 and event.ref.offset == 10
    assert event.timestamp_ms == 1_700_000_000_123 and event.ts_ms == 1_700_000_000_005
    assert event.source.connector == "postgresql" and event.source.schema == "public"
    assert event.source.table == "orders" and event.source.tx_id == 771 and event.source.lsn == 33_554_432
    assert not event.is_snapshot and event.position.parts == (33_554_432,)
    assert event.unavailable_columns == frozenset()


def test_postgres_update_and_delete_and_snapshot_read(schemas: InMemorySchemas) -> None:
    update = pg_message(schemas, "u", pg_row(id=7, note="old"), pg_row(id=7, note="new"), lsn=40_000_000)
    assert (
        update.op == "u"
        and update.before == pg_row(id=7, note="old")
        and update.row == pg_row(id=7, note="new")
    )

    delete = pg_message(schemas, "d", pg_row(id=7), None, lsn=40_000_100)
    assert delete.is_delete and delete.after is None and delete.row == pg_row(id=7)
    assert delete.position > update.position

    read = pg_message(schemas, "r", None, pg_row(id=8), snapshot="true", lsn=20_000_000)
    assert read.is_snapshot and read.ordering_value == SNAPSHOT_ORDERING_VALUE
    assert read.position < delete.position
    last = pg_message(schemas, "r", None, pg_row(id=9), snapshot="last", lsn=20_000_000)
    assert last.is_snapshot and last.source.snapshot == "last"
    unflagged = pg_message(schemas, "r", None, pg_row(id=10), snapshot="false", lsn=20_000_000)
    assert unflagged.is_snapshot and unflagged.ordering_value == SNAPSHOT_ORDERING_VALUE


_BLOCKING_OR_INITIAL = ("true", "first", "first_in_data_collection", "last_in_data_collection", "last")


def my_read(schemas: InMemorySchemas, snapshot: str, offset: int, op: str = "r") -> ChangeEvent:
    key = framed(MY_KEY_ID, dbz.mysql_key(), {"id": 1})
    source = dbz.mysql_source(snapshot=snapshot)
    value = framed(MY_VALUE_ID, dbz.mysql_envelope(), dbz.value(op, None, my_row(id=1), source))
    event = decode_message(schemas, dbz.MYSQL_TOPIC, 0, offset, key, value)
    assert isinstance(event, ChangeEvent)
    return event


@pytest.mark.parametrize("snapshot", _BLOCKING_OR_INITIAL)
def test_blocking_and_initial_snapshot_reads_order_below_every_change(
    schemas: InMemorySchemas, snapshot: str
) -> None:
    """A blocking or initial snapshot reads rows after the point it carries (streaming resumes there):
    ordered at the snapshot position on both engines, it only fills a row the lake lacks."""
    pg = pg_message(schemas, "r", None, pg_row(id=8), snapshot=snapshot, lsn=90_000_000)
    my = my_read(schemas, snapshot, offset=500)
    for read in (pg, my):
        assert read.is_snapshot and read.ordering_value == SNAPSHOT_ORDERING_VALUE, snapshot


def test_an_incremental_snapshot_read_orders_at_its_place_in_the_binlog_topic(
    schemas: InMemorySchemas,
) -> None:
    """Debezium emits an incremental chunk's row only when no change of its key was streamed inside the
    chunk's window: it is the key's state at its place in the partition, so on binlog sources (ordered by
    Kafka offset) it orders there, above the key's earlier changes and below its later ones."""
    read = my_read(schemas, "incremental", offset=500)
    assert not read.is_snapshot and read.position.parts == (1, 500)
    earlier, later = my_read(schemas, "false", 499, op="c"), my_read(schemas, "false", 501, op="u")
    assert earlier.position < read.position < later.position


def test_an_incremental_snapshot_read_on_postgres_stays_below_every_change(schemas: InMemorySchemas) -> None:
    """Its source.lsn is the change LSN of the chunk's close marker, and a transaction that changed the
    row before the marker and committed after it carries a lower change LSN and a newer row: ordered at
    that LSN, the read would beat it.  So it keeps the snapshot position (it refills a missing row only)."""
    read = pg_message(schemas, "r", None, pg_row(id=8), snapshot="incremental", lsn=90_000_000)
    assert read.is_snapshot and read.ordering_value == SNAPSHOT_ORDERING_VALUE


def test_tombstone_is_recognised_with_its_key(schemas: InMemorySchemas) -> None:
    key = framed(PG_KEY_ID, dbz.pg_key(), {"id": 7})
    tombstone = decode_message(schemas, dbz.PG_TOPIC, 0, 11, key, None, timestamp_ms=5)
    assert tombstone == Tombstone(tombstone.ref, {"id": 7}, 5)
    assert str(tombstone.ref) == "topic 'pg.public.orders' partition 0 offset 11"


def test_truncate_has_no_key_and_no_rows(schemas: InMemorySchemas) -> None:
    value = framed(PG_VALUE_ID, dbz.pg_envelope(), dbz.value("t", None, None, dbz.pg_source(lsn=50_000_000)))
    event = decode_message(schemas, dbz.PG_TOPIC, 0, 12, None, value)
    assert isinstance(event, ChangeEvent)
    assert event.is_truncate and event.key is None and event.row is None and event.before is None
    assert event.position.parts == (50_000_000,)


def test_unchanged_toast_columns_are_unavailable_not_values(schemas: InMemorySchemas) -> None:
    placeholder = "__debezium_unavailable_value"
    after = pg_row(
        id=7,
        note=placeholder,
        payload=placeholder,
        blob=placeholder.encode(),
        tags=[placeholder],
        scores=list(placeholder.encode()),
        flag=False,
    )
    event = pg_message(schemas, "u", None, after)
    assert event.after is not None
    assert event.unavailable_columns == {"note", "payload", "blob", "tags", "scores"}
    assert all(event.after[c] is UNAVAILABLE for c in event.unavailable_columns)
    assert event.after["flag"] is False and event.after["id"] == 7


def test_a_placeholder_equal_value_is_a_value_where_debezium_never_sends_one(
    schemas: InMemorySchemas,
) -> None:
    """Issue 34 review 7: only a Postgres update's or create's after image can hold a placeholder."""
    placeholder = "__debezium_unavailable_value"
    row = pg_row(id=7, note=placeholder, blob=placeholder.encode(), tags=[placeholder])
    read = pg_message(schemas, "r", None, row, snapshot="true")
    assert read.after is not None and read.unavailable_columns == frozenset()
    assert (read.after["note"], read.after["blob"], read.after["tags"]) == (
        placeholder,
        placeholder.encode(),
        [placeholder],
    )
    # A REPLICA IDENTITY FULL before image holds the old row whole.
    update = pg_message(schemas, "u", row, pg_row(id=7, note="new"))
    assert update.before is not None and update.before["note"] == placeholder
    # MySQL/MariaDB send no placeholder: a value equal to it is the value, in every op.
    for op in ("c", "u"):
        after = my_row(id=1, doc=placeholder, image=placeholder.encode())
        key = framed(MY_KEY_ID, dbz.mysql_key(), {"id": 1})
        value = framed(MY_VALUE_ID, dbz.mysql_envelope(), dbz.value(op, None, after, dbz.mysql_source()))
        event = decode_message(schemas, dbz.MYSQL_TOPIC, 0, 0, key, value)
        assert isinstance(event, ChangeEvent) and event.after is not None
        assert (event.after["doc"], event.after["image"]) == (placeholder, placeholder.encode()), op


def test_mysql_adaptive_microseconds_row(schemas: InMemorySchemas) -> None:
    after = my_row(
        id=1,
        price=unscaled(Decimal("19.99"), 2),
        wide=unscaled(Decimal("12345678.123456789012345678901234567890"), 30),
        active=True,
        legacy_flag=1,
        tiny=-128,
        made_on=-1,
        made_at=-1,
        made_at_us=1_000_001,
        stamped="2018-06-20T13:37:03Z",
        duration=-3_600_000_000,
        yr=2024,
        size="M",
        features="a,c",
        doc='{"k": "v"}',
        image=b"\x89PNG",
        shape={"wkb": bytes.fromhex("0101000000000000000000f03f0000000000000040"), "srid": 0},
        unsigned_big=2**63 - 1,
    )
    key = framed(MY_KEY_ID, dbz.mysql_key(), {"id": 1})
    value = framed(MY_VALUE_ID, dbz.mysql_envelope(), dbz.value("c", None, after, dbz.mysql_source()))
    event = decode_message(schemas, dbz.MYSQL_TOPIC, 0, 0, key, value)
    assert isinstance(event, ChangeEvent)
    row = event.after
    assert row is not None
    assert row["price"] == Decimal("19.99")
    assert row["wide"] == Decimal("12345678.123456789012345678901234567890")
    assert row["active"] is True and row["legacy_flag"] == 1 and row["tiny"] == -128
    assert row["made_on"] == dt.date(1969, 12, 31)
    assert row["made_at"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999000)
    assert row["made_at_us"] == dt.datetime(1970, 1, 1, 0, 0, 1, 1)
    assert row["stamped"] == dt.datetime(2018, 6, 20, 13, 37, 3, tzinfo=dt.UTC)
    assert row["duration"] == -3_600_000_000 and row["yr"] == 2024
    assert row["size"] == "M" and row["features"] == "a,c" and row["doc"] == '{"k": "v"}'
    assert row["shape"]["srid"] == 0 and row["unsigned_big"] == 2**63 - 1
    assert event.source.file == "mysql-bin.000003" and event.source.server_id == 223344
    assert event.source.gtid == "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"
    assert event.position.parts == (1, 0), "binlog changes are ordered by their Kafka offset"


def test_mysql_connect_mode_logical_types(schemas: InMemorySchemas) -> None:
    after = {"id": 1, "happened_at": 1_529_476_623_000, "day": 17_702, "clock": 45_296_789}
    value = framed(
        CONNECT_VALUE_ID, dbz.mysql_connect_mode_envelope(), dbz.value("c", None, after, dbz.mysql_source())
    )
    event = decode_message(schemas, "my.shop.events", 0, 0, None, value)
    assert isinstance(event, ChangeEvent)
    assert event.after == {
        "id": 1,
        "happened_at": dt.datetime(2018, 6, 20, 6, 37, 3),
        "day": dt.date(2018, 6, 20),
        "clock": 45_296_789_000,
    }


def test_fastavro_logical_encoding_decodes_to_the_same_values(schemas: InMemorySchemas) -> None:
    after = {
        "id": 1,
        "happened_at": dt.datetime(2018, 6, 20, 6, 37, 3, tzinfo=dt.UTC),
        "day": dt.date(2018, 6, 20),
        "clock": dt.time(12, 34, 56, 789000),
    }
    value = framed(
        CONNECT_VALUE_ID,
        dbz.mysql_connect_mode_envelope(),
        dbz.value("c", None, after, dbz.mysql_source()),
        logical=True,
    )
    event = decode_message(schemas, "my.shop.events", 0, 0, None, value)
    assert isinstance(event, ChangeEvent) and event.after is not None
    assert event.after["happened_at"] == dt.datetime(2018, 6, 20, 6, 37, 3)
    assert event.after["clock"] == 45_296_789_000


def test_bad_magic_byte_names_the_message(schemas: InMemorySchemas) -> None:
    value = b"\x01" + framed(PG_VALUE_ID, dbz.pg_envelope(), dbz.value("t", None, None, dbz.pg_source()))[1:]
    with pytest.raises(
        DecodeError, match=r"topic 'pg.public.orders' partition 2 offset 99: value starts with"
    ):
        decode_message(schemas, dbz.PG_TOPIC, 2, 99, None, value)


def test_short_key_names_the_message(schemas: InMemorySchemas) -> None:
    with pytest.raises(DecodeError, match=r"offset 5: key is 3 bytes, shorter than the 5-byte"):
        decode_message(schemas, dbz.PG_TOPIC, 0, 5, b"\x00\x00\x00", None)


def test_unknown_schema_id_is_a_registry_error(schemas: InMemorySchemas) -> None:
    value = framed(77, dbz.pg_envelope(), dbz.value("t", None, None, dbz.pg_source()))
    with pytest.raises(SchemaRegistryError, match="schema id 77 is not registered"):
        decode_message(schemas, dbz.PG_TOPIC, 0, 0, None, value)


def test_data_not_matching_its_schema_is_rejected(schemas: InMemorySchemas) -> None:
    key_bytes_under_value_id = framed(PG_VALUE_ID, dbz.pg_key(), {"id": 7})
    with pytest.raises(DecodeError, match="offset 4: value does not decode with schema id 2"):
        decode_message(schemas, dbz.PG_TOPIC, 0, 4, None, key_bytes_under_value_id)
    trailing = framed(PG_KEY_ID, dbz.pg_key(), {"id": 7}) + b"\x00"
    with pytest.raises(DecodeError, match="key has 1 bytes left after decoding with schema id 1"):
        decode_message(schemas, dbz.PG_TOPIC, 0, 4, trailing, None)


def test_non_envelope_value_is_rejected(schemas: InMemorySchemas) -> None:
    value = framed(PG_KEY_ID, dbz.pg_key(), {"id": 7})
    with pytest.raises(DecodeError, match=r"schema id 1 \(pg.public.orders.Key\) is not a Debezium envelope"):
        decode_message(schemas, dbz.PG_TOPIC, 0, 0, None, value)


def test_unknown_op_and_missing_after_are_rejected(schemas: InMemorySchemas) -> None:
    message = framed(PG_VALUE_ID, dbz.pg_envelope(), dbz.value("m", None, None, dbz.pg_source()))
    with pytest.raises(DecodeError, match="unsupported Debezium op 'm'"):
        decode_message(schemas, dbz.PG_TOPIC, 0, 0, None, message)
    no_after = framed(PG_VALUE_ID, dbz.pg_envelope(), dbz.value("u", None, None, dbz.pg_source()))
    with pytest.raises(DecodeError, match="'u' event has no 'after' row"):
        decode_message(schemas, dbz.PG_TOPIC, 0, 0, None, no_after)


def test_streamed_postgres_event_without_lsn_cannot_be_ordered(schemas: InMemorySchemas) -> None:
    with pytest.raises(DecodeError, match=r"offset 10: Postgres event has no source\.lsn"):
        pg_message(schemas, "c", None, pg_row(id=1), lsn=None)


def test_value_that_does_not_fit_names_message_and_field(schemas: InMemorySchemas) -> None:
    too_precise = pg_row(id=1, ratio=variable_scale(Decimal("1.0000000000000000001")))
    with pytest.raises(
        DecodeError, match=r"offset 10: field 'ratio': value 1.0000000000000000001 has more than 18"
    ):
        pg_message(schemas, "c", None, too_precise)
