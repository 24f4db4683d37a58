"""Catalog types to lake types: the same Spark types the decoder gives Debezium's events, or a refusal."""

from __future__ import annotations

import re

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from cdc_lake.exceptions import BootstrapError
from cdc_lake.sources.snapshot import SourceColumn, TableShape
from cdc_lake_bootstrap.lake_types import (
    ColumnRead,
    Conversion,
    column_reads,
    lake_columns,
    refusal,
    spark_decimal,
)


def _pg(type_name: str, declared: str | None = None, **extra: object) -> SourceColumn:
    return SourceColumn("c", type_name, declared or type_name, True, **extra)  # type: ignore[arg-type]


def _read(engine: str, column: SourceColumn) -> tuple[DataType, str, Conversion]:
    shape = TableShape("s.t", (column,), (), 0, 0)
    [read] = column_reads(engine, shape, ["c"], lambda name: f'"{name}"')
    return read.lake_type, read.select, read.conversion


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (_pg("bool"), BooleanType()),
        (_pg("int2"), IntegerType()),  # ShortType, stored by Hudi as int
        (_pg("int4"), IntegerType()),
        (_pg("int8"), LongType()),
        (_pg("oid"), LongType()),
        (_pg("float4"), FloatType()),
        (_pg("float8"), DoubleType()),
        (_pg("numeric", "numeric(12,2)", precision=12, scale=2), DecimalType(12, 2)),
        (_pg("numeric", "numeric(50,10)", precision=50, scale=10), DecimalType(38, 10)),
        (_pg("numeric", "numeric(5,-2)", precision=5, scale=-2), DecimalType(7, 0)),
        (_pg("numeric", "numeric(2,5)", precision=2, scale=5), DecimalType(5, 5)),
        (_pg("numeric"), DecimalType(38, 18)),
        (_pg("money"), DecimalType(38, 2)),
        (_pg("text"), StringType()),
        (_pg("bpchar", "character(5)"), StringType()),
        (_pg("uuid"), StringType()),
        (_pg("jsonb"), StringType()),
        (_pg("mood", kind="enum"), StringType()),
        (_pg("bytea"), BinaryType()),
        (_pg("date"), DateType()),
        (_pg("time", "time(6) without time zone"), LongType()),
        (_pg("timestamp", "timestamp(6) without time zone"), TimestampNTZType()),
        (_pg("timestamptz"), TimestampType()),
        (_pg("_text", "text[]", kind="array", element="text"), ArrayType(StringType(), True)),
        (_pg("_int4", "integer[]", kind="array", element="int4"), ArrayType(IntegerType(), True)),
    ],
    ids=lambda value: value.declared if isinstance(value, SourceColumn) else "",
)
def test_postgres_types(column: SourceColumn, expected: DataType) -> None:
    assert _read("postgres", column)[0] == expected


def test_postgres_values_that_need_care_are_read_as_text_or_numbers() -> None:
    assert _read("postgres", _pg("numeric")) == (DecimalType(38, 18), '"c"::text', Conversion.DECIMAL_TEXT)
    wide = _pg("numeric", "numeric(50,10)", precision=50, scale=10)
    assert _read("postgres", wide)[1:] == ('"c"::text', Conversion.DECIMAL_TEXT)
    fits = _pg("numeric", "numeric(12,2)", precision=12, scale=2)
    assert _read("postgres", fits) == (DecimalType(12, 2), '"c"', Conversion.CAST)
    assert _read("postgres", _pg("timestamp"))[1:] == ('"c"::text', Conversion.LOCAL_TIMESTAMP_TEXT)
    assert _read("postgres", _pg("date"))[1:] == ('"c"::text', Conversion.DATE_TEXT)
    assert _read("postgres", _pg("time"))[1] == '(extract(epoch from "c") * 1000000)::bigint'
    # A cast to text would drop char(n)'s padding, which Debezium keeps.
    assert _read("postgres", _pg("bpchar"))[1] == '"c"'


def _my(type_name: str, declared: str, **extra: object) -> SourceColumn:
    return SourceColumn("c", type_name, declared, True, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (_my("tinyint", "tinyint(1)"), IntegerType()),
        (_my("tinyint", "tinyint(3) unsigned"), IntegerType()),
        (_my("smallint", "smallint(5) unsigned"), IntegerType()),
        (_my("mediumint", "mediumint(8) unsigned"), IntegerType()),
        (_my("int", "int(11)"), IntegerType()),
        (_my("int", "int(10) unsigned"), LongType()),
        (_my("bigint", "bigint(20)"), LongType()),
        (_my("bigint", "bigint(20) unsigned"), DecimalType(20, 0)),
        (_my("decimal", "decimal(65,30)", precision=65, scale=30), DecimalType(38, 30)),
        (_my("decimal", "decimal(12,2) unsigned", precision=12, scale=2), DecimalType(12, 2)),
        (_my("float", "float"), FloatType()),
        (_my("float", "float(10,2)"), DoubleType()),
        (_my("double", "double"), DoubleType()),
        (_my("bit", "bit(1)"), BooleanType()),
        (_my("varchar", "varchar(20)"), StringType()),
        (_my("longtext", "longtext"), StringType()),
        (_my("enum", "enum('a','b')"), StringType()),
        (_my("set", "set('a','b')"), StringType()),
        (_my("json", "json"), StringType()),
        (_my("blob", "blob"), BinaryType()),
        (_my("year", "year(4)"), IntegerType()),
        (_my("date", "date"), DateType()),
        (_my("datetime", "datetime(3)"), TimestampNTZType()),
        (_my("timestamp", "timestamp(6)"), TimestampType()),
        (_my("time", "time(6)"), LongType()),
    ],
    ids=lambda value: value.declared if isinstance(value, SourceColumn) else "",
)
def test_mysql_and_mariadb_types(column: SourceColumn, expected: DataType) -> None:
    assert _read("mariadb", column)[0] == expected
    assert _read("mysql", column)[0] == expected


def test_mysql_integers_are_cast_so_tinyint1_is_not_a_boolean() -> None:
    assert _read("mariadb", _my("tinyint", "tinyint(1)"))[1] == 'CAST("c" AS SIGNED)'
    assert _read("mariadb", _my("timestamp", "timestamp"))[2] is Conversion.UTC_TIMESTAMP_TEXT


@pytest.mark.parametrize(
    ("engine", "column", "options"),
    [
        ("postgres", _pg("interval"), "columns list, or set interval_handling: string on its source$"),
        ("postgres", _pg("hstore"), "columns list$"),
        ("postgres", _pg("point"), "columns list$"),
        ("postgres", _pg("varbit", "bit varying(8)"), "columns list$"),
        ("postgres", _pg("tstzrange", kind="range"), "columns list$"),
        ("postgres", _pg("bit", "bit(8)"), r"columns list, or set column_types: \{c: string\}$"),
        ("postgres", _pg("bit", "bit(80)"), "columns list$"),
        ("postgres", _pg("positive_int", kind="other"), "columns list$"),
        ("postgres", _pg("_mood", "mood[]", kind="array", element="mood", element_kind="enum"), "NULL"),
        ("postgres", _pg("_interval", "interval[]", kind="array", element="interval"), "columns list$"),
        ("mariadb", _my("bit", "bit(8)"), r"columns list, or set column_types: \{c: string\}$"),
        ("mariadb", _my("geometry", "geometry"), "columns list$"),
    ],
)
def test_types_without_an_exact_read_are_refused_by_name(
    engine: str, column: SourceColumn, options: str
) -> None:
    named = f"^table s.t: column c \\({re.escape(column.declared)}\\) cannot be replicated exactly"
    with pytest.raises(BootstrapError, match=named):
        _read(engine, column)
    with pytest.raises(BootstrapError, match=options):
        _read(engine, column)


@pytest.mark.parametrize(
    ("engine", "column", "expected"),
    [
        ("postgres", _pg("timetz", "time(6) with time zone"), (StringType(), Conversion.CAST)),
        ("postgres", _pg("tsvector"), (StringType(), Conversion.CAST)),
        ("postgres", _pg("int4range", kind="range"), (StringType(), Conversion.CAST)),
        ("postgres", _pg("bit", "bit(1)"), (BooleanType(), Conversion.CAST)),
        (
            "postgres",
            _pg("_numeric", "numeric[]", kind="array", element="numeric"),
            (ArrayType(DecimalType(38, 18), True), Conversion.DECIMAL_TEXT),
        ),
        (  # Debezium registers the element's precision and scale (found by the fuzzer, issue 34)
            "postgres",
            _pg("_numeric", "numeric(10,2)[]", kind="array", element="numeric"),
            (ArrayType(DecimalType(10, 2), True), Conversion.DECIMAL_TEXT),
        ),
        (
            "postgres",
            _pg("_numeric", "numeric(50,10)[]", kind="array", element="numeric"),
            (ArrayType(DecimalType(38, 10), True), Conversion.DECIMAL_TEXT),
        ),
        (
            "postgres",
            _pg("_timestamptz", "timestamptz[]", kind="array", element="timestamptz"),
            (ArrayType(TimestampType(), True), Conversion.PG_UTC_TIMESTAMP_TEXT),
        ),
        (
            "postgres",
            _pg("_int2", "smallint[]", kind="array", element="int2"),
            (ArrayType(IntegerType(), True), Conversion.CAST),
        ),
        (
            "mariadb",
            _my("decimal", "decimal(65,30)", precision=65, scale=30),
            (DecimalType(38, 30), Conversion.DECIMAL_TEXT),
        ),
    ],
    ids=lambda value: value.declared if isinstance(value, SourceColumn) else "",
)
def test_types_read_like_debezium_encodes_them(engine: str, column: SourceColumn, expected: object) -> None:
    assert _read(engine, column)[::2] == expected


def test_column_types_choose_the_exact_text_or_a_decimal() -> None:
    shape = TableShape(
        "s.t",
        (
            SourceColumn("free", "numeric", "numeric", True),
            SourceColumn("wide", "numeric", "numeric(50,5)", True, 50, 5),
            SourceColumn("bits", "bit", "bit(4)", True),
        ),
        ("free",), 0, 0,
    )
    column_types = {"free": "decimal(30,4)", "wide": "string", "bits": "string"}

    reads = column_reads("postgres", shape, ["free", "wide", "bits"], lambda name: name, column_types)

    assert [(r.lake_type, r.select, r.conversion) for r in reads] == [
        (DecimalType(30, 4), "free::text", Conversion.DECIMAL_TEXT),
        (StringType(), "wide::text", Conversion.NUMBER_TEXT),
        (StringType(), "bits::text", Conversion.CAST),
    ]
    with pytest.raises(BootstrapError, match="column_types names columns it does not have: nope"):
        column_reads("postgres", shape, ["free"], lambda name: name, {"nope": "string"})
    text = TableShape("s.t", (SourceColumn("t", "text", "text", True),), (), 0, 0)
    with pytest.raises(BootstrapError, match="column_types string applies only to numeric and bit"):
        column_reads("postgres", text, ["t"], lambda name: name, {"t": "string"})


def test_only_the_named_columns_in_table_order_and_all_nullable() -> None:
    shape = TableShape(
        "s.t",
        (SourceColumn("b", "int4", "integer", False), SourceColumn("a", "text", "text", True),
         SourceColumn("skip", "interval", "interval", True)),
        ("b",), 0, 0,
    )

    reads = column_reads("postgres", shape, ["a", "b"], lambda name: name)

    assert [r.name for r in reads] == ["b", "a"]
    assert all(f.nullable for f in lake_columns(reads).fields)


def test_decimals_follow_the_decoder() -> None:
    assert spark_decimal(10, 2) == DecimalType(10, 2)
    assert spark_decimal(65, 30) == DecimalType(38, 30)
    assert spark_decimal(5, -2) == DecimalType(7, 0)


def _numeric(column_types: dict[str, str] | None = None) -> ColumnRead:
    shape = TableShape("s.t", (SourceColumn("nfree", "numeric", "numeric", True),), (), 0, 0)
    [read] = column_reads("postgres", shape, ["nfree"], lambda name: f'"{name}"', column_types)
    return read


def test_a_refused_number_names_the_fallback_and_a_refused_nan_says_debezium_cannot_encode_it() -> None:
    digits = refusal(_numeric(), number=True)
    nan = refusal(_numeric(), number=False)
    nan_as_string = refusal(_numeric({"nfree": "string"}), number=False)

    assert digits == (
        "holds a value with more digits than its lake type decimal(38,18) holds; set column_types: "
        "{nfree: string} in the table's config (docs/type-mapping.md)"
    )
    assert nan == nan_as_string
    assert nan.startswith("holds NaN or ±Infinity, which Debezium cannot encode")
    assert "fit lake type" not in nan_as_string


def test_a_refused_date_names_its_lake_type() -> None:
    shape = TableShape("s.t", (SourceColumn("d", "date", "date", True),), (), 0, 0)
    [read] = column_reads("postgres", shape, ["d"], lambda name: f'"{name}"')

    assert refusal(read, number=False) == (
        "holds a value its lake type date cannot hold exactly (docs/type-mapping.md)"
    )
