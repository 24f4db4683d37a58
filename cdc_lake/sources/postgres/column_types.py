"""How the bootstrap reads a Postgres column, per catalog type: the Postgres engine's column reads.

:func:`column_read` is the engine's ``ColumnReader`` (:mod:`cdc_lake.sources.column_types`, which
holds the reads, refusals and conversions every engine shares, and the design); it is named by the
engine's declaration (``column_module``) and imported when first asked, since it needs pyspark.
"""

from __future__ import annotations

import re

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

from cdc_lake.representation import MAX_PRECISION as SPARK_MAX_PRECISION
from cdc_lake.representation import STRING, VARIABLE_SCALE_DECIMAL_SCALE, ColumnType
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
_PG_SCALED_NUMERIC_ARRAY = re.compile(r"numeric\((?P<precision>\d+),\s*(?P<scale>-?\d+)\)\[\]")
"""The declared type of a ``numeric(p,s)[]`` column (``format_type``: ``numeric(10,2)[]``)."""
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
KEY_REFUSALS: dict[str, str] = {
    "timetz": "two offsets of one UTC time of day are two keys to Postgres and one record key in the lake",
}
"""Types the lake cannot tell apart as record keys (:func:`cdc_lake.sources.column_types.key_refusals`)."""
_PG_BITS_AS_STRING = 63
"""Debezium parses bit(n) as a signed 64-bit number: wider bit strings fail in the connector."""


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
        return ColumnRead(name, f"{quoted}::text", override_decimal(override), Conversion.DECIMAL_TEXT)
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
    scaled = _PG_SCALED_NUMERIC_ARRAY.fullmatch(column.declared) if element == "numeric" else None
    if scaled is not None:
        # Debezium registers a numeric(p,s)[] element as decimal(p,s), as it does a numeric(p,s) column.
        as_text = (spark_decimal(int(scaled["precision"]), int(scaled["scale"])), Conversion.DECIMAL_TEXT)
    if as_text is not None:
        lake, conversion = as_text
        return ColumnRead(column.name, f"{quoted}::text[]", ArrayType(lake, True), conversion, True)
    if column.element_kind == "enum":
        return Refusal(column.name, column.declared, "Debezium sends arrays of enum types as NULL")
    return Refusal(column.name, column.declared, f"arrays of {element or 'this type'} are not mapped")


def column_read(
    column: SourceColumn, quoted: str, override: ColumnType | None, interval_handling: IntervalHandling
) -> Mapped:
    """How the bootstrap reads a Postgres ``column``, or why it cannot exactly (a ``ColumnReader``)."""
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
