"""The JVM decode against the Python decode, the reference (:mod:`cdc_lake.apply.jvm_decode`).

Invariant: whenever the JVM decodes a batch, its summary and change rows equal the Python decode's of the
same messages (every column, every metadata field); and it decodes every batch of plain messages.
Generated batches (Hypothesis) mix every column kind with a Spark form (a decimal among them), values
at the ends of their ranges, snapshot reads, updates, deletes, tombstones, two schema ids and Kafka
partitions, and add at most one thing only the Python decode handles: a TOAST placeholder, a re-send
below an earlier position or the partition's mark, a key update or move, a malformed body or frame, a
left-over byte, a value out of range, a MySQL event, a soft delete, a truncate, a tombstone whose key does
not decode, an update without the old key.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from functools import reduce
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from support import debezium as dbz
from support.fake_registry import InMemorySchemas
from support.wire import framed, message_frame, unscaled

from cdc_lake.apply.decoding import BatchSummary, DecodeSettings, decode_messages, summarize
from cdc_lake.apply.frame import change_frame
from cdc_lake.apply.jvm_decode import JvmBatch, jvm_decode
from cdc_lake.decode.types import UNAVAILABLE_PLACEHOLDER
from cdc_lake.kafka.reader import RawMessage

TOPIC = "pg.public.kinds"
COLUMNS: list[dict[str, Any]] = [
    dbz.required("id", "int"),
    dbz.optional("qty", dbz.INT16),
    dbz.optional("tiny", {"type": "int", "connect.type": "int8"}),
    dbz.optional("note", "string"),
    dbz.optional("payload", dbz.semantic("string", "io.debezium.data.Json")),
    dbz.optional("uid", dbz.semantic("string", "io.debezium.data.Uuid")),
    dbz.optional("created_on", dbz.semantic("int", "io.debezium.time.Date")),
    dbz.optional("at_time", dbz.semantic("long", "io.debezium.time.MicroTime")),
    dbz.optional("at_ms", dbz.semantic("int", "io.debezium.time.Time")),
    dbz.optional("created_at", dbz.semantic("long", "io.debezium.time.MicroTimestamp")),
    dbz.optional("created_ms", dbz.semantic("long", "io.debezium.time.Timestamp")),
    dbz.optional("span", dbz.semantic("long", "io.debezium.time.MicroDuration")),
    dbz.optional("blob", "bytes"),
    dbz.optional("flag", "boolean"),
    dbz.optional("weight", "double"),
    dbz.optional("ratio_f", "float"),
    dbz.optional("big", "long"),
    dbz.optional("amount", dbz.decimal(12, 2)),
]
WIDER = [*COLUMNS, dbz.optional("added", "string")]
KEY = dbz.key_schema(TOPIC, [dbz.required("id", "int")])
VALUE_IDS = {
    11: dbz.envelope(TOPIC, COLUMNS, dbz.POSTGRES_SOURCE),
    12: dbz.envelope(TOPIC, WIDER, dbz.POSTGRES_SOURCE),
}
KEY_ID = 21
MYSQL_ID = 13
SCHEMAS: dict[int, Any] = {
    **VALUE_IDS,
    KEY_ID: KEY,
    MYSQL_ID: dbz.envelope(TOPIC, COLUMNS, dbz.MYSQL_SOURCE),
}
REGISTRY = InMemorySchemas(SCHEMAS)

DAYS = (-719_162, 2_932_896)
MICROS = (-62_135_596_800_000_000, 253_402_300_799_999_999)
ANOMALIES = (
    "placeholder", "resent", "below_mark", "key_header", "moved_key", "bad_body", "bad_frame",
    "trailing_byte", "date_out_of_range", "timestamp_out_of_range", "decimal_overflow", "mysql",
    "soft_delete", "truncate", "bad_tombstone_key", "keyless_update",
)


def _edges(bounds: tuple[int, int]) -> st.SearchStrategy[int]:
    low, high = bounds
    return st.one_of(st.integers(low, high), st.sampled_from([low, high, 0, -1]))


def _cents(unscaled_value: int) -> bytes:
    return unscaled(Decimal(unscaled_value).scaleb(-2), 2)


def _row(draw: Any, key: int, wider: bool) -> dict[str, Any]:
    row = {
        "id": key,
        "qty": draw(st.none() | st.integers(-(2**15), 2**15 - 1)),
        "tiny": draw(st.none() | st.integers(-128, 127)),
        "note": draw(st.none() | st.text(max_size=6)),
        "payload": draw(st.none() | st.sampled_from(['{"a": 1}', "[]", '""'])),
        "uid": draw(st.none() | st.uuids().map(str)),
        "created_on": draw(st.none() | _edges(DAYS)),
        "at_time": draw(st.none() | st.integers(0, 86_400_000_000)),
        "at_ms": draw(st.none() | st.integers(0, 86_400_000)),
        "created_at": draw(st.none() | _edges(MICROS)),
        "created_ms": draw(st.none() | _edges((MICROS[0] // 1000 + 1, MICROS[1] // 1000))),
        "span": draw(st.none() | st.integers(-(2**62), 2**62)),
        "blob": draw(st.none() | st.binary(max_size=5)),
        "flag": draw(st.none() | st.booleans()),
        "weight": draw(st.none() | st.floats(allow_nan=False, width=64)),
        "ratio_f": draw(st.none() | st.floats(allow_nan=False, width=32)),
        "big": draw(st.none() | st.integers(-(2**63), 2**63 - 1)),
        "amount": draw(st.none() | _edges((-(10**12) + 1, 10**12 - 1)).map(_cents)),
    }
    if wider:
        row["added"] = draw(st.none() | st.text(max_size=3))
    return row


@st.composite
def batches(draw: Any) -> tuple[list[RawMessage], dict[int, str], bool, str | None]:
    """Messages of two partitions, the applied marks, soft deletes, and the anomaly added (or None)."""
    anomaly = draw(st.none() | st.sampled_from(ANOMALIES))
    messages: list[RawMessage] = []
    lsn = {0: 1_000, 1: 5_000}
    for partition in (0, 1):
        for offset in range(draw(st.integers(1, 7))):
            key = draw(st.integers(1, 4))
            value_id = draw(st.sampled_from(sorted(VALUE_IDS)))
            op = draw(st.sampled_from(["c", "u", "d", "r", "u"]))
            snapshot = "true" if op == "r" else draw(st.sampled_from(["false", "false", "incremental"]))
            lsn[partition] += draw(st.integers(0, 3))
            row = _row(draw, key, value_id == 12)
            before = row if op == "d" else (dict(row) if op == "u" and draw(st.booleans()) else None)
            after = None if op == "d" else row
            source = dbz.pg_source(lsn[partition], snapshot=snapshot, ts_ms=1_700_000_000_000 + offset)
            record = dbz.value(op, before, after, source)
            framed_key = framed(KEY_ID, KEY, {"id": key})
            body = framed(value_id, SCHEMAS[value_id], record)
            messages.append(RawMessage(partition, offset * 2, framed_key, body, ()))
            if op == "d":
                messages.append(RawMessage(partition, offset * 2 + 1, framed_key, None, ()))
    marks: dict[int, str] = {}
    if draw(st.booleans()):
        marks[0] = f"pg:{500:020d}{501:020d}"
    soft = anomaly == "soft_delete"
    if anomaly is not None:
        messages.append(_anomaly(draw, anomaly, messages, marks))
    return messages, marks, soft, anomaly


def _anomaly(draw: Any, anomaly: str, messages: list[RawMessage], marks: dict[int, str]) -> RawMessage:
    """One more message of partition 1 (after the others) carrying ``anomaly``."""
    offset = max(m.offset for m in messages) + 10
    key = framed(KEY_ID, KEY, {"id": 1})
    row = _row(draw, 1, False)
    lsn, op, value_id = 9_000, "u", 11
    headers: tuple[str, ...] = ()
    before: dict[str, Any] | None = None
    if anomaly == "placeholder":
        row["note"] = UNAVAILABLE_PLACEHOLDER
    elif anomaly == "resent":
        lsn = 1_500
    elif anomaly == "below_mark":
        marks[1] = f"pg:{9_000:020d}{9_001:020d}"
    elif anomaly == "key_header":
        op, headers = "c", ("__debezium.oldkey",)
    elif anomaly == "moved_key":
        before = {**row, "id": 2}
    elif anomaly == "date_out_of_range":
        row["created_on"] = DAYS[1] + 1
    elif anomaly == "timestamp_out_of_range":
        row["created_at"] = MICROS[0] - 1
    elif anomaly == "decimal_overflow":
        row["amount"] = _cents(10**12)
    elif anomaly == "mysql":
        record = dbz.value("u", None, row, dbz.mysql_source())
        return RawMessage(1, offset, key, framed(MYSQL_ID, SCHEMAS[MYSQL_ID], record), ())
    elif anomaly == "soft_delete":
        op, before = "d", {"id": 1, **dict.fromkeys([c["name"] for c in COLUMNS[1:]])}
    elif anomaly == "truncate":
        op = "t"
    elif anomaly == "bad_tombstone_key":
        return RawMessage(1, offset, key[:-1], None, ())
    elif anomaly == "keyless_update":
        record = dbz.value("u", None, row, dbz.pg_source(lsn))
        return RawMessage(1, offset, None, framed(value_id, SCHEMAS[value_id], record), ())
    record = dbz.value(op, before, None if op in ("d", "t") else row, dbz.pg_source(lsn))
    value = framed(value_id, SCHEMAS[value_id], record)
    if anomaly == "bad_body":
        value = value[:-3]
    elif anomaly == "bad_frame":
        value = b"\x01" + value[1:]
    elif anomaly == "trailing_byte":
        value = value + b"\x00"
    return RawMessage(1, offset, key, value, headers)


def _python(settings: DecodeSettings, messages: Sequence[RawMessage]) -> tuple[BatchSummary, list[Any]]:
    slices = [[m for m in messages if m.partition == p] for p in (0, 1)]
    decoded = [d for messages_of in slices for d in decode_messages(settings, messages_of)]
    return reduce(BatchSummary.merge, summarize(decoded), BatchSummary()), decoded


def _marks(summary: BatchSummary) -> dict[int, dict[str, int]]:
    return {p: dict(m.highest) for p, m in summary.marks.items()}


def _same_summary(jvm: BatchSummary, python: BatchSummary) -> None:
    assert python.first_bad == {} and python.redelivered == 0 and not python.key_updates
    assert (jvm.changes, jvm.ops, jvm.value_schemas, jvm.key_schemas) == (
        python.changes, python.ops, python.value_schemas, python.key_schemas,
    )
    assert (jvm.newest_source_ts_ms, jvm.unavailable, jvm.moves_unavailable) == (
        python.newest_source_ts_ms, python.unavailable, python.moves_unavailable,
    )
    assert _marks(jvm) == _marks(python)


def _check(
    spark: SparkSession,
    messages: list[RawMessage],
    marks: dict[int, str],
    soft: bool,
    key_fields: tuple[str, ...] | None = None,
) -> bool:
    """Both decodes of ``messages``; True when the JVM decoded them (and then agreed with Python)."""
    settings = DecodeSettings(TOPIC, REGISTRY, key_fields, soft, marks)
    summary, decoded = _python(settings, messages)
    ids = (frozenset(summary.value_schemas), frozenset(summary.key_schemas))
    if len(ids[0]) > 1:  # a message of an id the table's last batch did not have goes to Python
        assert jvm_decode(message_frame(spark, messages), settings, (ids[0] - {min(ids[0])}, ids[1])) is None
    read_first = _same(spark, summary, decoded, jvm_decode(message_frame(spark, messages), settings))
    read_once = _same(spark, summary, decoded, jvm_decode(message_frame(spark, messages), settings, ids))
    assert read_first == read_once or not summary.value_schemas, "the ids known or read, one verdict"
    return read_first


def _same(spark: SparkSession, summary: BatchSummary, decoded: list[Any], batch: JvmBatch | None) -> bool:
    """Whether the JVM decoded the batch (and then agreed with Python)."""
    if batch is None:
        return False
    try:
        _same_summary(batch.summary, summary)
        columns = REGISTRY.get_schema(12).struct_type
        parallel = spark.sparkContext.parallelize(decoded)
        python_rows = change_frame(spark, parallel, columns, {}, ["id"]).collect()
        jvm_rows = batch.change_frame(columns, ["id"]).collect()
        order = ("_cdc_kafka_partition", "_cdc_kafka_offset")
        assert sorted((r.asDict() for r in jvm_rows), key=lambda r: [r[k] for k in order]) == sorted(
            (r.asDict() for r in python_rows), key=lambda r: [r[k] for k in order]
        )
        assert len(jvm_rows) == summary.changes
    finally:
        batch.release()
    return True


@pytest.mark.timeout(900)
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(batches(), st.sampled_from([None, ("id",)]))
def test_the_jvm_decode_equals_the_python_decode_and_takes_every_plain_batch(
    spark: SparkSession,
    batch: tuple[list[RawMessage], dict[int, str], bool, str | None],
    key_fields: tuple[str, ...] | None,
) -> None:
    messages, marks, soft, anomaly = batch
    decoded = _check(spark, messages, marks, soft, key_fields)
    if anomaly is None:
        assert decoded, "a batch of plain messages was left to the Python decode"


@pytest.mark.parametrize("anomaly", ANOMALIES)
def test_every_message_only_python_handles_sends_the_batch_to_python(
    spark: SparkSession, anomaly: str
) -> None:
    key = framed(KEY_ID, KEY, {"id": 3})
    row = {name: None for name in (c["name"] for c in COLUMNS)} | {"id": 3}
    created = dbz.value("c", None, row, dbz.pg_source(2_000))
    plain = RawMessage(1, 0, key, framed(11, SCHEMAS[11], created), ())
    marks: dict[int, str] = {}

    class Fixed:
        """Hypothesis' ``draw`` for :func:`_row`: every optional column null."""

        def __call__(self, strategy: Any) -> Any:
            return None

    extra = _anomaly(Fixed(), anomaly, [plain], marks)
    assert not _check(spark, [plain, extra], marks, anomaly == "soft_delete", ("id",)), anomaly
    assert _check(spark, [plain], {}, False, ("id",))


def test_a_batch_decoded_in_the_jvm_keeps_the_mark_order_of_a_page(spark: SparkSession) -> None:
    """Changes at one stream position (a multi-row insert's page) are not re-sends."""
    key = framed(KEY_ID, KEY, {"id": 1})
    created = [dbz.value("c", None, {"id": n + 1}, dbz.pg_source(7_000)) for n in range(3)]
    messages = [RawMessage(0, n, key, framed(11, SCHEMAS[11], value), ()) for n, value in enumerate(created)]
    assert _check(spark, messages, {0: f"pg:{6_992:020d}{7_000:020d}"}, False)
