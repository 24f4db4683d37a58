"""The one lake-versus-source comparison: every row by key, every value through the lake column's type.

:func:`normalize` turns a source value (``source_value=True``) or a lake value into one comparable form
per lake type: instants as aware UTC datetimes, ``real``/``FLOAT`` as 32-bit floats, times of day as
microseconds, ``timetz`` as UTC microseconds of the day, bytes as ``bytes``, sets as sorted text, UUIDs
as text, NaN as :data:`NAN`, arrays element by element.  :func:`assert_rows_equal` checks that two
row lists hold the same keys (no duplicates, none missing or extra) and equal normalized values in
every column of the expected rows; JSON columns compare as parsed JSON (the source's text formatting
may differ).  ``support.bootstrap.assert_lake_equals_source`` and ``support.apply.assert_lake_matches``
gather their rows and call it, for Spark's rows and for the second reader's (``support.second_reader``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
import uuid
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

NAN = "NaN"
"""What a floating-point NaN compares as (NaN equals nothing, itself included)."""


def float32(value: Any) -> Any:
    """A ``real``/``FLOAT`` as the 32-bit float the lake holds (None stays None)."""
    return None if value is None else float(struct.unpack("f", struct.pack("f", float(value)))[0])


def micros(value: Any) -> int:
    """A time of day or a duration as microseconds."""
    if isinstance(value, dt.timedelta):
        return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    return int(value)


def _utc_time_of_day(value: dt.time) -> int:
    """Microseconds past midnight UTC of a time with a zone (Debezium sends timetz in UTC)."""
    offset = value.utcoffset() or dt.timedelta()
    return (micros(value) - micros(offset)) % (86_400 * 1_000_000)


def _instant(value: dt.datetime) -> dt.datetime:
    """An aware UTC datetime; a naive one from Spark is in the Python process's local time zone."""
    return value.astimezone(dt.UTC)


def parsed_json(value: Any) -> Any:
    """A JSON object or array text as parsed JSON; anything else unchanged."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def normalize(value: Any, spark_type: DataType, source_value: bool, naive_utc: bool = False) -> Any:
    """A comparable form of a lake (``source_value=False``) or source value of a column of ``spark_type``.

    ``naive_utc``: a naive source timestamp is in UTC (MariaDB TIMESTAMP through the driver).
    """
    if value is None:
        return None
    if isinstance(spark_type, ArrayType):
        return [normalize(v, spark_type.elementType, source_value, naive_utc) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return NAN
    if isinstance(spark_type, TimestampType):
        if source_value and naive_utc and value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return _instant(value)
    if isinstance(spark_type, TimestampNTZType | DateType):
        return value
    if isinstance(spark_type, BinaryType):
        return bytes(value)
    if isinstance(spark_type, BooleanType) and isinstance(value, bytes):
        return bool(int.from_bytes(value, "big"))
    if isinstance(spark_type, FloatType):
        return float32(value)
    if isinstance(spark_type, DecimalType):
        return Decimal(value)
    if isinstance(spark_type, IntegerType | LongType) and isinstance(value, bool):
        return int(value)
    if isinstance(spark_type, LongType) and isinstance(value, dt.time | dt.timedelta):
        return micros(value)
    if isinstance(spark_type, StringType):
        if isinstance(value, dt.time):
            return _utc_time_of_day(value)
        if not source_value and isinstance(value, str) and value.endswith("Z") and ":" in value[:3]:
            return _utc_time_of_day(dt.time.fromisoformat(value[:-1] + "+00:00"))
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, set):
            return ",".join(sorted(value))
    return value


def assert_rows_equal(
    table: str,
    expected: Sequence[Mapping[str, Any]],
    actual: Sequence[Mapping[str, Any]],
    types: Mapping[str, DataType],
    key: Sequence[str],
    *,
    reader: str = "lake",
    expected_from_source: bool = True,
    columns: Collection[str] | None = None,
    json_columns: Collection[str] = (),
    naive_utc_columns: Collection[str] = (),
) -> None:
    """``actual`` (read from ``table`` by ``reader``) holds the keys of ``expected``, each once, and the
    same values in ``columns`` (default: every column of the expected rows, columns added to the source
    since included: one the lake lacks fails the comparison, naming it).

    ``expected_from_source``: the expected rows are the source's (else another reader's lake rows);
    ``json_columns`` compare as parsed JSON; ``naive_utc_columns`` are naive source timestamps in UTC.
    """
    def key_of(row: Mapping[str, Any], from_source: bool) -> tuple[Any, ...]:
        return tuple(normalize(row[k], types[k], from_source, k in naive_utc_columns) for k in key)

    actual_keys = [key_of(r, False) for r in actual]
    held = Counter(actual_keys)
    doubled = [(k, n) for k, n in held.items() if n > 1][:10]
    assert not doubled, f"{reader}, {table}: {len(actual) - len(held)} duplicate lake rows: {doubled}"
    by_key = dict(zip(actual_keys, actual, strict=True))
    expected_keys = {key_of(r, expected_from_source) for r in expected}
    missing = sorted(expected_keys - set(by_key))[:10]
    extra = sorted(set(by_key) - expected_keys)[:10]
    assert not missing and not extra, f"{reader}, {table}: keys missing {missing}, extra {extra}"
    absent = sorted({c for row in expected for c in (row if columns is None else columns)} - set(types))
    assert not absent, f"{reader}, {table}: the lake has no columns {absent}"
    for row in expected:
        found = by_key[key_of(row, expected_from_source)]
        for column in row if columns is None else columns:
            spark_type = types[column]
            want = normalize(row[column], spark_type, expected_from_source, column in naive_utc_columns)
            got = normalize(found[column], spark_type, False)
            if column in json_columns:
                want, got = parsed_json(want), parsed_json(got)
            where = f"{table} key {[row[k] for k in key]} column {column}"
            assert got == want, f"{reader}, {where}: {got!r} != expected {want!r}"
