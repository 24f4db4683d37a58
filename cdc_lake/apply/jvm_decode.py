"""Decoding a large batch in the JVM: Spark's Kafka source and ``from_avro``, for batches of plain changes.

Measured (docs/benchmarks.md, "Goal 5"): on a batch of 100,000 changes the Python decode
(:mod:`cdc_lake.apply.decoding`) and PySpark's row conversion are most of the applier's time, and
decoding in the JVM (``from_avro`` on the Confluent payload) does the whole batch in about half of it.
The Python decode stays the reference and the only decode of everything unusual: this module decodes
a batch in the JVM only when every message of it is *plain*, and otherwise returns None, and the
applier decodes the batch in Python as before (:meth:`cdc_lake.apply.table_applier.TableApplier`).

A message is plain when the Python decode gives it exactly the :class:`~cdc_lake.apply.decoding.DecodedChange`
computed here:

- a tombstone (dropped, as in Python), or a Postgres change (``c``, ``r``, ``u``, ``d``) with its row
  image, whose value and key are Confluent-framed Avro of schema ids whose every column has a Spark
  form of its converter (:data:`cdc_lake.decode.types.JvmForm`: one table of types holds both forms),
  that decode with ``from_avro`` and encode back with ``to_avro`` to the very bytes (so no byte is
  left over, no value is read two ways, every string is valid UTF-8), every value within its Spark
  type (a form gives null exactly where the Python converter refuses);
- with every key column in its row image, no unavailable-value placeholder, no half of a primary-key
  update (Debezium's headers), no update that moves the configured key or lacks its old value, no
  delete of a table with soft deletes, no composite key with a string column;
- whose ordering comes from its ``source.lsn`` (or the snapshot), and whose stream position
  (``source.sequence``, ``["<digits>","<digits>"]``) is not below its partition's applied mark nor below
  an earlier change of its partition in the batch: nothing re-sent.

The table's ``column_types`` and non-Postgres sources always take the Python decode.  What the JVM
computes (ordering value, stream position) follows the Postgres position codec
(:mod:`cdc_lake.sources.postgres.codec`).  ``tests/integration/test_decode_equivalence.py`` proves, on
generated batches of every column kind and event shape, that both decodes give the same summary and
the same change rows, that the JVM takes every batch of plain messages, and that one message only the
Python decode handles sends the batch to it; ``tests/integration/test_apply_model_spark.py`` runs each
batch the JVM takes as a third path of the property suite.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from py4j.protocol import Py4JJavaError
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)

from cdc_lake.apply.decoding import BatchSummary, DecodeSettings
from cdc_lake.apply.frame import (
    KAFKA_OFFSET_COLUMN,
    KAFKA_PARTITION_COLUMN,
    MOVED_FROM_COLUMN,
    POSITION_COLUMN,
    UNAVAILABLE_COLUMN,
    col,
)
from cdc_lake.apply.key_change import KEY_UPDATE_HEADERS
from cdc_lake.apply.redelivery import PartitionMarks
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE
from cdc_lake.decode.schema import RegisteredSchema
from cdc_lake.decode.types import JvmForm
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.lake.columns import OP_COLUMN, ORDERING_COLUMN, SOURCE_TS_COLUMN
from cdc_lake.sources import ENGINES
from cdc_lake.sources.postgres.codec import CODEC as POSTGRES

_LOG = logging.getLogger(__name__)

_ENGINES: Final = [caps for caps in ENGINES.values() if caps.positions is POSTGRES]
_CONNECTORS: Final = tuple(sorted(value for caps in _ENGINES for value in caps.connector_values))
"""The ``source.connector`` values of the engines whose positions the Postgres codec reads."""
_PLACEHOLDERS: Final = all(caps.unavailable_placeholders for caps in _ENGINES)
_SEQUENCE: Final = r'^\["([0-9]{1,20})","([0-9]{1,20})"\]$'
_FIRST_SEQUENCE: Final = r'^\[null,"[0-9]+"\]$'  # before the slot's first commit: no stream position
_MARK_DIGITS: Final = 40
_SOURCE_FIELDS: Final = frozenset({"connector", "ts_ms", "snapshot", "lsn", "sequence"})
_NUMBERED_KEYS: Final = (FloatType, DoubleType)  # their record keys are not Spark's equality
_VALUE_ID: Final = "_cdc_decode_value_id"
_KEY_ID: Final = "_cdc_decode_key_id"
_TS_MS: Final = "_cdc_decode_ts_ms"
_PLAIN: Final = "_cdc_decode_plain"


def _schema_id(frame: Column) -> Column:
    """The schema id of a Confluent frame (bytes 2-5, big-endian unsigned), null unless it is framed."""
    framed = (F.length(frame) >= 5) & (F.hex(F.substring(frame, 1, 1)) == F.lit("00"))
    return F.when(framed, F.conv(F.hex(F.substring(frame, 2, 4)), 16, 10).cast(LongType()))


def _body(frame: str) -> Column:
    return F.expr(f"substring(`{frame}`, 6)")


@dataclass(frozen=True)
class _Value:
    """One value schema id of the batch: its JSON for ``from_avro`` and its columns' Spark forms."""

    schema: RegisteredSchema
    forms: dict[str, JvmForm]
    types: dict[str, DataType]
    placeholders: Mapping[str, Any]


@dataclass(frozen=True)
class JvmBatch:
    """A batch decoded in the JVM: its summary and its changes (persisted until :meth:`release`)."""

    summary: BatchSummary
    changes: DataFrame
    persisted: DataFrame

    def change_frame(self, columns: StructType, key_fields: Sequence[str]) -> DataFrame:
        """The changes as :func:`cdc_lake.apply.frame.change_frame` gives them, in ``columns``."""
        from cdc_lake.apply.frame import change_struct

        struct = change_struct(columns, key_fields)
        have = set(self.changes.columns)
        values = [
            (col(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in columns.fields
        ]
        meta = {f.name: f.dataType for f in struct.fields[len(columns.fields) :]}
        return self.changes.select(
            *values,
            col(OP_COLUMN).alias(OP_COLUMN),
            F.timestamp_millis(col(_TS_MS)).alias(SOURCE_TS_COLUMN),
            col(ORDERING_COLUMN).alias(ORDERING_COLUMN),
            col(KAFKA_PARTITION_COLUMN).cast(IntegerType()).alias(KAFKA_PARTITION_COLUMN),
            col(KAFKA_OFFSET_COLUMN).cast(LongType()).alias(KAFKA_OFFSET_COLUMN),
            F.array().cast(meta[UNAVAILABLE_COLUMN]).alias(UNAVAILABLE_COLUMN),
            F.lit(None).cast(meta[MOVED_FROM_COLUMN]).alias(MOVED_FROM_COLUMN),
            col(POSITION_COLUMN).alias(POSITION_COLUMN),
        )

    def release(self) -> None:
        """Free the persisted changes."""
        self.persisted.unpersist()


SchemaIds = tuple[frozenset[int], frozenset[int]]
"""Value schema ids and key schema ids."""

RETRY_AFTER: Final = 8
"""Large batches of a table decoded in Python, without trying the JVM, after the JVM left it one."""


class DecodeChoice:
    """Whether one table's next large batch is tried in the JVM.  A batch the JVM leaves to Python is read
    and decoded twice (a message that is not plain shows only once the batch is decoded), and a table
    that sent one (TOAST, re-sends, a column type without a Spark form) likely sends the next: after one,
    its next :data:`RETRY_AFTER` large batches go to the Python decode directly, then the JVM tries again."""

    def __init__(self) -> None:
        self._python = 0
        self.ids: SchemaIds | None = None
        """The value and key schema ids of the table's last batch: the next one is decoded with them in one
        pass over its messages (one with another id is left to Python); None: read them first."""

    def saw(self, summary: BatchSummary) -> None:
        """Remember the schema ids of a batch (decoded either way)."""
        if summary.value_schemas:
            self.ids = (frozenset(summary.value_schemas), frozenset(summary.key_schemas))

    def wanted(self) -> bool:
        """Whether to try the JVM for this large batch (each call counts one batch)."""
        if self._python:
            self._python -= 1
            return False
        return True

    def refused(self) -> None:
        """The JVM left the batch to the Python decode."""
        self._python = RETRY_AFTER


class _NotPlain(Exception):
    """The batch holds something only the Python decode handles."""


def jvm_decode(raw: DataFrame, settings: DecodeSettings, ids: SchemaIds | None = None) -> JvmBatch | None:
    """The batch of ``raw`` (``partition``, ``offset``, ``key``, ``value``, ``headers``: the header names)
    decoded in the JVM, or None when a message of it is not plain (module docstring).  With ``ids``
    (value and key schema ids, :attr:`DecodeChoice.ids`) the messages are read once; a message of
    another id is not plain.  Without, a first pass reads the batch's ids (its messages kept for the
    second)."""
    try:
        return _decode(raw, settings, ids)
    except _NotPlain as exc:
        _LOG.info("%s: the batch is decoded in Python: %s", settings.topic, exc)
    except (Py4JJavaError, PySparkException) as exc:  # from_avro refused a message: Python names it
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _LOG.info("%s: the batch is decoded in Python: the JVM decode failed: %s", settings.topic, first)
    return None


def _decode(raw: DataFrame, settings: DecodeSettings, ids: SchemaIds | None) -> JvmBatch:
    if settings.column_types:
        raise _NotPlain("the table has column_types")
    messages = raw.select(
        "partition",
        "offset",
        "key",
        "value",
        "headers",
        _schema_id(F.col("value")).alias(_VALUE_ID),
        _schema_id(F.col("key")).alias(_KEY_ID),
    )
    kept = ids is None
    if kept:  # read from Kafka once: the ids, then the decode
        messages.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        value_ids, key_ids, keyless = _schema_ids(messages) if ids is None else (*ids, False)
        decoded = _decoded_frame(messages, settings, value_ids, key_ids, keyless)
        decoded.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            summary = _summary(decoded)
        except BaseException:
            decoded.unpersist()
            raise
    finally:
        if kept:
            messages.unpersist()
    return JvmBatch(summary, decoded.filter(col(OP_COLUMN).isNotNull()).drop(_PLAIN), decoded)


def _schema_ids(messages: DataFrame) -> tuple[frozenset[int], frozenset[int], bool]:
    """The batch's value schema ids (of its changes), key schema ids, and whether a change has no key."""
    keyless, tombstone = F.col("key").isNull().alias("keyless"), F.col("value").isNull().alias("tombstone")
    ids = messages.groupBy(_VALUE_ID, _KEY_ID, keyless, tombstone).count().collect()
    unframed = [r for r in ids if r[_VALUE_ID] is None and not r["tombstone"]]
    if unframed or any(r[_KEY_ID] is None and not r["keyless"] for r in ids):
        raise _NotPlain("a value or key is not Confluent-framed")
    changes = [row for row in ids if not row["tombstone"]]
    return (
        frozenset(row[_VALUE_ID] for row in changes),
        frozenset(row[_KEY_ID] for row in ids if row[_KEY_ID] is not None),
        any(row["keyless"] for row in changes),
    )


def _decoded_frame(
    messages: DataFrame,
    settings: DecodeSettings,
    value_ids: frozenset[int],
    key_ids: frozenset[int],
    keyless: bool,
) -> DataFrame:
    """Every message decoded (tombstones: their key checked), and whether each is plain; one pass over
    the messages when the batch has one value schema id."""
    if not value_ids:
        raise _NotPlain("no change in the batch")
    values = {value_id: _value(settings, value_id) for value_id in sorted(value_ids)}
    keys = {key_id: _key(settings, key_id) for key_id in sorted(key_ids)}
    key_fields = _key_fields(settings, keys, keyless)
    _check_key_types(key_fields, values)
    named = [i for i, schema in keys.items() if set(schema.row_converter.column_names) == set(key_fields)]
    value_id = F.col(_VALUE_ID)
    rest = F.col("value").isNull() | value_id.isNull() | ~value_id.isin(*values)
    frames = [  # the first carries the rest
        _decoded(messages, settings, schema_id, value, keys, key_fields, named, None if index else rest)
        for index, (schema_id, value) in enumerate(values.items())
    ]
    decoded = frames[0]
    for frame in frames[1:]:
        decoded = decoded.unionByName(frame, allowMissingColumns=True)
    return _not_resent(decoded, settings)


def _value(settings: DecodeSettings, schema_id: int) -> _Value:
    try:
        schema = settings.registry.get_schema(schema_id)
        converter = schema.row_converter
    except CdcLakeError as exc:
        raise _NotPlain(f"value schema id {schema_id}: {exc}") from exc
    if not schema.is_envelope:
        raise _NotPlain(f"value schema id {schema_id} is not a Debezium envelope")
    source = next(f for f in schema.schema["fields"] if f["name"] == "source")["type"]
    names = {f["name"] for f in source.get("fields", ())} if isinstance(source, dict) else set()
    if not names >= _SOURCE_FIELDS:
        raise _NotPlain(f"value schema id {schema_id} is not a Postgres envelope")
    forms = converter.jvm_forms
    if forms is None:
        raise _NotPlain(f"value schema id {schema_id} has a column only the Python decode converts")
    if any(not isinstance(shape, (str, bytes)) for shape in converter.placeholders.values()):
        raise _NotPlain(f"value schema id {schema_id} has a column with an array placeholder")
    types = {f.name: f.dataType for f in converter.struct_type.fields}
    return _Value(schema, forms, types, converter.placeholders)


def _key(settings: DecodeSettings, schema_id: int) -> RegisteredSchema:
    try:
        schema = settings.registry.get_schema(schema_id)
        forms = schema.row_converter.jvm_forms
    except CdcLakeError as exc:
        raise _NotPlain(f"key schema id {schema_id}: {exc}") from exc
    if forms is None:
        raise _NotPlain(f"key schema id {schema_id} has a column only the Python decode converts")
    return schema


def _key_fields(
    settings: DecodeSettings, keys: Mapping[int, RegisteredSchema], keyless: bool
) -> tuple[str, ...]:
    if settings.key_fields:
        return tuple(settings.key_fields)
    names = {tuple(schema.row_converter.column_names) for schema in keys.values()}
    if keyless or len(names) != 1:
        raise _NotPlain("the message keys do not name one key")
    (key,) = names
    if not key:
        raise _NotPlain("the message key has no column")
    return key


def _check_key_types(key_fields: Sequence[str], values: Mapping[int, _Value]) -> None:
    for value_id, value in values.items():
        for name in key_fields:
            kind = value.types.get(name)
            if kind is None:
                raise _NotPlain(f"value schema id {value_id} lacks key column {name!r}")
            if isinstance(kind, _NUMBERED_KEYS) or (len(key_fields) > 1 and isinstance(kind, StringType)):
                raise _NotPlain(f"key column {name!r} is a {kind.simpleString()}")
    for name in {n for value in values.values() for n in value.types}:
        kinds = {value.types[name].simpleString() for value in values.values() if name in value.types}
        if len(kinds) > 1:
            raise _NotPlain(f"column {name!r} has types {', '.join(sorted(kinds))} in the batch")


def _all(conditions: Sequence[Column]) -> Column:
    result = F.lit(True)
    for condition in conditions:
        result = result & F.coalesce(condition, F.lit(False))
    return result


def _decoded(
    messages: DataFrame,
    settings: DecodeSettings,
    value_id: int,
    value: _Value,
    keys: Mapping[int, RegisteredSchema],
    key_fields: Sequence[str],
    named: Sequence[int],
    rest: Column | None,
) -> DataFrame:
    """The messages of ``value_id`` decoded: row columns, metadata, and whether each is plain; and the
    ``rest`` (tombstones, messages of no known id) if given: plain where a tombstone's key is."""
    envelope = value.schema.spark_json
    mine = F.coalesce(F.col(_VALUE_ID) == value_id, F.lit(False))
    rows = messages.filter(mine if rest is None else mine | rest).select(
        "*", F.when(mine, from_avro(_body("value"), envelope, {"mode": "FAILFAST"})).alias("e")
    )
    e = F.col("e")
    op, source, before, after = e["op"], e["source"], e["before"], e["after"]
    image = F.when(op == "d", before).otherwise(after)
    snapshot = (op == "r") | (source["snapshot"].isNotNull() & (source["snapshot"] != "false"))
    converted = {name: form(image[name]) for name, form in value.forms.items()}
    conditions = [
        op.isin("c", "r", "u", "d"),
        image.isNotNull(),
        source["connector"].isin(*_CONNECTORS),
        source["ts_ms"].isNotNull(),
        to_avro(e, envelope) == _body("value"),
        snapshot | (source["lsn"] > 0),
        ~F.arrays_overlap(F.coalesce(F.col("headers"), F.array().cast(ArrayType(StringType()))),
                          F.array(*[F.lit(h) for h in sorted(KEY_UPDATE_HEADERS)])),
        *[image[name].isNull() | converted[name].isNotNull() for name in value.forms],
        *[image[name].isNotNull() for name in key_fields],
        F.lit(bool(settings.key_fields)) | F.col("key").isNotNull(),
        _key_plain(F.col(_KEY_ID), keys),
        _sequence_plain(source["sequence"], snapshot),
    ]
    may_hold = op.isin("c", "u") & ~snapshot & F.lit(_PLACEHOLDERS)
    for name, shape in value.placeholders.items():
        conditions.append(~(may_hold & after[name].eqNullSafe(F.lit(shape))))
    if settings.key_fields:
        updated = (op == "u") & before.isNotNull()
        old = [before[name] for name in key_fields]
        same = _all([before[name] == after[name] for name in key_fields])
        moved = updated & _all([o.isNotNull() for o in old]) & ~same
        conditions.append(~moved)
        if not settings.old_key_optional:  # the message key names the key, or the old key is logged
            named_key = F.col(_KEY_ID).isin(*named) if named else F.lit(False)
            logged = before.isNotNull() & _all([o.isNotNull() for o in old])
            conditions.append(named_key | (op != "u") | logged)
    if settings.soft_deletes:
        conditions.append(op != "d")
    return rows.select(
        *[converted[name].alias(name) for name in value.forms],
        op.alias(OP_COLUMN),
        source["ts_ms"].alias(_TS_MS),
        F.when(snapshot, F.lit(SNAPSHOT_ORDERING_VALUE))
        .otherwise(F.lpad(source["lsn"].cast(StringType()), _MARK_DIGITS, "0"))
        .alias(ORDERING_COLUMN),
        F.col("partition").alias(KAFKA_PARTITION_COLUMN),
        F.col("offset").alias(KAFKA_OFFSET_COLUMN),
        F.when(~snapshot, _position(source["sequence"])).alias(POSITION_COLUMN),
        F.when(mine, F.lit(value_id)).alias(_VALUE_ID),
        F.col(_KEY_ID),
        F.when(mine, _all(conditions))
        .when(F.col("value").isNull(), _key_plain(F.col(_KEY_ID), keys))
        .otherwise(F.lit(False))
        .alias(_PLAIN),
    )


def _key_plain(key_id: Column, keys: Mapping[int, RegisteredSchema]) -> Column:
    """No key, or a key of a known id that decodes with its schema and encodes back to its bytes, its
    values in range."""
    result: Column = F.col("key").isNull()
    for schema_id, schema in keys.items():
        decoded = from_avro(_body("key"), schema.spark_json, {"mode": "FAILFAST"})
        forms = schema.row_converter.jvm_forms or {}
        checks = [to_avro(decoded, schema.spark_json) == _body("key")]
        checks += [decoded[name].isNull() | form(decoded[name]).isNotNull() for name, form in forms.items()]
        result = F.when(key_id == schema_id, _all(checks)).otherwise(result)
    return result


def _sequence_plain(sequence: Column, snapshot: Column) -> Column:
    """A streamed change's sequence: absent, Debezium's two LSNs, or ``[null,"<lsn>"]`` (no commit yet)."""
    shaped = sequence.rlike(_SEQUENCE) | sequence.rlike(_FIRST_SEQUENCE)
    return snapshot | sequence.isNull() | (sequence == "") | shaped


def _position(sequence: Column) -> Column:
    """The Postgres codec's stream position of ``source.sequence`` (``pg:<40 digits>``), or null."""
    first = F.regexp_extract(sequence, _SEQUENCE, 1)
    second = F.regexp_extract(sequence, _SEQUENCE, 2)
    digits = F.concat(F.lpad(first, 20, "0"), F.lpad(second, 20, "0"))
    return F.when(sequence.rlike(_SEQUENCE), F.concat(F.lit(f"{POSTGRES.mark_kind}:"), digits))


def _not_resent(decoded: DataFrame, settings: DecodeSettings) -> DataFrame:
    """Plain only where a change's position is not strictly below its partition's mark or an earlier one."""
    marks: dict[int, str] = {}
    for partition, mark in settings.applied_positions.items():
        body = mark.removeprefix(f"{POSTGRES.mark_kind}:")
        if mark == body or len(body) != _MARK_DIGITS or not body.isdigit():
            raise _NotPlain(f"partition {partition}'s applied mark is not a Postgres mark")
        marks[partition] = mark
    position = col(POSITION_COLUMN)
    earlier = F.max(position).over(
        Window.partitionBy(col(KAFKA_PARTITION_COLUMN))
        .orderBy(col(KAFKA_OFFSET_COLUMN))
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    stored: Column = F.lit(None).cast(StringType())
    for partition, mark in sorted(marks.items()):
        stored = F.when(col(KAFKA_PARTITION_COLUMN) == partition, F.lit(mark)).otherwise(stored)
    resent = (position < earlier) | (position < stored)
    return decoded.withColumn(_PLAIN, col(_PLAIN) & ~F.coalesce(resent, F.lit(False)))


def _summary(decoded: DataFrame) -> BatchSummary:
    """The batch's :class:`BatchSummary`, as the Python decode gives it, from one aggregate."""
    rows = (
        decoded.groupBy(col(KAFKA_PARTITION_COLUMN), col(_VALUE_ID), col(_KEY_ID), col(OP_COLUMN))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min(col(KAFKA_OFFSET_COLUMN)).alias("first"),
            F.max(col(_TS_MS)).alias("newest"),
            F.max(col(POSITION_COLUMN)).alias("position"),
            F.sum(F.when(~col(_PLAIN), 1).otherwise(0)).alias("refused"),
        )
        .collect()
    )
    refused = sum(row["refused"] for row in rows)
    if refused:
        raise _NotPlain(f"{refused} message(s) only the Python decode handles")
    summary = BatchSummary()
    for row in rows:
        if row[OP_COLUMN] is None:  # tombstones
            continue
        partition, first = row[KAFKA_PARTITION_COLUMN], row["first"]
        summary.changes += row["n"]
        summary.ops[row[OP_COLUMN]] = summary.ops.get(row[OP_COLUMN], 0) + row["n"]
        ids = ((summary.value_schemas, row[_VALUE_ID]), (summary.key_schemas, row[_KEY_ID]))
        for schemas, schema_id in ids:
            if schema_id is None:
                continue
            firsts = schemas.setdefault(schema_id, {})
            firsts[partition] = min(first, firsts.get(partition, first))
        if row["position"] is not None:
            summary.marks.setdefault(partition, PartitionMarks()).add(row["position"])
        if summary.newest_source_ts_ms is None or row["newest"] > summary.newest_source_ts_ms:
            summary.newest_source_ts_ms = row["newest"]
    return summary
