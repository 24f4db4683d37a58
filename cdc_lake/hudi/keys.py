"""Composite key values Hudi's record key cannot tell apart, refused before they are written.

Hudi 1.1 builds the record key of a table keyed on two or more columns (``NonpartitionedKeyGenerator``
and ``ComplexKeyGenerator`` alike) as ``f1:v1,f2:v2`` without escaping, with ``__empty__`` for an empty
string and ``__null__`` for a null.  Two distinct source keys can so share one record key: on key
``(a, b)``, ``('x,b:y', 'z')`` and ``('x', 'y,b:z')`` both become ``a:x,b:y,b:z``, ``('', 'z')`` and
``('__empty__', 'z')`` both ``a:__empty__,b:z``.  Measured on Hudi 1.1: an upsert of the two rows leaves
one; a bulk insert stores both under one key, and the next upsert of either replaces both with it.
Either way the lake silently holds fewer rows than the source.

A different encoding would change the record keys of every existing table (they would no longer match
their stored rows), so the encoding stays and a key value that could collide stops its table instead:
a string key component containing ``,<key column>:`` or equal to a placeholder.  The applier stops the
table at that message (a bad message, :mod:`cdc_lake.apply.decoding`); every Hudi write
(:func:`cdc_lake.hudi.writer.write_batch`: the bootstrap copy, the applier, a replay) fails inside its
own Spark job, without an extra scan.  The way out is a key without such values: ``key: [...]`` in the
table's config, then ``cdc-lake rebootstrap TABLE``.

A single key column is unambiguous: Hudi writes its value bare (or as ``f:v``) and refuses an empty one,
as it refuses a composite key whose every component is empty or null.  Such a row fails the write
(:func:`refuse_empty_keys`) naming the table and the row, in the words of a refused value, so a
bootstrap ends at once instead of asking to be resumed: every run would meet the same row.

Hudi also builds a key value's text differently per write path.  The upsert (Avro records) writes a
timestamp as its microseconds since the epoch and a binary value as hex; the bulk insert's row writer
wrote the value's ``toString()``: milliseconds in the JVM's time zone (keys a microsecond apart became
one) and ``[B@...`` (the array's identity).  A table bootstrapped one way and updated the other held two
rows per key.  The row writer also refuses an empty string component of a composite key ("Record key
has to be non-null!"), which the upsert writes as ``__empty__``.  The bulk insert of a table keyed on
a timestamp or binary column, or on a composite key with a string column, so leaves the row writer
(:func:`row_writer_keys_agree`); every other key gives the same text on both paths, each proven by
``tests/integration/test_hudi_record_key_types.py`` (empty components:
``tests/integration/test_empty_string_keys.py``).

Since the record key is text, it tells keys apart as their text does, not as Python's or Spark's
equality: every NaN is ``NaN`` (one key), while ``0.0`` and ``-0.0`` are two keys (Java's text).  The
applier's per-key merge of a batch compares keys by :func:`key_identity` (on the driver) and
:func:`key_identity_column` (in Spark): a floating-point value by its text, every other value by
itself, since for every other key type two values of a column have one text exactly when they are
equal: a decimal is written at its column's scale, and composite values that could share a text are
refused above (docs/type-mapping.md, "Keys").

Hudi 1.1.1's metadata table cannot read back an HFile key of 126 bytes or more (its writer and reader
encode the key length differently, apache/hudi#18450, fixed after 1.1.1): on the record index the next
upsert's lookup fails, or runs the JVM out of memory, which ends every table of the Spark application.
A table on the record index so refuses a row whose record key would be that long, in the write's own
Spark job, naming the table, the row and the way out (a shorter key, or ``lake.index: GLOBAL_BLOOM``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DoubleType,
    FloatType,
    StringType,
    StructType,
    TimestampType,
)

from cdc_lake.hudi.options import HudiTableSpec
from cdc_lake.lake.layout import IndexType
from cdc_lake.spark.errors import REFUSED_VALUE

RECORD_KEY_COLUMN = "_hoodie_record_key"

PLACEHOLDERS = ("__null__", "__empty__")
"""What Hudi writes in a composite record key for a null and for an empty string component."""


ROW_WRITER_KEY_TYPES: tuple[type[DataType], ...] = (TimestampType, BinaryType)
"""Key column types whose record key Hudi 1.1's row writer builds differently from its upsert."""


def row_writer_keys_agree(schema: StructType, key_fields: Sequence[str]) -> bool:
    """Whether Hudi's row writer builds the upsert's record key for every row of ``schema``: not for a
    timestamp or binary key column, nor for a string column of a composite key (an empty one)."""
    types = {f.name: f.dataType for f in schema.fields}
    if any(isinstance(types.get(name), ROW_WRITER_KEY_TYPES) for name in key_fields):
        return False
    return len(key_fields) == 1 or not any(isinstance(types.get(name), StringType) for name in key_fields)


_ROW_WRITER_TEXT: dict[type[DataType], str] = {
    TimestampType: r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d",  # toString(): 2024-01-01 12:00:00.123
    BinaryType: r"\[B@",  # the array's identity: [B@45000dd1
}


def row_writer_key_pattern(schema: StructType, key_fields: Sequence[str]) -> str | None:
    """A regular expression matching a record key that Hudi's row writer built for a timestamp or binary
    key column of ``schema`` (the upsert writes digits or hex there), or None when the key has no such
    column.  A composite key's component is matched after its ``,<column>:`` (a string value holding
    that separator is refused, :func:`refuse_ambiguous_keys`)."""
    types = {f.name: f.dataType for f in schema.fields}
    parts = []
    for name in key_fields:
        text = next((t for kind, t in _ROW_WRITER_TEXT.items() if isinstance(types.get(name), kind)), None)
        if text is not None:
            parts.append(f"^{text}" if len(key_fields) == 1 else f"(^|,){re.escape(name)}:{text}")
    return "|".join(parts) or None


def row_writer_record_key(lake: DataFrame, key_fields: Sequence[str]) -> str | None:
    """A record key of ``lake`` (read with Hudi's meta columns) that an earlier cdc-lake bootstrap wrote
    through the row writer for a timestamp or binary key, or None: such a table holds two rows per key
    once the applier upserts it.  One pass over the record key column, only for such keys."""
    pattern = row_writer_key_pattern(lake.schema, key_fields)
    if pattern is None:
        return None
    found = lake.select(RECORD_KEY_COLUMN).where(F.col(RECORD_KEY_COLUMN).rlike(pattern)).limit(1).collect()
    return str(found[0][0]) if found else None


def row_writer_key_reason(table: str, record_key: str) -> str:
    """The applier's one-line error for a table holding :func:`row_writer_record_key`'s keys."""
    return (
        f"table {table}: the lake holds record key {record_key!r}, written by the bootstrap of an earlier "
        "cdc-lake through Hudi's row writer, which builds timestamp and binary keys differently from the "
        "applier (two lake rows per key, deleted keys kept); re-bootstrap the table (cdc-lake rebootstrap)"
    )


def _markers(key_fields: Sequence[str]) -> tuple[str, ...]:
    """The ``,<column>:`` separators of a composite record key (none for a single key column)."""
    return tuple(f",{name}:" for name in key_fields) if len(key_fields) > 1 else ()


def ambiguous_key_column(row: Mapping[str, Any], key_fields: Sequence[str]) -> str | None:
    """The first key column of ``row`` whose value could give another key's Hudi record key, or None."""
    markers = _markers(key_fields)
    if not markers:
        return None
    for name in key_fields:
        value = row.get(name)
        if isinstance(value, str) and (value in PLACEHOLDERS or any(marker in value for marker in markers)):
            return name
    return None


def _why(key_fields: Sequence[str]) -> str:
    return (
        f"holds a value Hudi's composite record key (key {', '.join(key_fields)}) cannot tell apart from "
        f"another key's (it contains ',<key column>:' or is one of {', '.join(PLACEHOLDERS)}), so one lake "
        "row would replace another; set key in the table's config to columns without such values"
    )


def ambiguous_key_reason(table: str, column: str, key_fields: Sequence[str]) -> str:
    """The applier's one-line error for an ambiguous value of key ``column``: table, key and the way out."""
    why = _why(key_fields)
    return f"table {table}: key column {column!r} {why}, then re-bootstrap the table (cdc-lake rebootstrap)"


def _row_key(key_fields: Sequence[str]) -> Column:
    """A row's key values as JSON, for the refusal that names the row."""
    return F.to_json(F.struct(*[F.col(k) for k in key_fields]))


def _refuse_where(df: DataFrame, refused: Column, reason: Column) -> DataFrame:
    """``df`` whose rows raise ``reason`` where ``refused`` holds, in the job that consumes them."""
    return df.filter(F.when(refused, F.raise_error(reason)).otherwise(F.lit(True)))


def refuse_ambiguous_keys(df: DataFrame, table: str, key_fields: Sequence[str]) -> DataFrame:
    """``df`` whose rows raise, in the job that consumes them, on an ambiguous string key value.

    The error names the table, the column and the row's key, with the words of every refused value
    (:data:`cdc_lake.spark.errors.REFUSED_VALUE`), so a bootstrap ends at once without a retry.
    """
    markers = _markers(key_fields)
    if not markers:
        return df
    strings = {f.name for f in df.schema.fields if isinstance(f.dataType, StringType)}
    for name in (n for n in key_fields if n in strings):
        column = F.col(name)
        ambiguous: Column = column.isin(*PLACEHOLDERS)
        for marker in markers:
            ambiguous = ambiguous | (F.instr(column, marker) > 0)
        row_key = _row_key(key_fields)
        head = f"table {table}: key column {name!r} {REFUSED_VALUE} "
        reason = F.concat(F.lit(head), row_key, F.lit(f" {_why(key_fields)}"))
        df = _refuse_where(df, ambiguous, reason)
    return df


def refuse_empty_keys(df: DataFrame, table: str, key_fields: Sequence[str]) -> DataFrame:
    """``df`` whose rows raise, in the job that consumes them, on a key Hudi refuses as a record key:
    every key column null or empty (a single one, or every component of a composite key).  Only a key of
    string and binary columns can be empty (a null primary key column does not exist); ``df`` itself
    for any other key."""
    types = {f.name: f.dataType for f in df.schema.fields}
    if not all(isinstance(types.get(name), (StringType, BinaryType)) for name in key_fields):
        return df
    texts = [_key_text(F.col(name), types[name]) for name in key_fields]
    empty = reduce(lambda a, b: a & b, [text.isNull() | (text == F.lit("")) for text in texts])
    reason = F.concat(
        F.lit(f"table {table}: the record key {REFUSED_VALUE} "),
        _row_key(key_fields),
        F.lit(
            f" is empty (key {', '.join(key_fields)}: every column null or the empty string), which Hudi "
            "refuses as a record key; set key in the table's config to columns that are never all empty, "
            "then re-bootstrap the table (cdc-lake rebootstrap)"
        ),
    )
    return _refuse_where(df, empty, reason)


RECORD_INDEX_KEY_BYTES = 125
"""The longest record key (UTF-8 bytes) Hudi 1.1.1's record index reads back (apache/hudi#18450)."""


def _key_text(column: Column, data_type: DataType) -> Column:
    """A key value's text as Hudi's upsert writes it into the record key."""
    if isinstance(data_type, BinaryType):
        return F.lower(F.hex(column))
    if isinstance(data_type, TimestampType):
        return F.unix_micros(column).cast("string")
    return column.cast("string")


_FLOATING = (FloatType, DoubleType)
"""Key column types whose record key text is not their equality (module docstring)."""


def key_identity(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """``key`` as its record key tells it apart: a floating-point value by its text (one for every NaN,
    ``-0.0`` apart from ``0.0``; Python's, as distinct as Java's), any other value as it is."""
    return tuple(repr(value) if isinstance(value, float) else value for value in key)


def key_identity_column(key: Column, key_type: StructType) -> Column:
    """:func:`key_identity` of ``key``, a struct column of type ``key_type``: a floating-point field as the
    text the record key holds (:func:`_key_text`), any other field as it is (``key`` itself for a key
    without a floating-point field)."""
    if not any(isinstance(f.dataType, _FLOATING) for f in key_type.fields):
        return key
    parts = []
    for f in key_type.fields:
        value = key.getField(f.name)
        text = isinstance(f.dataType, _FLOATING)
        parts.append((_key_text(value, f.dataType) if text else value).alias(f.name))
    return F.struct(*parts)


def record_key_text(schema: StructType, key_fields: Sequence[str]) -> Column:
    """The record key Hudi builds for a row of ``schema`` (``f1:v1,f2:v2`` for a composite key)."""
    types = {f.name: f.dataType for f in schema.fields}
    if len(key_fields) == 1:
        return _key_text(F.col(key_fields[0]), types[key_fields[0]])
    parts = []
    for name in key_fields:
        text = _key_text(F.col(name), types[name])
        value = F.when(text.isNull(), F.lit(PLACEHOLDERS[0])).when(text == "", F.lit(PLACEHOLDERS[1]))
        parts.append(F.concat(F.lit(f"{name}:"), value.otherwise(text)))
    return F.concat_ws(",", *parts)


def refuse_long_record_keys(df: DataFrame, spec: HudiTableSpec) -> DataFrame:
    """``df`` whose rows raise, in the job that consumes them, on a record key the record index cannot
    read back (over :data:`RECORD_INDEX_KEY_BYTES`); ``df`` itself for any other index."""
    if spec.index is not IndexType.RECORD_INDEX:
        return df
    length = F.octet_length(record_key_text(df.schema, spec.record_key_fields))
    row_key = _row_key(spec.record_key_fields)
    reason = F.concat(
        F.lit(f"table {spec.table_name}: the record key {REFUSED_VALUE} "),
        row_key,
        F.lit(" is "),
        length.cast("string"),
        F.lit(
            f" bytes; Hudi 1.1.1's record index cannot read back keys over {RECORD_INDEX_KEY_BYTES} bytes "
            "(apache/hudi#18450); set key in the table's config to shorter columns or lake.index to "
            "GLOBAL_BLOOM, then re-bootstrap the table (cdc-lake rebootstrap)"
        ),
    )
    return _refuse_where(df, length > RECORD_INDEX_KEY_BYTES, reason)
