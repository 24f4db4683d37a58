"""How the bootstrap reads a MySQL or MariaDB column, per catalog type: the MySQL family's column reads.

:func:`column_read` is the engines' ``ColumnReader`` (:mod:`cdc_lake.sources.column_types`, which
holds the reads, refusals and conversions every engine shares, and the design); it is named by their
declarations (``column_module``) and imported when first asked, since it needs pyspark.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from cdc_lake.representation import MAX_PRECISION as SPARK_MAX_PRECISION
from cdc_lake.representation import STRING, ColumnType
from cdc_lake.sources.column_types import (
    ColumnRead,
    Conversion,
    Mapped,
    Refusal,
    bit_width,
    override_decimal,
    spark_decimal,
)
from cdc_lake.sources.settings import IntervalHandling
from cdc_lake.sources.snapshot import SourceColumn


def _mysql_integer(column: SourceColumn) -> DataType | None:
    """Debezium's integer widths: TINYINT and signed SMALLINT are INT16, unsigned ones widen a step."""
    unsigned = column.unsigned
    match column.type_name:
        case "tinyint":
            return ShortType()
        case "smallint":
            return IntegerType() if unsigned else ShortType()
        case "mediumint":
            return IntegerType()
        case "int" | "integer":
            return LongType() if unsigned else IntegerType()
        case "bigint":
            return DecimalType(20, 0) if unsigned else LongType()
    return None


KEY_REFUSALS: dict[str, str] = {}
"""Types the lake cannot tell apart as record keys: none of the family's key types
(:func:`cdc_lake.sources.column_types.key_refusals`)."""
_MYSQL_TEXT = frozenset({"varchar", "tinytext", "text", "mediumtext", "longtext"})
_MYSQL_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_MYSQL_SPATIAL = frozenset(
    {
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
        "geomcollection",
    }
)


def _mysql_decimal(column: SourceColumn, quoted: str, override: ColumnType | None) -> Mapped:
    name = column.name
    decimal = spark_decimal(column.precision or 10, column.scale or 0)
    if override is not None and override.is_string:
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", StringType(), Conversion.NUMBER_TEXT)
    if override is not None:
        decimal = override_decimal(override)
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", decimal, Conversion.DECIMAL_TEXT)
    if (column.precision or 10) > SPARK_MAX_PRECISION:
        # JDBC's BigDecimal would be rounded into the narrower Spark decimal: convert the text exactly.
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", decimal, Conversion.DECIMAL_TEXT)
    return ColumnRead(name, quoted, decimal)


def column_read(
    column: SourceColumn, quoted: str, override: ColumnType | None, interval_handling: IntervalHandling
) -> Mapped:
    """How the bootstrap reads a MySQL/MariaDB ``column``, or why it cannot exactly (a ``ColumnReader``;
    ``interval_handling`` is Postgres' alone)."""
    name, type_name = column.name, column.type_name
    if type_name in ("decimal", "numeric"):
        return _mysql_decimal(column, quoted, override)
    bit_string = type_name == "bit" and column.declared.lower() not in ("bit(1)", "bit")
    if bit_string and override is not None and override.is_string:
        width = bit_width(column.declared)
        return ColumnRead(name, f"LPAD(BIN({quoted}), {width}, '0')", StringType())
    if override is not None:
        only = f"column_types {override.spec} applies only to decimal and bit(n)"
        return Refusal(name, column.declared, only)
    integer = _mysql_integer(column)
    if integer is not None:
        if isinstance(integer, DecimalType):
            return ColumnRead(name, f"CAST({quoted} AS DECIMAL(20,0))", integer)
        # TINYINT(1) would otherwise come back as a boolean, and unsigned values overflow Java's types.
        return ColumnRead(name, f"CAST({quoted} AS SIGNED)", integer)
    if type_name == "float":
        # FLOAT(M,D) is double precision in Debezium; plain FLOAT and FLOAT(p<=24) are single.
        double = "," in column.declared
        return ColumnRead(name, quoted, DoubleType() if double else FloatType())
    if type_name in ("double", "real"):
        return ColumnRead(name, quoted, DoubleType())
    if type_name == "bit":
        if bit_string:
            reason = "Debezium sends bit(n) as bytes of a number, not as the bit string"
            return Refusal(name, column.declared, reason, STRING)
        return ColumnRead(name, quoted, BooleanType())
    if type_name in ("json", "char", "enum", "set"):
        # JDBC reports CHAR, ENUM and SET as CHAR(n), which Spark pads to n characters; MySQL (and
        # Debezium) do not.
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", StringType())
    if type_name in _MYSQL_TEXT:
        return ColumnRead(name, quoted, StringType())
    if type_name in _MYSQL_BINARY:
        return ColumnRead(name, quoted, BinaryType())
    if type_name == "year":
        return ColumnRead(name, f"CAST({quoted} AS SIGNED)", IntegerType())
    if type_name == "date":
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", DateType(), Conversion.DATE_TEXT)
    if type_name == "datetime":
        local = Conversion.LOCAL_TIMESTAMP_TEXT
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", TimestampNTZType(), local)
    if type_name == "timestamp":
        # The session's time_zone is UTC, so the text is the UTC wall-clock time.
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", TimestampType(), Conversion.UTC_TIMESTAMP_TEXT)
    if type_name == "time":
        # HOUR() of a negative TIME is its absolute hours (up to 838).
        seconds = f"(HOUR({quoted}) * 60 + MINUTE({quoted})) * 60 + SECOND({quoted})"
        micros = f"({seconds}) * 1000000 + MICROSECOND({quoted})"
        return ColumnRead(name, f"CAST(IF({quoted} < 0, -1, 1) * ({micros}) AS SIGNED)", LongType())
    if type_name in _MYSQL_SPATIAL:
        reason = "spatial types are not read by the bootstrap (Debezium sends WKB with an SRID)"
        return Refusal(name, column.declared, reason)
    return Refusal(name, column.declared, f"type {type_name} is not mapped")
