"""Exact mapping of Debezium's Avro types to Python values and Spark SQL types.

Debezium writes each column with a Kafka Connect schema; Confluent's AvroConverter turns it into Avro and
keeps the Connect semantic name in the ``connect.name`` property (``connect.type`` for int8/int16,
``connect.parameters`` for decimal scale/precision).  This module reads those names, never guesses from
the physical Avro type alone, and refuses what it cannot represent exactly: a value that does not fit
its Spark type raises :class:`~cdc_lake.exceptions.DecodeError` naming the field.

Records handed to :func:`convert_row` are raw Avro data as :func:`cdc_lake.decode.decode_message`
reads it, with Avro logical types NOT applied (days as int, decimals as bytes, timestamps as long):
:func:`stash_logical_types` moves each ``logicalType`` aside before the schema is parsed, so the Avro
reader returns encoded values and invalid logical types that Java Avro tolerates (a Postgres
``numeric(5,-2)`` gives a decimal with negative scale) do not stop parsing.

Debezium's unavailable-value placeholder (an unchanged TOASTed Postgres value) takes the shape of the
column's type: :func:`placeholder_for` says, per Avro type, which raw value it is (or that there is
none), and :class:`RowConverter` compiles that once per schema.  :meth:`RowConverter.convert` turns a
column holding exactly its type's placeholder into :data:`UNAVAILABLE` only when asked to (the after
image of a Postgres update or create); elsewhere a value equal to a placeholder is a value.

The full table (Debezium type, Postgres and MySQL source types, Spark type, notes) is in
``docs/type-mapping.md``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from typing import Any, Final

from fastavro.schema import SchemaParseException, expand_schema
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
)

from cdc_lake.exceptions import DecodeError
from cdc_lake.representation import MAX_PRECISION as SPARK_MAX_PRECISION
from cdc_lake.representation import VARIABLE_SCALE_DECIMAL_SCALE, ColumnType

#: Debezium's default ``unavailable.value.placeholder``: an unchanged TOASTed Postgres column.
UNAVAILABLE_PLACEHOLDER: Final = "__debezium_unavailable_value"
_PLACEHOLDER_BYTES: Final = UNAVAILABLE_PLACEHOLDER.encode()
# Debezium's placeholder for int, bigint and date arrays: the placeholder's bytes as numbers.
_PLACEHOLDER_INTS: Final = list(_PLACEHOLDER_BYTES)


def _name_based_uuid(name: bytes) -> str:
    """Java's ``UUID.nameUUIDFromBytes``: MD5 of the bytes, version 3, IETF variant (no namespace)."""
    digest = bytearray(hashlib.md5(name, usedforsecurity=False).digest())
    digest[6] = digest[6] & 0x0F | 0x30
    digest[8] = digest[8] & 0x3F | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


#: Debezium's placeholder inside a uuid array (DBZ-6720): ``b68a35a7-17ad-35b3-af2a-ae46edb4545a``.
UNAVAILABLE_UUID: Final = _name_based_uuid(_PLACEHOLDER_BYTES)
# String semantics whose columns can be TOASTed (text-like): Debezium sends the placeholder string.
_TOASTABLE_STRINGS: Final = frozenset(
    {None, "io.debezium.data.Json", "io.debezium.data.Xml", "io.debezium.data.Ltree"}
)
# Text-like array elements (text, varchar, char, json, jsonb): a one-element array of the string.
_TEXT_ARRAY_ELEMENTS: Final = frozenset({None, "io.debezium.data.Json"})

#: Where :func:`stash_logical_types` keeps an Avro ``logicalType``.
STASHED_LOGICAL_TYPE: Final = "cdc_lake.logicalType"


class Unavailable:
    """Type of :data:`UNAVAILABLE`: a column whose value Debezium did not receive (unchanged TOAST).

    It is never a value: the applier must keep the column's stored value.
    """

    _instance: Unavailable | None = None

    def __new__(cls) -> Unavailable:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNAVAILABLE"

    def __reduce__(self) -> str:
        return "UNAVAILABLE"


#: Sentinel standing in for an unchanged TOASTed column (Debezium's ``__debezium_unavailable_value``).
UNAVAILABLE: Final = Unavailable()

_EPOCH_DATE: Final = dt.date(1970, 1, 1)
_EPOCH_NAIVE: Final = dt.datetime(1970, 1, 1)
_DECIMAL_CONTEXT: Final = Context(prec=200, traps=[InvalidOperation])
_ZONED_FRACTION: Final = re.compile(r"\.(\d+)")
_DEBEZIUM_INTERVAL: Final = re.compile(r"P-?\d+Y-?\d+M-?\d+DT-?\d+H-?\d+M(?P<seconds>-?\d+(?:\.\d+)?)S")
_MICROSECOND: Final = Decimal("0.000001")
_INTERVAL_SECONDS_ERROR: Final = Decimal("0.00000001")

Converter = Callable[[Any], Any]


@dataclass(frozen=True)
class _Column:
    """A compiled Avro type: its Spark type, whether Avro allows null, and its raw-to-Python converter."""

    spark: DataType
    nullable: bool
    convert: Converter


def stash_logical_types(node: Any) -> Any:
    """A copy of an Avro schema with every ``logicalType`` key renamed to :data:`STASHED_LOGICAL_TYPE`."""
    if isinstance(node, list):
        return [stash_logical_types(item) for item in node]
    if isinstance(node, dict):
        return {
            STASHED_LOGICAL_TYPE if k == "logicalType" else k: stash_logical_types(v) for k, v in node.items()
        }
    return node


def _identity(value: Any) -> Any:
    return value


def _field_error(path: str, message: str) -> DecodeError:
    return DecodeError(f"field {path!r}: {message}")


def fit_decimal(value: Decimal, precision: int, scale: int, path: str) -> Decimal:
    """Return ``value`` with exactly ``scale`` fractional digits; raise if DECIMAL(p, s) cannot hold it."""
    try:
        exact = value.quantize(Decimal(1).scaleb(-scale), context=_DECIMAL_CONTEXT)
    except InvalidOperation as exc:
        raise _field_error(path, f"value {value} does not fit DECIMAL({precision},{scale})") from exc
    if exact != value:
        raise _field_error(
            path,
            f"value {value} has more than {scale} fractional digits: DECIMAL({precision},{scale}) rounds it",
        )
    if exact and exact.adjusted() + 1 > precision - scale:
        raise _field_error(
            path, f"value {value} has too many integer digits for DECIMAL({precision},{scale})"
        )
    return exact


def _unscaled(raw: bytes, scale: int) -> Decimal:
    # From a string, Decimal is exact whatever the context precision.
    return Decimal(f"{int.from_bytes(raw, 'big', signed=True)}E{-scale}")


def _spark_decimal(precision: int, scale: int, path: str) -> DecimalType:
    """Smallest Spark decimal holding every DECIMAL(precision, scale) value, capped at 38 digits."""
    if scale < 0:
        # Postgres numeric(p, -s) holds integers of up to p + s digits.
        precision, scale = precision - scale, 0
    precision = max(precision, scale)
    if scale > SPARK_MAX_PRECISION:
        raise _field_error(path, f"decimal scale {scale} exceeds Spark's maximum of {SPARK_MAX_PRECISION}")
    return DecimalType(min(precision, SPARK_MAX_PRECISION), scale)


def _decimal_column(node: Mapping[str, Any], path: str) -> _Column:
    params = node.get("connect.parameters") or {}
    scale = int(node.get("scale", params.get("scale", 0)))
    precision_param = node.get("precision", params.get("connect.decimal.precision"))
    if precision_param is None:
        raise _field_error(path, "decimal without a precision")
    spark = _spark_decimal(int(precision_param), scale, path)

    def convert(raw: bytes) -> Decimal:
        return fit_decimal(_unscaled(raw, scale), spark.precision, spark.scale, path)

    return _Column(spark, False, convert)


def _variable_scale_decimal_column(path: str) -> _Column:
    spark = DecimalType(SPARK_MAX_PRECISION, VARIABLE_SCALE_DECIMAL_SCALE)

    def convert(raw: Mapping[str, Any]) -> Decimal:
        return fit_decimal(_unscaled(raw["value"], int(raw["scale"])), spark.precision, spark.scale, path)

    return _Column(spark, False, convert)


def _date_column(path: str) -> _Column:
    def convert(days: int) -> dt.date:
        try:
            return _EPOCH_DATE + dt.timedelta(days=days)
        except OverflowError as exc:
            raise _field_error(path, f"date {days} days from 1970-01-01 is outside years 1-9999") from exc

    return _Column(DateType(), False, convert)


def _micros(per_unit: int, divisor: int, path: str) -> Converter:
    """Converter from a count of some unit to microseconds; refuses to drop sub-microsecond digits."""

    def convert(value: int) -> int:
        if divisor == 1:
            return value * per_unit
        micros, rest = divmod(value, divisor)
        if rest:
            raise _field_error(path, f"value {value} ns has sub-microsecond digits Spark cannot hold")
        return micros

    return convert


def _time_column(per_unit: int, divisor: int, path: str) -> _Column:
    return _Column(LongType(), False, _micros(per_unit, divisor, path))


def _naive_timestamp_column(per_unit: int, divisor: int, path: str) -> _Column:
    to_micros = _micros(per_unit, divisor, path)

    def convert(value: int) -> dt.datetime:
        micros = to_micros(value)
        try:
            return _EPOCH_NAIVE + dt.timedelta(microseconds=micros)
        except OverflowError as exc:
            raise _field_error(path, f"timestamp {micros} us from epoch is outside years 1-9999") from exc

    return _Column(TimestampNTZType(), False, convert)


def _instant_timestamp_column(per_unit: int, path: str) -> _Column:
    naive = _naive_timestamp_column(per_unit, 1, path).convert
    return _Column(TimestampType(), False, lambda value: naive(value).replace(tzinfo=dt.UTC))


def _zoned_timestamp_column(path: str) -> _Column:
    def convert(text: str) -> dt.datetime:
        fraction = _ZONED_FRACTION.search(text)
        if fraction and fraction.group(1)[6:].strip("0"):
            raise _field_error(path, f"timestamp {text!r} has sub-microsecond digits Spark cannot hold")
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError as exc:
            raise _field_error(path, f"{text!r} is not an ISO-8601 timestamp within years 1-9999") from exc
        if parsed.tzinfo is None:
            raise _field_error(path, f"zoned timestamp {text!r} has no offset")
        return parsed.astimezone(dt.UTC)

    return _Column(TimestampType(), False, convert)


def _interval_column(path: str) -> _Column:
    """Debezium's interval text (``interval.handling.mode=string``, ``P1Y2M3DT4H5M6.78S``), seconds exact.

    Debezium's ``Interval.toIsoString`` takes pgjdbc's seconds, a double summed from the whole seconds and
    the microseconds, and cuts them to 9 fractional digits: for about 0.8% of the microsecond values the
    text is off (1.003691 s arrives as ``1.003690999``).  The source has whole microseconds and the error
    is below 1e-9 s, so rounding to the microsecond restores the value; seconds farther from a whole
    microsecond are refused.  The bootstrap writes the same text (``cdc_lake.sources.column_types``).
    """

    def convert(text: str) -> str:
        match = _DEBEZIUM_INTERVAL.fullmatch(text)
        if match is None:
            raise _field_error(path, f"{text!r} is not Debezium's interval text PnYnMnDTnHnMnS")
        seconds = Decimal(match.group("seconds"))
        exact = seconds.quantize(_MICROSECOND, context=_DECIMAL_CONTEXT)
        if abs(seconds - exact) > _INTERVAL_SECONDS_ERROR:
            raise _field_error(path, f"interval seconds {seconds} are not whole microseconds")
        # + 0 turns -0.000000 into 0; normalize drops trailing zeros (60 prints as 6E+1, "f" as 60).
        return f"{text[: match.start('seconds')]}{format((exact + 0).normalize(), 'f')}S"

    return _Column(StringType(), False, convert)


def _simple(spark: DataType) -> _Column:
    return _Column(spark, False, _identity)


# Debezium and Kafka Connect semantic types, by connect.name.
_STRING_SEMANTICS: Final = frozenset(
    {
        "io.debezium.data.Json",
        "io.debezium.data.Uuid",
        "io.debezium.data.Enum",
        "io.debezium.data.EnumSet",
        "io.debezium.data.Xml",
        "io.debezium.data.Ltree",
        "io.debezium.time.ZonedTime",
    }
)
_SEMANTICS: Final[dict[str, Callable[[Mapping[str, Any], str], _Column]]] = {
    "io.debezium.data.VariableScaleDecimal": lambda node, path: _variable_scale_decimal_column(path),
    "org.apache.kafka.connect.data.Decimal": _decimal_column,
    "io.debezium.time.Date": lambda node, path: _date_column(path),
    "org.apache.kafka.connect.data.Date": lambda node, path: _date_column(path),
    "io.debezium.time.Time": lambda node, path: _time_column(1000, 1, path),
    "org.apache.kafka.connect.data.Time": lambda node, path: _time_column(1000, 1, path),
    "io.debezium.time.MicroTime": lambda node, path: _time_column(1, 1, path),
    "io.debezium.time.NanoTime": lambda node, path: _time_column(1, 1000, path),
    "io.debezium.time.Timestamp": lambda node, path: _naive_timestamp_column(1000, 1, path),
    "org.apache.kafka.connect.data.Timestamp": lambda node, path: _naive_timestamp_column(1000, 1, path),
    "io.debezium.time.MicroTimestamp": lambda node, path: _naive_timestamp_column(1, 1, path),
    "io.debezium.time.NanoTimestamp": lambda node, path: _naive_timestamp_column(1, 1000, path),
    "io.debezium.time.ZonedTimestamp": lambda node, path: _zoned_timestamp_column(path),
    "io.debezium.time.Interval": lambda node, path: _interval_column(path),
    "io.debezium.time.MicroDuration": lambda node, path: _simple(LongType()),
    "io.debezium.time.Year": lambda node, path: _simple(IntegerType()),
    "io.debezium.data.Bits": lambda node, path: _simple(BinaryType()),
}

# Avro logical types without a Connect name (a converter with connect.meta.data=false keeps these).
_LOGICAL: Final[dict[str, Callable[[Mapping[str, Any], str], _Column]]] = {
    "decimal": _decimal_column,
    "date": lambda node, path: _date_column(path),
    "time-millis": lambda node, path: _time_column(1000, 1, path),
    "time-micros": lambda node, path: _time_column(1, 1, path),
    "timestamp-millis": lambda node, path: _instant_timestamp_column(1000, path),
    "timestamp-micros": lambda node, path: _instant_timestamp_column(1, path),
    "local-timestamp-millis": lambda node, path: _naive_timestamp_column(1000, 1, path),
    "local-timestamp-micros": lambda node, path: _naive_timestamp_column(1, 1, path),
}

_PRIMITIVES: Final[dict[str, DataType]] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "bytes": BinaryType(),
}
_CONNECT_INTS: Final[dict[str, DataType]] = {"int8": ByteType(), "int16": ShortType()}


def _full_name(node: Mapping[str, Any]) -> str:
    name: str = node["name"]
    namespace = node.get("namespace")
    return f"{namespace}.{name}" if namespace and "." not in name else name


class _Compiler:
    """Turns one Avro schema tree into :class:`_Column` objects, resolving named-type references."""

    def __init__(self) -> None:
        self._named: dict[str, Mapping[str, Any]] = {}

    def column(self, node: Any, path: str) -> _Column:
        if isinstance(node, list):
            return self._union(node, path)
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return _simple(_PRIMITIVES[node])
            if node in self._named:
                return self.column(self._named[node], path)
            raise _field_error(path, f"unknown Avro type {node!r}")
        avro_type = node["type"]
        if not isinstance(avro_type, str):
            return self.column(avro_type, path)
        if avro_type in ("record", "enum", "fixed"):
            self._named[_full_name(node)] = node
        semantic = node.get("connect.name") or (_full_name(node) if avro_type == "record" else None)
        if semantic in _SEMANTICS:
            return _SEMANTICS[semantic](node, path)
        if semantic in _STRING_SEMANTICS:
            return _simple(StringType())
        logical = node.get("logicalType", node.get(STASHED_LOGICAL_TYPE))
        if logical in _LOGICAL:
            return _LOGICAL[logical](node, path)
        if avro_type == "record":
            return self.record(node, path)
        if avro_type == "array":
            return self._array(node, path)
        if avro_type == "map":
            values = self.column(node["values"], f"{path}.value")
            return _Column(
                MapType(StringType(), values.spark, values.nullable),
                False,
                lambda raw: {k: None if v is None else values.convert(v) for k, v in raw.items()},
            )
        if avro_type == "enum":
            return _simple(StringType())
        if avro_type == "fixed":
            return _simple(BinaryType())
        if avro_type == "int" and node.get("connect.type") in _CONNECT_INTS:
            return _simple(_CONNECT_INTS[node["connect.type"]])
        if avro_type in _PRIMITIVES:
            return _simple(_PRIMITIVES[avro_type])
        raise _field_error(path, f"unsupported Avro type {avro_type!r}")

    def record(self, node: Mapping[str, Any], path: str) -> _Column:
        """Compile a record into a Spark struct, keeping Avro's nullability of its fields."""
        fields = [
            (f["name"], self.column(f["type"], f"{path}.{f['name']}" if path else f["name"]))
            for f in node["fields"]
        ]
        spark = StructType([StructField(name, col.spark, col.nullable) for name, col in fields])

        def convert(raw: Mapping[str, Any]) -> dict[str, Any]:
            return {name: None if raw.get(name) is None else col.convert(raw[name]) for name, col in fields}

        return _Column(spark, False, convert)

    def _union(self, branches: list[Any], path: str) -> _Column:
        others = [b for b in branches if b != "null"]
        if len(others) != 1:
            raise _field_error(path, f"union {branches!r} is not supported (only a type with null)")
        inner = self.column(others[0], path)
        return _Column(inner.spark, "null" in branches, inner.convert)

    def _array(self, node: Mapping[str, Any], path: str) -> _Column:
        items = self.column(node["items"], f"{path}[]")
        return _Column(
            ArrayType(items.spark, items.nullable),
            False,
            lambda raw: [None if v is None else items.convert(v) for v in raw],
        )


def _number_text(value: Decimal) -> str:
    """A decimal's exact text with the scale it arrived with (``1.50``, ``0.000001``), as SQL prints it.

    A fixed-scale decimal keeps its scale; Debezium sends an unconstrained Postgres numeric without its
    trailing fractional zeros (``1.500`` as ``1.5``, ``100`` as ``1E+2``), so its text has none either.
    """
    return format(value, "f")


def _chosen(node: Mapping[str, Any], path: str, chosen: ColumnType) -> _Column:
    """The column as a table's ``column_types`` represents it: exact text, or a given decimal."""
    semantic = node.get("connect.name")
    logical = node.get("logicalType", node.get(STASHED_LOGICAL_TYPE))
    unscaled: Callable[[Any], Decimal] | None = None
    if semantic == "io.debezium.data.VariableScaleDecimal":
        unscaled = lambda raw: _unscaled(raw["value"], int(raw["scale"]))  # noqa: E731
    elif semantic == "org.apache.kafka.connect.data.Decimal" or logical == "decimal":
        params = node.get("connect.parameters") or {}
        scale = int(node.get("scale", params.get("scale", 0)))
        unscaled = lambda raw: _unscaled(raw, scale)  # noqa: E731
    if unscaled is not None and chosen.is_string:
        to_decimal = unscaled
        return _Column(StringType(), False, lambda raw: _number_text(to_decimal(raw)))
    if unscaled is not None:
        assert chosen.precision is not None and chosen.scale is not None
        precision, scale, to_decimal = chosen.precision, chosen.scale, unscaled
        spark = DecimalType(precision, scale)
        return _Column(spark, False, lambda raw: fit_decimal(to_decimal(raw), precision, scale, path))
    if semantic == "io.debezium.data.Bits" and chosen.is_string:
        width = int((node.get("connect.parameters") or {}).get("length", 0))

        def bit_string(raw: bytes) -> str:
            number = int.from_bytes(raw, "little")
            if width < 1 or number >= 1 << width:
                raise _field_error(path, f"bits {raw.hex()} do not fit bit({width})")
            return format(number, f"0{width}b")

        return _Column(StringType(), False, bit_string)
    encoded = semantic or logical or node["type"]
    raise _field_error(path, f"column_types {chosen.spec} does not apply to {encoded}")


def _chosen_column(node: Any, path: str, chosen: ColumnType) -> _Column:
    """:func:`_chosen` through the optional-value union Debezium writes for a nullable column."""
    if isinstance(node, list):
        others = [branch for branch in node if branch != "null"]
        if len(others) != 1:
            raise _field_error(path, f"union {node!r} is not supported (only a type with null)")
        inner = _chosen_column(others[0], path, chosen)
        return _Column(inner.spark, "null" in node, inner.convert)
    if isinstance(node, str) or not isinstance(node.get("type"), str):
        raise _field_error(path, f"column_types {chosen.spec} does not apply to {node!r}")
    return _chosen(node, path, chosen)


def _unwrapped(node: Any) -> Any:
    """The type of a "type or null" union (the shape Debezium gives an optional column or element)."""
    if isinstance(node, list):
        others = [branch for branch in node if branch != "null"]
        return others[0] if len(others) == 1 else None
    return node


def placeholder_for(avro_type: Any) -> Any:
    """The raw value Debezium 3.5 sends for an unchanged TOASTed Postgres column of ``avro_type``, or None.

    Debezium shapes its placeholder after the column's type (``UnchangedToastedPlaceholder``), measured
    against the stack and recorded in ``tests/unit/data/recorded/postgres_toast_arrays.jsonl``:

    - text-like strings (``text``, ``varchar``, ``json``, ``jsonb``, ``xml``, ``ltree``, ...): the string;
    - ``bytea``: its UTF-8 bytes;
    - arrays of ``text``, ``varchar``, ``char``, ``json``, ``jsonb``: a one-element array of the string;
    - ``uuid[]``: a one-element array of the name-based UUID :data:`UNAVAILABLE_UUID`;
    - ``int[]``, ``bigint[]``, ``date[]``: the string's bytes as numbers (``[95, 95, 100, ...]``; a
      ``date[]`` as days);
    - ``hstore`` as a map: a one-entry map from the string to itself.

    None for every other type: fixed-size values are never TOASTed, and for the other varlena types
    (``smallint[]``, ``boolean[]``, ``real[]``, ``double precision[]``, ``numeric[]``,
    ``timestamptz[]``, ``numeric``, bit strings, ...) Debezium has no placeholder of the column's
    type: converting fails, which stops the connector (``event.converting.failure.handling.mode=fail``),
    so such a value never arrives; onboarding refuses those arrays under REPLICA IDENTITY DEFAULT.
    """
    node = _unwrapped(avro_type)
    if isinstance(node, str):
        node = {"type": node}
    if not isinstance(node, Mapping) or not isinstance(node.get("type"), str):
        return None
    semantic = node.get("connect.name")
    logical = node.get("logicalType", node.get(STASHED_LOGICAL_TYPE))
    kind = node["type"]
    if kind == "string":
        return UNAVAILABLE_PLACEHOLDER if semantic in _TOASTABLE_STRINGS else None
    if kind == "bytes":
        return _PLACEHOLDER_BYTES if semantic is None and logical is None else None
    if kind == "map":
        return {UNAVAILABLE_PLACEHOLDER: UNAVAILABLE_PLACEHOLDER}
    if kind != "array":
        return None
    items = _unwrapped(node["items"])
    if isinstance(items, str):
        items = {"type": items}
    if not isinstance(items, Mapping):
        return None
    element, item_semantic = items.get("type"), items.get("connect.name")
    if element == "string" and item_semantic in _TEXT_ARRAY_ELEMENTS:
        return [UNAVAILABLE_PLACEHOLDER]
    if element == "string" and item_semantic == "io.debezium.data.Uuid":
        return [UNAVAILABLE_UUID]
    if (
        element == "int"
        and items.get("connect.type") is None
        and item_semantic in (None, "io.debezium.time.Date")
    ):
        return _PLACEHOLDER_INTS
    if element == "long" and item_semantic is None and items.get("connect.type") in (None, "int64"):
        return _PLACEHOLDER_INTS
    return None


class RowConverter:
    """Compiled converter for one Avro row schema (the ``before``/``after`` record, or a key record).

    Compile once per schema id and reuse: :meth:`convert` does no schema work.  ``column_types`` is the
    table's per-column representation (``cdc_lake.representation``): those columns convert to their exact
    text or the chosen decimal instead of the default type.
    """

    def __init__(
        self, row_schema: Mapping[str, Any], column_types: Mapping[str, ColumnType] | None = None
    ) -> None:
        if row_schema.get("type") != "record":
            raise DecodeError(f"row schema {row_schema.get('name')!r} is not an Avro record")
        compiler = _Compiler()
        chosen = column_types or {}
        self._columns = [
            (
                f["name"],
                _chosen_column(f["type"], f["name"], chosen[f["name"]])
                if f["name"] in chosen
                else compiler.column(f["type"], f["name"]),
            )
            for f in row_schema["fields"]
        ]
        # Each column's placeholder shape, compiled once; a column_types choice (numeric, bits) has none.
        self._placeholders = {
            f["name"]: shape
            for f in row_schema["fields"]
            if f["name"] not in chosen and (shape := placeholder_for(f["type"])) is not None
        }
        # Every top-level column is nullable: delete images with a default replica identity carry only the
        # key, unchanged TOAST columns are filled from the lake later, and Hudi evolves nullable columns.
        self.struct_type = StructType([StructField(name, col.spark, True) for name, col in self._columns])

    @property
    def column_names(self) -> list[str]:
        """The row's columns, in schema order."""
        return [name for name, _ in self._columns]

    @property
    def placeholders(self) -> Mapping[str, Any]:
        """The columns that can carry Debezium's unavailable-value placeholder, and its raw shape each."""
        return self._placeholders

    def convert(self, record: Mapping[str, Any], placeholders: bool = False) -> dict[str, Any]:
        """Convert a raw Avro row into Python values Spark accepts for :attr:`struct_type`.

        With ``placeholders`` (the after image of a Postgres update or create: see
        :func:`cdc_lake.decode.envelope.decode_message`), a column holding exactly the placeholder of its
        type (:func:`placeholder_for`) becomes :data:`UNAVAILABLE`, never a value; without it, and in every
        column whose type has no placeholder, the value is the value.
        """
        shapes = self._placeholders if placeholders else {}
        row: dict[str, Any] = {}
        for name, col in self._columns:
            raw = record.get(name)
            if raw is None:
                row[name] = None
            elif shapes and name in shapes and raw == shapes[name]:
                row[name] = UNAVAILABLE
            else:
                row[name] = col.convert(raw)
        return row


def is_envelope(schema: Mapping[str, Any]) -> bool:
    """True when ``schema`` is a Debezium envelope record (before/after/source/op)."""
    names = {f["name"] for f in schema.get("fields", ())}
    return schema.get("type") == "record" and {"before", "after", "op", "source"} <= names


def row_schema(value_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The self-contained Avro record schema of an envelope's ``after`` (and ``before``) row.

    Named types are expanded, so the result can be compiled on its own; logical types are stashed.
    """
    if not is_envelope(value_schema):
        raise DecodeError(f"schema {value_schema.get('name')!r} is not a Debezium envelope")
    try:
        expanded = expand_schema(stash_logical_types(dict(value_schema)))
    except (ValueError, SchemaParseException) as exc:
        raise DecodeError(f"envelope {value_schema.get('name')!r} is not a valid Avro schema: {exc}") from exc
    assert isinstance(expanded, dict)
    after = next(f for f in expanded["fields"] if f["name"] == "after")
    branches = after["type"] if isinstance(after["type"], list) else [after["type"]]
    records = [b for b in branches if isinstance(b, dict) and b.get("type") == "record"]
    if len(records) != 1:
        raise DecodeError(f"envelope {value_schema.get('name')!r} has no record type for 'after'")
    row: dict[str, Any] = records[0]
    return row


def spark_schema_for(avro_value_schema: Mapping[str, Any]) -> StructType:
    """Spark schema of the row described by a Debezium value (envelope) schema, or by a row/key record."""
    row = row_schema(avro_value_schema) if is_envelope(avro_value_schema) else avro_value_schema
    return RowConverter(row).struct_type


def convert_row(record: Mapping[str, Any], avro_row_schema: Mapping[str, Any]) -> dict[str, Any]:
    """Convert one raw Avro row with its row schema; compile a :class:`RowConverter` instead for many rows."""
    return RowConverter(avro_row_schema).convert(record)
