"""The one mapping from a source column (its catalog type) to its lake type, shared by every stage.

The applier's lake types come from Debezium's Avro schemas (:mod:`cdc_lake.decode.types`); the bootstrap
reads the same columns over JDBC.  For the same source value both must write the same lake value, so
for every catalog type this module says, in one place:

- the lake type (the Spark type the decoder gives Debezium's encoding of that type);
- the SQL expression the bootstrap selects, chosen so JDBC hands over a value Spark converts without
  loss (times as microseconds of the day, dates, timestamps and numerics as text in a session set to
  ISO formats and UTC), and the :class:`Conversion` from it to the lake type; or
- a :class:`Refusal`: why the type cannot be replicated exactly (Debezium's encoding loses information,
  or Debezium drops the value), and the lossless fallback a table's ``column_types`` may choose, or the
  source setting that makes it exact (Postgres ``interval``: ``interval_handling: string``, a connector
  setting and so one choice per source).

Onboarding's preflight (:func:`refusals`) and the bootstrap (``cdc_lake_bootstrap.lake_types``) both call
:func:`column_read`, so a type onboarding accepts is one the bootstrap reads, and a column refused at
onboarding is named there with its options: leave it out of the table's ``columns`` list, or, where a
fallback exists, set ``column_types: {column: string}`` (or ``decimal(p,s)`` for an unconstrained
numeric).  A fallback changes the decoder's type for that column too
(:class:`~cdc_lake.decode.types.RowConverter`), so bootstrap and applier still agree.

The table of types, encodings and outcomes is ``docs/type-mapping.md``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

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
    TimestampNTZType,
    TimestampType,
)

from cdc_lake.config import IntervalHandling
from cdc_lake.representation import MAX_PRECISION as SPARK_MAX_PRECISION
from cdc_lake.representation import STRING, VARIABLE_SCALE_DECIMAL_SCALE, ColumnType, parse_column_type
from cdc_lake.sources.snapshot import SourceColumn, TableShape

Quote = Callable[[str], str]

class Conversion(enum.StrEnum):
    """How the value JDBC returns becomes the lake value."""

    CAST = "cast"
    DECIMAL_TEXT = "decimal text"
    NUMBER_TEXT = "number text"
    DATE_TEXT = "date text"
    LOCAL_TIMESTAMP_TEXT = "local timestamp text"
    UTC_TIMESTAMP_TEXT = "UTC timestamp text"
    PG_UTC_TIMESTAMP_TEXT = "Postgres UTC timestamp text"


@dataclass(frozen=True)
class ColumnRead:
    """One column of the snapshot: the SQL that selects it, its lake type and the conversion.

    With ``per_element`` the column is an array selected as text elements and ``conversion`` applies to
    each element (the lake type is then an array of the converted element type).
    """

    name: str
    select: str
    lake_type: DataType
    conversion: Conversion = Conversion.CAST
    per_element: bool = False


@dataclass(frozen=True)
class Refusal:
    """A column that cannot be replicated exactly: why, and the ``column_types`` fallback or the source
    ``setting`` that makes it exact, if one exists."""

    column: str
    declared: str
    reason: str
    fallback: str | None = None
    setting: str | None = None

    def options(self) -> str:
        """What the user can do about it, as one clause."""
        leave_out = "leave it out of the table's columns list"
        if self.setting is not None:
            return f"{leave_out}, or set {self.setting} on its source"
        if self.fallback is None:
            return leave_out
        return f"{leave_out}, or set column_types: {{{self.column}: {self.fallback}}}"

    def message(self, table: str) -> str:
        """One line naming the table and column, the reason and the options."""
        return (
            f"table {table}: column {self.column} ({self.declared}) cannot be replicated exactly: "
            f"{self.reason}; {self.options()}"
        )


def spark_decimal(precision: int, scale: int) -> DecimalType:
    """The Spark decimal the decoder uses for DECIMAL(precision, scale) (see ``docs/type-mapping.md``)."""
    if scale < 0:
        precision, scale = precision - scale, 0
    return DecimalType(min(max(precision, scale), SPARK_MAX_PRECISION), scale)


def _decimal_of(override: ColumnType) -> DecimalType:
    assert override.precision is not None and override.scale is not None
    return DecimalType(override.precision, override.scale)


Mapped = ColumnRead | Refusal

_PG_TEXT_AS_TEXT = frozenset({"text", "varchar", "bpchar", "name"})
_PG_TEXT_CAST = frozenset(
    {"uuid", "json", "jsonb", "xml", "cidr", "macaddr", "macaddr8", "citext", "ltree", "tsvector"}
)
# Ranges whose text does not depend on the session's TimeZone (tstzrange's does: Debezium's walsender
# and the bootstrap's session may differ).
_PG_RANGES = frozenset({"int4range", "int8range", "numrange", "daterange", "tsrange"})
# Array elements JDBC hands over exactly.
_PG_ARRAY_ELEMENTS: dict[str, DataType] = {
    "text": StringType(),
    "varchar": StringType(),
    "int2": ShortType(),
    "int4": IntegerType(),
    "int8": LongType(),
    "bool": BooleanType(),
    "float4": FloatType(),
    "float8": DoubleType(),
}
# Array elements read as text and converted element by element.
_PG_TEXT_ARRAY_ELEMENTS: dict[str, tuple[DataType, Conversion]] = {
    "uuid": (StringType(), Conversion.CAST),
    "json": (StringType(), Conversion.CAST),
    "jsonb": (StringType(), Conversion.CAST),
    "numeric": (DecimalType(SPARK_MAX_PRECISION, VARIABLE_SCALE_DECIMAL_SCALE), Conversion.DECIMAL_TEXT),
    "date": (DateType(), Conversion.DATE_TEXT),
    "timestamptz": (TimestampType(), Conversion.PG_UTC_TIMESTAMP_TEXT),
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
_PG_INTERVAL_NUMERIC = (
    "Debezium's interval encoding (microseconds, a month counted as 30.4375 days, computed in floating "
    "point) does not round-trip"
)
_PG_REFUSED: dict[str, str] = {
    "hstore": "Debezium sends hstore as JSON text whose key order and spacing Postgres does not reproduce",
    "point": "Debezium sends a point as a struct with a WKB copy the bootstrap cannot build without PostGIS",
    "varbit": "Debezium sends bit varying as bytes without its length, so leading zero bits are lost",
    "tstzrange": "its text depends on the session TimeZone, in which Debezium and the bootstrap may differ",
    "geometry": "PostGIS geometry is not supported by the bootstrap",
    "geography": "PostGIS geography is not supported by the bootstrap",
}
_PG_BITS_AS_STRING = 63
"""Debezium parses bit(n) as a signed 64-bit number: wider bit strings fail in the connector."""


def bit_width(declared: str) -> int:
    """``n`` of a declared ``bit(n)`` (1 when undeclared, as in SQL)."""
    match = re.search(r"\((\d+)\)", declared)
    return int(match.group(1)) if match else 1


def _pg_trimmed_numeric(quoted: str) -> str:
    """SQL for a numeric's text without trailing fractional zeros (Postgres 13's trim_scale, portably)."""
    trimmed = f"regexp_replace({quoted}::text, '([.][0-9]*[1-9])0+$', '\\1')"
    return f"regexp_replace({trimmed}, '[.]0+$', '')"


def _pg_interval_text(quoted: str) -> str:
    """SQL for Debezium's interval text (``interval.handling.mode=string``): ``P1Y2M3DT4H5M6.78S``.

    Debezium parses Postgres' output text and writes every field, each with its own sign as Postgres
    splits the interval: years and months from its months, days, then hours, minutes and seconds from
    its time (``-1 year +2 mons -3 days 04:05:06.78`` is ``P0Y-10M-3DT4H5M6.78S``; zero is
    ``P0Y0M0DT0H0M0S``), the seconds without trailing zeros.  ``extract`` gives the same fields (its
    seconds are numeric since Postgres 14, a double before, hence the cast).  Debezium's seconds pass
    through a double, which the decoder repairs (``cdc_lake.decode.types``).
    """
    fields = (("year", "Y"), ("month", "M"), ("day", "DT"), ("hour", "H"), ("minute", "M"))
    parts = [f"extract({field} from {quoted})::bigint || '{unit}'" for field, unit in fields]
    seconds = _pg_trimmed_numeric(f"extract(second from {quoted})::numeric")
    return " || ".join(["'P'", *parts, seconds, "'S'"])


def _pg_numeric(column: SourceColumn, quoted: str, override: ColumnType | None) -> Mapped:
    name, precision, scale = column.name, column.precision, column.scale
    unconstrained = precision is None or scale is None
    if override is not None:
        if override.is_string and unconstrained:
            # Debezium drops an unconstrained numeric's trailing fractional zeros (1.500 arrives as 1.5).
            return ColumnRead(name, _pg_trimmed_numeric(quoted), StringType(), Conversion.NUMBER_TEXT)
        if override.is_string:
            return ColumnRead(name, f"{quoted}::text", StringType(), Conversion.NUMBER_TEXT)
        return ColumnRead(name, f"{quoted}::text", _decimal_of(override), Conversion.DECIMAL_TEXT)
    if unconstrained:
        decimal = DecimalType(SPARK_MAX_PRECISION, VARIABLE_SCALE_DECIMAL_SCALE)
        return ColumnRead(name, f"{quoted}::text", decimal, Conversion.DECIMAL_TEXT)
    assert precision is not None and scale is not None
    if 0 <= scale <= precision <= SPARK_MAX_PRECISION:
        # JDBC hands over an exact BigDecimal that DECIMAL(p, s) holds.
        return ColumnRead(name, quoted, DecimalType(precision, scale))
    return ColumnRead(name, f"{quoted}::text", spark_decimal(precision, scale), Conversion.DECIMAL_TEXT)


def _pg_array(column: SourceColumn, quoted: str) -> Mapped:
    element = column.element or ""
    simple = _PG_ARRAY_ELEMENTS.get(element)
    if simple is not None:
        return ColumnRead(column.name, quoted, ArrayType(simple, True))
    as_text = _PG_TEXT_ARRAY_ELEMENTS.get(element)
    if as_text is not None:
        lake, conversion = as_text
        return ColumnRead(column.name, f"{quoted}::text[]", ArrayType(lake, True), conversion, True)
    if column.element_kind == "enum":
        return Refusal(column.name, column.declared, "Debezium sends arrays of enum types as NULL")
    return Refusal(column.name, column.declared, f"arrays of {element or 'this type'} are not mapped")


def _postgres(
    column: SourceColumn, quoted: str, override: ColumnType | None, interval_handling: IntervalHandling
) -> Mapped:
    name, kind, type_name = column.name, column.kind, column.type_name
    if type_name == "numeric" and kind == "base":
        return _pg_numeric(column, quoted, override)
    bits = type_name == "bit" and 1 < bit_width(column.declared) <= _PG_BITS_AS_STRING
    if bits and override is not None and override.is_string:
        return ColumnRead(name, f"{quoted}::text", StringType())
    if override is not None:
        only = f"column_types {override.spec} applies only to numeric and bit(n)"
        return Refusal(name, column.declared, only)
    if kind == "enum" or type_name in _PG_TEXT_CAST:
        return ColumnRead(name, f"{quoted}::text", StringType())
    if type_name == "inet":
        # Debezium sends inet's output text (10.0.0.1), which abbrev() gives and inet::text does not
        # (it always adds the netmask: 10.0.0.1/32).
        return ColumnRead(name, f"abbrev({quoted})", StringType())
    if kind == "array":
        return _pg_array(column, quoted)
    if kind == "range" and type_name in _PG_RANGES:
        return ColumnRead(name, f"{quoted}::text", StringType())
    if type_name == "interval" and kind == "base":
        if interval_handling == "string":
            return ColumnRead(name, _pg_interval_text(quoted), StringType())
        return Refusal(name, column.declared, _PG_INTERVAL_NUMERIC, setting="interval_handling: string")
    if type_name in _PG_REFUSED:
        return Refusal(name, column.declared, _PG_REFUSED[type_name])
    if kind != "base":
        return Refusal(name, column.declared, f"{kind} types are not mapped")
    if type_name in _PG_TEXT_AS_TEXT:
        # bpchar keeps its padding only without a cast to text, as Debezium sends it.
        return ColumnRead(name, quoted, StringType())
    simple = _PG_SIMPLE.get(type_name)
    if simple is not None:
        return ColumnRead(name, quoted, simple)
    if type_name == "oid":
        return ColumnRead(name, f"{quoted}::bigint", LongType())
    if type_name == "money":
        money = DecimalType(SPARK_MAX_PRECISION, 2)
        return ColumnRead(name, f"{quoted}::numeric::text", money, Conversion.DECIMAL_TEXT)
    if type_name == "date":
        return ColumnRead(name, f"{quoted}::text", DateType(), Conversion.DATE_TEXT)
    if type_name == "timestamp":
        return ColumnRead(name, f"{quoted}::text", TimestampNTZType(), Conversion.LOCAL_TIMESTAMP_TEXT)
    if type_name == "time":
        return ColumnRead(name, f"(extract(epoch from {quoted}) * 1000000)::bigint", LongType())
    if type_name == "timetz":
        # Debezium's ZonedTime: the time in UTC, fraction without trailing zeros, 'Z' (04:45:30.5Z),
        # which is Postgres' own text of the time at zone UTC with '+00' replaced.
        utc = f"regexp_replace(({quoted} at time zone 'UTC')::text, '[+]00$', 'Z')"
        return ColumnRead(name, utc, StringType())
    if type_name == "bit":
        if column.declared in ("bit(1)", "bit"):
            return ColumnRead(name, quoted, BooleanType())
        fallback = STRING if bit_width(column.declared) <= _PG_BITS_AS_STRING else None
        reason = "Debezium sends bit(n) as bytes of a number, not as the bit string"
        return Refusal(name, column.declared, reason, fallback)
    return Refusal(name, column.declared, f"type {type_name} is not mapped")


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
_MYSQL_SPATIAL = frozenset(
    {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
     "geometrycollection", "geomcollection"}
)


def _mysql_decimal(column: SourceColumn, quoted: str, override: ColumnType | None) -> Mapped:
    name = column.name
    decimal = spark_decimal(column.precision or 10, column.scale or 0)
    if override is not None and override.is_string:
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", StringType(), Conversion.NUMBER_TEXT)
    if override is not None:
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", _decimal_of(override), Conversion.DECIMAL_TEXT)
    if (column.precision or 10) > SPARK_MAX_PRECISION:
        # JDBC's BigDecimal would be rounded into the narrower Spark decimal: convert the text exactly.
        return ColumnRead(name, f"CAST({quoted} AS CHAR)", decimal, Conversion.DECIMAL_TEXT)
    return ColumnRead(name, quoted, decimal)


def _mysql(column: SourceColumn, quoted: str, override: ColumnType | None) -> Mapped:
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


_BINLOG_FAMILIES: dict[str, Callable[[SourceColumn, str, ColumnType | None], Mapped]] = {
    "mysql": _mysql,
    "mariadb": _mysql,
}


def column_read(
    engine: str,
    column: SourceColumn,
    quoted: str,
    override: ColumnType | None = None,
    *,
    interval_handling: IntervalHandling = "numeric",
) -> Mapped:
    """How the bootstrap reads ``column`` (``quoted`` is its quoted name), or why it cannot exactly.

    ``interval_handling`` is the source's setting (Postgres only).
    """
    if engine == "postgres":
        return _postgres(column, quoted, override, interval_handling)
    return _BINLOG_FAMILIES[engine](column, quoted, override)


def parsed_column_types(column_types: Mapping[str, str]) -> dict[str, ColumnType]:
    """The ``column_types`` of a table entry, parsed (the config validated them already)."""
    return {name: parse_column_type(spec) for name, spec in column_types.items()}


def unknown_columns_problem(shape: TableShape, column_types: Mapping[str, object], table: str) -> str | None:
    """The message when ``column_types`` names columns ``shape`` lacks (a typo would keep the default)."""
    unknown = sorted(set(column_types) - {column.name for column in shape.columns})
    if not unknown:
        return None
    return f"table {table}: column_types names columns it does not have: {', '.join(unknown)}"


def refusals(
    engine: str,
    shape: TableShape,
    names: Sequence[str] | None,
    column_types: Mapping[str, str],
    *,
    interval_handling: IntervalHandling = "numeric",
) -> list[Refusal]:
    """The columns among ``names`` (all when None) of ``shape`` that cannot be replicated exactly.

    """
    wanted = set(names) if names is not None else {c.name for c in shape.columns}
    overrides = parsed_column_types(column_types)
    found: list[Refusal] = []
    for column in shape.columns:
        if column.name not in wanted:
            continue
        mapped = column_read(
            engine, column, '"x"', overrides.get(column.name), interval_handling=interval_handling
        )
        if isinstance(mapped, Refusal):
            found.append(mapped)
    return found
