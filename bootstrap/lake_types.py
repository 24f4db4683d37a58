"""The lake type of every source column, and how a JDBC read is turned into exactly that type.

A bootstrapped table and the applier must agree on every column's Spark type, or the applier's first
batch fails with a type change.  The applier's types come from Debezium's Avro schemas
(``docs/type-mapping.md``, :mod:`cdc_lake.decode.types`), stored as :func:`lake_type` makes them; this
module gives, for each catalog type, the same Spark type and a way to read it exactly:

- a SQL expression run on the source, chosen so the JDBC driver hands over a value Spark can convert
  without loss (times as microseconds of the day, Postgres dates and timestamps and numerics as text in
  a session set to ISO formats and UTC, MySQL TIMESTAMP as UTC text);
- a Spark conversion from what JDBC returns to the lake type.  A value the lake type cannot hold
  (``infinity``, a decimal with more digits, a year beyond 9999) fails the read naming the column,
  never a silent null or rounding: the applier refuses the same values.

Types with no exact equivalent here (intervals, times with zone, bit strings, geometry, domains,
arrays of other than text, integers, booleans and doubles) are refused before anything is read, naming
the column: leave them out of the table's frozen ``columns`` list.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
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
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from cdc_lake.apply.lake_schema import lake_type
from cdc_lake.decode.types import SPARK_MAX_PRECISION, VARIABLE_SCALE_DECIMAL_SCALE
from cdc_lake.exceptions import BootstrapError
from cdc_lake.sources.snapshot import SourceColumn, TableShape

Quote = Callable[[str], str]


class Conversion(enum.StrEnum):
    """How the value JDBC returns becomes the lake value."""

    CAST = "cast"
    DECIMAL_TEXT = "decimal text"
    DATE_TEXT = "date text"
    LOCAL_TIMESTAMP_TEXT = "local timestamp text"
    UTC_TIMESTAMP_TEXT = "UTC timestamp text"


@dataclass(frozen=True)
class ColumnRead:
    """One column of the snapshot: the SQL that selects it, its lake type and the conversion."""

    name: str
    select: str
    lake_type: DataType
    conversion: Conversion = Conversion.CAST


def spark_decimal(precision: int, scale: int) -> DecimalType:
    """The Spark decimal the decoder uses for DECIMAL(precision, scale) (see ``docs/type-mapping.md``)."""
    if scale < 0:
        precision, scale = precision - scale, 0
    return DecimalType(min(max(precision, scale), SPARK_MAX_PRECISION), scale)


_PG_TEXT_AS_TEXT = frozenset({"text", "varchar", "bpchar", "name"})
_PG_TEXT_CAST = frozenset(
    {"uuid", "json", "jsonb", "xml", "inet", "cidr", "macaddr", "macaddr8", "citext", "ltree"}
)
_PG_ARRAY_ELEMENTS: dict[str, DataType] = {
    "text": StringType(),
    "varchar": StringType(),
    "int4": IntegerType(),
    "int8": LongType(),
    "bool": BooleanType(),
    "float8": DoubleType(),
}
_PG_SIMPLE: dict[str, DataType] = {
    "bool": BooleanType(),
    "int2": ShortType(),
    "int4": IntegerType(),
    "int8": LongType(),
    "float4": FloatType(),
    "float8": DoubleType(),
    "bytea": BinaryType(),
    "timestamptz": TimestampType(),
}


def _postgres(column: SourceColumn, quoted: str) -> ColumnRead | None:
    name, kind, type_name = column.name, column.kind, column.type_name
    if kind == "enum" or type_name in _PG_TEXT_CAST:
        return ColumnRead(name, f"{quoted}::text", StringType())
    if kind == "array":
        element = _PG_ARRAY_ELEMENTS.get(column.element or "")
        return None if element is None else ColumnRead(name, quoted, ArrayType(element, True))
    if kind != "base":
        return None
    if type_name in _PG_TEXT_AS_TEXT:
        # bpchar keeps its padding only without a cast to text, as Debezium sends it.
        return ColumnRead(name, quoted, StringType())
    simple = _PG_SIMPLE.get(type_name)
    if simple is not None:
        return ColumnRead(name, quoted, simple)
    if type_name == "oid":
        return ColumnRead(name, f"{quoted}::bigint", LongType())
    if type_name == "numeric":
        precision, scale = column.precision, column.scale
        if precision is not None and scale is not None and 0 <= scale <= precision <= SPARK_MAX_PRECISION:
            # JDBC hands over an exact BigDecimal that DECIMAL(p, s) holds.
            return ColumnRead(name, quoted, DecimalType(precision, scale))
        decimal = (
            DecimalType(SPARK_MAX_PRECISION, VARIABLE_SCALE_DECIMAL_SCALE)
            if precision is None or scale is None
            else spark_decimal(precision, scale)
        )
        return ColumnRead(name, f"{quoted}::text", decimal, Conversion.DECIMAL_TEXT)
    if type_name == "money":
        money = DecimalType(SPARK_MAX_PRECISION, 2)
        return ColumnRead(name, f"{quoted}::numeric::text", money, Conversion.DECIMAL_TEXT)
    if type_name == "date":
        return ColumnRead(name, f"{quoted}::text", DateType(), Conversion.DATE_TEXT)
    if type_name == "timestamp":
        return ColumnRead(name, f"{quoted}::text", TimestampNTZType(), Conversion.LOCAL_TIMESTAMP_TEXT)
    if type_name == "time":
        return ColumnRead(name, f"(extract(epoch from {quoted}) * 1000000)::bigint", LongType())
    return None


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


_MYSQL_TEXT = frozenset({"varchar", "tinytext", "text", "mediumtext", "longtext"})
_MYSQL_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def _mysql(column: SourceColumn, quoted: str) -> ColumnRead | None:
    name, type_name = column.name, column.type_name
    integer = _mysql_integer(column)
    if integer is not None:
        if isinstance(integer, DecimalType):
            return ColumnRead(name, f"CAST({quoted} AS DECIMAL(20,0))", integer)
        # TINYINT(1) would otherwise come back as a boolean, and unsigned values overflow Java's types.
        return ColumnRead(name, f"CAST({quoted} AS SIGNED)", integer)
    if type_name in ("decimal", "numeric"):
        return ColumnRead(name, quoted, spark_decimal(column.precision or 10, column.scale or 0))
    if type_name == "float":
        # FLOAT(M,D) is double precision in Debezium; plain FLOAT and FLOAT(p<=24) are single.
        double = "," in column.declared
        return ColumnRead(name, quoted, DoubleType() if double else FloatType())
    if type_name in ("double", "real"):
        return ColumnRead(name, quoted, DoubleType())
    if type_name == "bit" and column.declared.lower() in ("bit(1)", "bit"):
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
    return None


_FAMILIES: dict[str, Callable[[SourceColumn, str], ColumnRead | None]] = {
    "postgres": _postgres,
    "mysql": _mysql,
    "mariadb": _mysql,
}


def column_reads(engine: str, shape: TableShape, names: Sequence[str], quote: Quote) -> list[ColumnRead]:
    """How to read ``names`` of ``shape`` (in table order) into lake types; raises for unmappable types."""
    mapper = _FAMILIES[engine]
    wanted = set(names)
    reads = []
    for column in shape.columns:
        if column.name not in wanted:
            continue
        read = mapper(column, quote(column.name))
        if read is None:
            raise BootstrapError(
                f"table {shape.name}: column {column.name} has type {column.declared}, which the bootstrap "
                "cannot read exactly; leave it out of the table's columns list"
            )
        reads.append(ColumnRead(read.name, read.select, lake_type(read.lake_type), read.conversion))
    return reads


def lake_columns(reads: Sequence[ColumnRead]) -> StructType:
    """The source columns of the lake table (all nullable, as the applier writes them)."""
    return StructType([StructField(read.name, read.lake_type, True) for read in reads])


# Spark's string-to-date/timestamp cast ignores text it does not expect (``0044-03-15 BC`` becomes 44 AD)
# and accepts years beyond 9999; the decoder refuses both, so only this exact shape is cast.
_ISO_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"
_DATE_TEXT = _ISO_DATE + "$"
_TIMESTAMP_TEXT = _ISO_DATE + r" [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?$"


def _column(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _converted(read: ColumnRead, source: Column) -> Column:
    match read.conversion:
        case Conversion.CAST:
            return source.cast(read.lake_type)
        case Conversion.DECIMAL_TEXT:
            assert isinstance(read.lake_type, DecimalType)
            fraction = F.regexp_extract(source, r"\.(\d*?)0*$", 1)
            return F.when(F.length(fraction) <= read.lake_type.scale, source.cast(read.lake_type))
        case Conversion.DATE_TEXT:
            return F.when(source.rlike(_DATE_TEXT), source.cast(DateType()))
        case Conversion.LOCAL_TIMESTAMP_TEXT:
            return F.when(source.rlike(_TIMESTAMP_TEXT), source.cast(TimestampNTZType()))
        case Conversion.UTC_TIMESTAMP_TEXT:
            return F.when(source.rlike(_TIMESTAMP_TEXT), F.concat(source, F.lit("Z")).cast(TimestampType()))


def to_lake_types(frame: DataFrame, reads: Sequence[ColumnRead], table: str) -> DataFrame:
    """``frame`` (as JDBC read it) with every column converted to its lake type, failing on lossy values."""
    columns = []
    for read in reads:
        source = _column(read.name)
        converted = _converted(read, source)
        message = (
            f"bootstrap of {table}: a value of column {read.name} does not fit lake type "
            f"{read.lake_type.simpleString()} exactly"
        )
        failure = F.raise_error(F.lit(message)).cast(read.lake_type)
        checked = F.when(source.isNotNull() & converted.isNull(), failure)
        columns.append(checked.otherwise(converted).alias(read.name))
    return frame.select(*columns)
