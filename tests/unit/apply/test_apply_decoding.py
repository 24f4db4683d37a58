"""Executor-side decoding: change records, bad messages named exactly, summaries, re-sent events."""

from __future__ import annotations

from typing import Any

import pytest
from support import debezium as dbz
from support.fake_registry import InMemorySchemas
from support.recorded import load_recording, recorded_files
from support.wire import framed

from cdc_lake.apply.decoding import (
    TRUNCATE_REASON,
    BadMessage,
    BatchSummary,
    DecodedChange,
    DecodeSettings,
    Redelivered,
    decode_messages,
    summarize,
)
from cdc_lake.decode.types import UNAVAILABLE_PLACEHOLDER
from cdc_lake.kafka.reader import RawMessage

TOPIC = dbz.PG_TOPIC
KEY_ID, VALUE_ID = 1, 2
SCHEMAS = InMemorySchemas({KEY_ID: dbz.pg_key(), VALUE_ID: dbz.pg_envelope()})


def _settings(**overrides: Any) -> DecodeSettings:
    return DecodeSettings(
        **{"topic": TOPIC, "registry": SCHEMAS, "key_fields": None, "soft_deletes": False, **overrides}
    )


def _message(
    offset: int,
    op: str,
    row: dict[str, Any] | None,
    lsn: int = 1000,
    partition: int = 0,
    key: int | None = 1,
    snapshot: str = "false",
) -> RawMessage:
    before = row if op == "d" else None
    after = None if op == "d" else row
    value = dbz.value(op, before, after, dbz.pg_source(lsn, snapshot=snapshot))
    key_bytes = None if key is None else framed(KEY_ID, dbz.pg_key(), {"id": key})
    return RawMessage(partition, offset, key_bytes, framed(VALUE_ID, dbz.pg_envelope(), value))


def _row(**values: Any) -> dict[str, Any]:
    return dbz.empty_row(dbz.PG_COLUMNS, **values)


def test_changes_carry_their_row_ordering_and_unavailable_columns() -> None:
    messages = [
        _message(0, "c", _row(id=1, note="full")),
        _message(1, "u", _row(id=1, note=UNAVAILABLE_PLACEHOLDER, qty=3), lsn=2000),
        RawMessage(0, 2, framed(KEY_ID, dbz.pg_key(), {"id": 1}), None),
        _message(3, "d", _row(id=1), lsn=3000),
    ]

    records = list(decode_messages(_settings(), messages))

    assert [type(r) for r in records] == [DecodedChange] * 3
    insert, update, delete = records
    assert isinstance(update, DecodedChange) and isinstance(insert, DecodedChange)
    assert (insert.op, insert.row["note"], insert.unavailable) == ("c", "full", ())
    assert (update.op, update.row["note"], update.unavailable, update.row["qty"]) == ("u", None, ("note",), 3)
    assert update.ordering > insert.ordering
    assert (update.value_schema_id, update.key_schema_id) == (VALUE_ID, KEY_ID)
    assert isinstance(delete, DecodedChange) and delete.op == "d" and delete.unavailable == ()


def test_soft_deletes_mark_what_the_before_image_lacks_as_unavailable() -> None:
    (delete,) = decode_messages(_settings(soft_deletes=True), [_message(0, "d", _row(id=1, note="kept"))])

    assert isinstance(delete, DecodedChange)
    assert "note" not in delete.unavailable
    assert {"qty", "amount", "created_at"} <= set(delete.unavailable)
    assert "id" not in delete.unavailable


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (RawMessage(0, 5, None, b"\x01garbage"), "not the Confluent magic byte"),
        (RawMessage(0, 5, None, b"\x00\x00\x00\x00\x63\x00"), "schema id 99 is not registered"),
        (_message(5, "c", _row(id=1), key=None), "message has no key"),
        (_message(5, "d", None), "'d' event has no row image"),
        (_message(5, "c", _row(id=1, amount=b"\x7f" * 20)), "field 'amount'"),
    ],
)
def test_bad_messages_are_records_naming_their_offset_and_reason(message: RawMessage, reason: str) -> None:
    (record,) = decode_messages(_settings(), [message])

    assert isinstance(record, BadMessage)
    assert (record.partition, record.offset) == (0, 5)
    assert reason in record.reason
    assert not record.reason.startswith("topic"), "the location is added once, by the caller"


def test_a_truncate_is_a_bad_message_by_policy() -> None:
    value = dbz.value("t", None, None, dbz.pg_source(5000))
    (record,) = decode_messages(
        _settings(), [RawMessage(0, 7, None, framed(VALUE_ID, dbz.pg_envelope(), value))]
    )

    assert isinstance(record, BadMessage) and record.reason == TRUNCATE_REASON


def test_configured_key_fields_replace_the_message_key() -> None:
    (record,) = decode_messages(_settings(key_fields=("note",)), [_message(0, "c", _row(id=1, note=None))])

    assert isinstance(record, BadMessage) and "key column 'note'" in record.reason


def test_events_below_the_applied_stream_position_are_skipped_as_re_sent() -> None:
    first = _message(0, "u", _row(id=1, qty=1), lsn=1000)
    decoded = list(decode_messages(_settings(), [first]))
    assert isinstance(decoded[0], DecodedChange) and decoded[0].position is not None
    applied = {0: decoded[0].position}
    messages = [
        _message(9, "u", _row(id=1, qty=0), lsn=992),
        _message(10, "c", _row(id=3, qty=1), lsn=1000),
        _message(11, "u", _row(id=1, qty=2), lsn=1008),
        _message(12, "c", _row(id=2), lsn=900, snapshot="true"),
    ]

    records = list(decode_messages(_settings(applied_positions=applied), messages))

    assert records[0] == Redelivered(0, 9)
    assert isinstance(records[1], DecodedChange), "an event at the mark may share its position: applied"
    assert isinstance(records[2], DecodedChange) and isinstance(records[3], DecodedChange)
    assert records[3].position is None, "snapshot reads have no stream position and are never skipped"


def test_the_summary_merges_slices() -> None:
    slice_one = list(
        decode_messages(_settings(), [_message(0, "c", _row(id=1)), RawMessage(0, 1, None, b"x")])
    )
    slice_two = list(
        decode_messages(
            _settings(),
            [
                _message(5, "u", _row(id=1, note=UNAVAILABLE_PLACEHOLDER), lsn=7000),
                RawMessage(0, 6, None, b"y"),
            ],
        )
    )

    summary = BatchSummary()
    for part in (slice_two, slice_one):
        summary.merge(next(summarize(part)))

    assert summary.changes == 2 and summary.ops == {"c": 1, "u": 1}
    assert summary.value_schemas == {VALUE_ID: {0: 0}}
    assert summary.first_bad[0].offset == 1
    assert summary.unavailable == {"note"}
    assert summary.newest_source_ts_ms == 1_700_000_000_000
    update = slice_two[0]
    assert isinstance(update, DecodedChange)
    assert summary.marks[0].high_mark() == update.position


@pytest.mark.parametrize("path", recorded_files(), ids=lambda p: p.stem)
def test_recorded_debezium_messages_decode_into_records(path: Any) -> None:
    recording = load_recording(path)
    registry = InMemorySchemas(dict(recording.schemas))
    messages = [RawMessage(m.partition, m.offset, m.key, m.value) for m in recording.messages]
    settings = DecodeSettings(recording.messages[0].topic, registry, None, False)

    records = list(decode_messages(settings, messages))

    expected = [m for m in recording.messages if not m.expect.get("tombstone")]
    assert [r.offset for r in records] == [m.offset for m in expected]
    for record, message in zip(records, expected, strict=True):
        if "error" in message.expect:
            assert isinstance(record, BadMessage) and message.expect["error"] in record.reason
        else:
            assert isinstance(record, DecodedChange) and record.op == message.expect["op"]
