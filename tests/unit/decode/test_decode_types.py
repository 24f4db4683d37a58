"""Type mapping: Debezium/Connect Avro types to Spark SQL types and to values Spark accepts."""

from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    _make_type_verifier,
)
from support import debezium as dbz
from support.wire import unscaled, variable_scale

from cdc_lake.decode.schema import RegisteredSchema
from cdc_lake.decode.types import (
    UNAVAILABLE,
    UNAVAILABLE_UUID,
    RowConverter,
    convert_row,
    fit_decimal,
    placeholder_for,
    row_schema,
    spark_schema_for,
)
from cdc_lake.exceptions import DecodeError
from cdc_lake.representation import parse_column_type


def parsed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as the decoder holds it (fastavro-parsed, logical types stashed)."""
    return RegisteredSchema(1, schema).schema


def one_column(avro_type: Any, name: str = "c") -> dict[str, Any]:
    return {"type": "record", "name": "Row", "fields": [dbz.optional(name, avro_type)]}


def spark_type(avro_type: Any) -> DataType:
    return RowConverter(one_column(avro_type)).struct_type["c"].dataType


def convert(avro_type: Any, raw: Any) -> Any:
    return convert_row({"c": raw}, one_column(avro_type))["c"]


def test_postgres_row_spark_schema() -> None:
    expected = {
        "id": IntegerType(),
        "qty": ShortType(),
        "amount": DecimalType(12, 2),
        "price_money": DecimalType(38, 2),
        "ratio": DecimalType(38, 18),
        "tiny_ratio": DecimalType(38, 18),
        "hundreds": DecimalType(7, 0),
        "note": StringType(),
        "payload": StringType(),
        "tags": ArrayType(StringType(), True),
        "scores": ArrayType(IntegerType(), True),
        "uid": StringType(),
        "status": StringType(),
        "created_on": DateType(),
        "at_time": LongType(),
        "created_at": TimestampNTZType(),
        "created_ms": TimestampNTZType(),
        "updated_at": TimestampType(),
        "at_timetz": StringType(),
        "span": LongType(),
        "blob": BinaryType(),
        "flag": BooleanType(),
        "bits": BinaryType(),
        "location": StructType(
            [
                StructField("x", DoubleType(), False),
                StructField("y", DoubleType(), False),
                StructField("wkb", BinaryType(), True),
                StructField("srid", IntegerType(), True),
            ]
        ),
        "weight": DoubleType(),
        "ratio_f": FloatType(),
        "big": LongType(),
    }
    struct = spark_schema_for(parsed(dbz.pg_envelope()))
    assert struct == StructType([StructField(name, t, True) for name, t in expected.items()])
    assert spark_schema_for(dbz.pg_envelope()) == struct


def test_mysql_row_spark_schema() -> None:
    struct = spark_schema_for(parsed(dbz.mysql_envelope()))
    types = {f.name: f.dataType for f in struct.fields}
    assert types["price"] == DecimalType(10, 2)
    assert types["wide"] == DecimalType(38, 30)
    assert (
        types["active"] == BooleanType()
        and types["legacy_flag"] == ShortType()
        and types["tiny"] == ByteType()
    )
    assert types["made_on"] == DateType()
    assert types["made_at"] == TimestampNTZType() and types["made_at_us"] == TimestampNTZType()
    assert types["stamped"] == TimestampType() and types["duration"] == LongType()
    assert (
        types["yr"] == IntegerType() and types["size"] == StringType() and types["features"] == StringType()
    )
    assert types["shape"] == StructType(
        [StructField("wkb", BinaryType(), False), StructField("srid", IntegerType(), True)]
    )
    connect = spark_schema_for(parsed(dbz.mysql_connect_mode_envelope()))
    assert [f.dataType for f in connect.fields] == [IntegerType(), TimestampNTZType(), DateType(), LongType()]


def test_key_schema_maps_as_a_row() -> None:
    assert spark_schema_for(dbz.pg_key()) == StructType([StructField("id", IntegerType(), True)])


def test_converted_rows_are_accepted_by_spark_for_their_struct() -> None:
    converter = RowConverter(row_schema(parsed(dbz.pg_envelope())))
    raw = dbz.empty_row(
        dbz.PG_COLUMNS,
        id=1,
        qty=2,
        amount=unscaled(Decimal("-9999999999.99"), 2),
        ratio=variable_scale(Decimal("99999999999999999999.999999999999999999")),
        hundreds=unscaled(Decimal("9999900"), -2),
        tags=["a"],
        created_on=0,
        at_time=86_400_000_000,
        created_at=0,
        updated_at="1970-01-01T00:00:00Z",
        location={"x": 0.0, "y": 0.0, "wkb": b"\x01", "srid": None},
        flag=False,
    )
    row = converter.convert(raw)
    verify = _make_type_verifier(converter.struct_type)
    values = tuple(row[name] for name in converter.column_names)
    verify(values)
    internal = converter.struct_type.toInternal(values)
    assert internal[converter.column_names.index("updated_at")] == 0
    assert internal[converter.column_names.index("created_on")] == 0


@pytest.mark.parametrize(
    ("precision", "scale", "expected"),
    [
        (10, 2, DecimalType(10, 2)),
        (64, 2, DecimalType(38, 2)),
        (5, -2, DecimalType(7, 0)),
        (2, 5, DecimalType(5, 5)),
    ],
)
def test_decimal_spark_types(precision: int, scale: int, expected: DecimalType) -> None:
    assert spark_type(dbz.decimal(precision, scale)) == expected


def test_decimal_scale_above_spark_maximum_is_refused() -> None:
    with pytest.raises(DecodeError, match="field 'c': decimal scale 40 exceeds Spark's maximum of 38"):
        spark_type(dbz.decimal(45, 40))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"scale": 0, "value": b"\x00"}, Decimal("0E-18")),
        ({"scale": -3, "value": b"\x05"}, Decimal("5000")),
        ({"scale": 2, "value": b"\xff"}, Decimal("-0.01")),
        (
            variable_scale(Decimal("-12345678901234567890.123456789012345678")),
            Decimal("-12345678901234567890.123456789012345678"),
        ),
        (variable_scale(Decimal("1.100000000000000000")), Decimal("1.1")),
    ],
)
def test_variable_scale_decimal_values(raw: dict[str, Any], expected: Decimal) -> None:
    value = convert(dbz.VARIABLE_SCALE_DECIMAL, raw)
    assert value == expected and value.as_tuple().exponent == -18


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (variable_scale(Decimal("123456789012345678901")), "too many integer digits for DECIMAL"),
        ({"scale": 19, "value": b"\x01"}, "more than 18 fractional digits"),
        ({"scale": -30, "value": b"\x01"}, "too many integer digits"),
    ],
)
def test_variable_scale_decimal_that_does_not_fit_names_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(DecodeError, match=f"field 'c': .*{message}"):
        convert(dbz.VARIABLE_SCALE_DECIMAL, raw)


def test_wide_decimal_values_checked_against_the_capped_spark_type() -> None:
    wide = dbz.decimal(65, 30)
    assert convert(wide, unscaled(Decimal("-99999999.5"), 30)) == Decimal("-99999999.5")
    with pytest.raises(DecodeError, match=r"field 'c': value 123456789\.0+ has too many integer digits"):
        convert(wide, unscaled(Decimal("123456789"), 30))


def test_fit_decimal_keeps_exact_scale() -> None:
    assert str(fit_decimal(Decimal("1.5"), 10, 3, "f")) == "1.500"
    with pytest.raises(DecodeError, match="field 'f'"):
        fit_decimal(Decimal("1.0005"), 10, 3, "f")


def test_temporal_values_outside_python_range_are_refused() -> None:
    with pytest.raises(DecodeError, match=r"field 'c': timestamp .* outside years 1-9999"):
        convert(dbz.semantic("long", "io.debezium.time.MicroTimestamp"), 2**63 - 1)
    with pytest.raises(DecodeError, match=r"field 'c': date .* outside years 1-9999"):
        convert(dbz.semantic("int", "io.debezium.time.Date"), 3_000_000)
    with pytest.raises(DecodeError, match=r"field 'c': 'infinity' is not an ISO-8601 timestamp"):
        convert(dbz.semantic("string", "io.debezium.time.ZonedTimestamp"), "infinity")


def test_nano_types_keep_microseconds_and_refuse_to_round() -> None:
    nano_ts = dbz.semantic("long", "io.debezium.time.NanoTimestamp")
    assert convert(nano_ts, 1_000_001_000) == dt.datetime(1970, 1, 1, 0, 0, 1, 1)
    with pytest.raises(DecodeError, match="sub-microsecond"):
        convert(nano_ts, 1_000_000_001)
    nano_time = dbz.semantic("long", "io.debezium.time.NanoTime")
    assert convert(nano_time, 5_000) == 5
    assert convert(dbz.semantic("int", "io.debezium.time.Time"), 1_500) == 1_500_000


def test_zoned_timestamp_offsets_and_precision() -> None:
    zoned = dbz.semantic("string", "io.debezium.time.ZonedTimestamp")
    assert convert(zoned, "2024-02-29T23:30:00.1+02:00") == dt.datetime(
        2024, 2, 29, 21, 30, 0, 100000, tzinfo=dt.UTC
    )
    assert convert(zoned, "2024-01-01T00:00:00.123456000Z") == dt.datetime(
        2024, 1, 1, 0, 0, 0, 123456, tzinfo=dt.UTC
    )
    with pytest.raises(DecodeError, match="sub-microsecond"):
        convert(zoned, "2024-01-01T00:00:00.123456789Z")
    with pytest.raises(DecodeError, match="has no offset"):
        convert(zoned, "2024-01-01T00:00:00")


def test_bare_avro_logical_types_without_connect_names() -> None:
    assert spark_type({"type": "long", "logicalType": "timestamp-micros"}) == TimestampType()
    assert convert({"type": "long", "logicalType": "timestamp-millis"}, 1_000) == dt.datetime(
        1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC
    )
    assert convert({"type": "long", "logicalType": "local-timestamp-micros"}, 1) == dt.datetime(
        1970, 1, 1, 0, 0, 0, 1
    )
    assert convert({"type": "int", "logicalType": "date"}, 1) == dt.date(1970, 1, 2)
    assert convert({"type": "long", "logicalType": "time-micros"}, 7) == 7
    assert convert(
        {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 1}, b"\x7b"
    ) == Decimal("12.3")


def test_maps_arrays_and_nested_named_references() -> None:
    hstore = {"type": "map", "values": ["null", "string"]}
    assert spark_type(hstore) == MapType(StringType(), StringType(), True)
    assert convert(hstore, {"a": "1", "b": None}) == {"a": "1", "b": None}
    dates = {"type": "array", "items": dbz.semantic("int", "io.debezium.time.Date")}
    assert spark_type(dates) == ArrayType(DateType(), False)
    assert convert(dates, [0, 1]) == [dt.date(1970, 1, 1), dt.date(1970, 1, 2)]
    two = {
        "type": "record",
        "name": "Row",
        "namespace": "t",
        "fields": [
            dbz.optional("a", dbz.VARIABLE_SCALE_DECIMAL),
            dbz.optional("b", "io.debezium.data.VariableScaleDecimal"),
        ],
    }
    assert convert_row({"a": {"scale": 0, "value": b"\x01"}, "b": {"scale": 1, "value": b"\x01"}}, two) == {
        "a": Decimal("1"),
        "b": Decimal("0.1"),
    }


def test_unsupported_schemas_are_refused() -> None:
    with pytest.raises(DecodeError, match=r"field 'c': union .* is not supported"):
        spark_type(["null", "int", "string"])
    with pytest.raises(DecodeError, match=r"field 'c': unknown Avro type 'no\.such\.Type'"):
        spark_type("no.such.Type")
    with pytest.raises(DecodeError, match="field 'c': decimal without a precision"):
        spark_type({"type": "bytes", "connect.name": "org.apache.kafka.connect.data.Decimal"})
    with pytest.raises(DecodeError, match="is not an Avro record"):
        RowConverter({"type": "string", "name": "x"})
    with pytest.raises(DecodeError, match="is not a Debezium envelope"):
        row_schema(dbz.pg_key())


PLACEHOLDER = "__debezium_unavailable_value"
PLACEHOLDER_INTS = list(PLACEHOLDER.encode())


def _array(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": ["null", items]}


# Each column type and the raw value Debezium 3.5 sends for its unchanged TOASTed value (measured:
# tests/unit/data/recorded/postgres_toast_arrays.jsonl), None where it sends none.
PLACEHOLDER_SHAPES = [
    pytest.param("string", PLACEHOLDER, id="text"),
    pytest.param(dbz.semantic("string", "io.debezium.data.Json"), PLACEHOLDER, id="json"),
    pytest.param(dbz.semantic("string", "io.debezium.data.Xml"), PLACEHOLDER, id="xml"),
    pytest.param("bytes", PLACEHOLDER.encode(), id="bytea"),
    pytest.param(_array("string"), [PLACEHOLDER], id="text[]"),
    pytest.param(_array(dbz.semantic("string", "io.debezium.data.Json")), [PLACEHOLDER], id="jsonb[]"),
    pytest.param(_array(dbz.semantic("string", "io.debezium.data.Uuid")), [UNAVAILABLE_UUID], id="uuid[]"),
    pytest.param(_array("int"), PLACEHOLDER_INTS, id="int[]"),
    pytest.param(_array("long"), PLACEHOLDER_INTS, id="bigint[]"),
    pytest.param(_array(dbz.semantic("int", "io.debezium.time.Date")), PLACEHOLDER_INTS, id="date[]"),
    pytest.param({"type": "map", "values": ["null", "string"]}, {PLACEHOLDER: PLACEHOLDER}, id="hstore-map"),
    pytest.param(_array(dbz.INT16), None, id="smallint[]"),
    pytest.param(_array("boolean"), None, id="boolean[]"),
    pytest.param(_array("float"), None, id="real[]"),
    pytest.param(_array("double"), None, id="double[]"),
    pytest.param(_array(dbz.VARIABLE_SCALE_DECIMAL), None, id="numeric[]"),
    pytest.param(_array(dbz.semantic("string", "io.debezium.time.ZonedTimestamp")), None, id="timestamptz[]"),
    pytest.param(dbz.semantic("string", "io.debezium.data.Uuid"), None, id="uuid"),
    pytest.param(dbz.semantic("string", "io.debezium.time.ZonedTimestamp"), None, id="timestamptz"),
    pytest.param(dbz.decimal(12, 2), None, id="numeric(12,2)"),
    pytest.param(dbz.VARIABLE_SCALE_DECIMAL, None, id="numeric"),
    pytest.param("long", None, id="bigint"),
]


@pytest.mark.parametrize(("avro_type", "shape"), PLACEHOLDER_SHAPES)
def test_each_column_type_has_the_placeholder_shape_debezium_sends_for_it(avro_type: Any, shape: Any) -> None:
    assert placeholder_for(avro_type) == shape
    assert placeholder_for(["null", avro_type]) == shape
    assert UNAVAILABLE_UUID == "b68a35a7-17ad-35b3-af2a-ae46edb4545a"


@pytest.mark.parametrize(("avro_type", "shape"), [p for p in PLACEHOLDER_SHAPES if p.values[1] is not None])
def test_a_placeholder_is_unavailable_only_in_images_that_can_carry_it(avro_type: Any, shape: Any) -> None:
    converter = RowConverter(one_column(avro_type))
    assert converter.convert({"c": shape}, placeholders=True)["c"] is UNAVAILABLE
    assert converter.convert({"c": shape})["c"] is not UNAVAILABLE


@pytest.mark.parametrize(
    ("avro_type", "raw"),
    [
        # Another type's placeholder shape is a real value: Debezium never sends it for this type.
        pytest.param(_array(dbz.INT16), PLACEHOLDER_INTS, id="smallint[]"),
        pytest.param(_array(dbz.semantic("string", "io.debezium.data.Uuid")), [PLACEHOLDER], id="uuid[]"),
        pytest.param(_array("string"), [UNAVAILABLE_UUID], id="text[]"),
        pytest.param(_array("string"), ["a", PLACEHOLDER], id="text[]-longer"),
        pytest.param(_array("int"), [95], id="int[]-prefix"),
        pytest.param("string", "__debezium_unavailable", id="text-prefix"),
        pytest.param(dbz.semantic("string", "io.debezium.data.Uuid"), PLACEHOLDER, id="uuid"),
    ],
)
def test_a_value_shaped_like_another_types_placeholder_is_kept(avro_type: Any, raw: Any) -> None:
    converted = RowConverter(one_column(avro_type)).convert({"c": raw}, placeholders=True)["c"]
    assert converted is not UNAVAILABLE and converted == raw


def test_a_column_types_choice_has_no_placeholder() -> None:
    # numeric as text: Debezium has no placeholder for a numeric, so the text is always a value.
    row = one_column(dbz.VARIABLE_SCALE_DECIMAL)
    converter = RowConverter(row, {"c": parse_column_type("string")})
    assert converter.placeholders == {}


def test_unavailable_sentinel_is_a_singleton_that_survives_pickling() -> None:
    assert pickle.loads(pickle.dumps(UNAVAILABLE)) is UNAVAILABLE
    assert repr(UNAVAILABLE) == "UNAVAILABLE"
    json = RowConverter(one_column(dbz.semantic("string", "io.debezium.data.Json")))
    assert json.convert({"c": "__debezium_unavailable_value"}, placeholders=True)["c"] is UNAVAILABLE
