"""Scenario: a Postgres table whose configured ``key`` is not its primary key (recorded-style messages).

Debezium keys the messages by the primary key ``id``; the table's configured key is ``qty``.  With
REPLICA IDENTITY FULL an update that changes ``qty`` carries the old ``qty`` in its before image and
must delete the row under the old key as well as upsert it under the new one.  With DEFAULT, the
before image of a delete carries only ``id``: a bad message naming the table, the key and the fix.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from support import debezium as dbz
from support.fake_registry import InMemorySchemas
from support.wire import framed

from cdc_lake.apply.decoding import BadMessage, BatchSummary, DecodedChange, DecodeSettings, decode_messages
from cdc_lake.decode.types import UNAVAILABLE_PLACEHOLDER
from cdc_lake.kafka.reader import RawMessage

KEY_ID, VALUE_ID = 1, 2
SCHEMAS = InMemorySchemas({KEY_ID: dbz.pg_key(), VALUE_ID: dbz.pg_envelope()})
SETTINGS = DecodeSettings(topic=dbz.PG_TOPIC, registry=SCHEMAS, key_fields=("qty",), soft_deletes=False)


def _row(**values: Any) -> dict[str, Any]:
    return dbz.empty_row(dbz.PG_COLUMNS, **values)


def _message(
    offset: int, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int
) -> RawMessage:
    value = dbz.value(op, before, after, dbz.pg_source(lsn))
    key = framed(KEY_ID, dbz.pg_key(), {"id": 1})
    return RawMessage(0, offset, key, framed(VALUE_ID, dbz.pg_envelope(), value))


def test_key_not_primary_key_update_changing_the_key_deletes_the_old_key() -> None:
    before, after = _row(id=1, qty=5, note="a"), _row(id=1, qty=6, note="b")

    records = list(decode_messages(SETTINGS, [_message(7, "u", before, after, lsn=2000)]))

    assert [type(r) for r in records] == [DecodedChange, DecodedChange]
    delete, upsert = records
    assert isinstance(delete, DecodedChange) and isinstance(upsert, DecodedChange)
    assert (delete.op, delete.row["qty"], delete.row["note"]) == ("d", 5, "a")
    assert (upsert.op, upsert.row["qty"], upsert.row["note"]) == ("u", 6, "b")
    # Same message, same source position: ordered against the old key's other changes by position.
    assert (delete.partition, delete.offset, delete.ordering) == (
        upsert.partition,
        upsert.offset,
        upsert.ordering,
    )


def test_key_not_primary_key_update_keeping_the_key_or_under_an_index_identity_is_one_upsert() -> None:
    """REPLICA IDENTITY USING INDEX over ``qty``: pgoutput logs the old key only when it changes, so an
    update without a before image kept it (the source says so before the batch: ``old_key_optional``)."""
    kept = _message(1, "u", _row(id=1, qty=5, note="a"), _row(id=1, qty=5, note="b"), lsn=2000)
    unseen = _message(2, "u", None, _row(id=1, qty=6), lsn=3000)
    settings = dataclasses.replace(SETTINGS, old_key_optional=True)

    records = list(decode_messages(settings, [kept, unseen]))

    assert [(r.op, r.row["qty"]) for r in records if isinstance(r, DecodedChange)] == [("u", 5), ("u", 6)]
    assert len(records) == 2


def test_key_not_primary_key_without_the_key_in_the_message_key_adds_nothing() -> None:
    settings = DecodeSettings(topic=dbz.PG_TOPIC, registry=SCHEMAS, key_fields=None, soft_deletes=False)
    update = _message(1, "u", _row(id=1, qty=5), _row(id=1, qty=6), lsn=2000)

    assert [r.op for r in decode_messages(settings, [update]) if isinstance(r, DecodedChange)] == ["u"]


def test_key_not_primary_key_delete_without_the_key_is_a_bad_message_naming_table_key_and_fix() -> None:
    # REPLICA IDENTITY DEFAULT: the before image carries the primary key only.
    (record,) = decode_messages(SETTINGS, [_message(4, "d", _row(id=1), None, lsn=2000)])

    assert isinstance(record, BadMessage)
    assert record.offset == 4
    assert record.reason == (
        "table public.orders: delete's before image lacks key column 'qty' (key qty): the source does not "
        "log the old key; on Postgres run ALTER TABLE … REPLICA IDENTITY FULL, then re-bootstrap the table "
        "(cdc-lake rebootstrap)"
    )
    assert "\n" not in record.reason


def test_key_not_primary_key_update_with_a_toast_placeholder_names_its_old_key() -> None:
    """USING INDEX on ``qty``: the old tuple holds the key only, so an unchanged TOASTed ``note`` is the
    placeholder; the upsert names its old key, from whose state ``frame.fill_moved`` fills it (issue 20
    finding 5), and the batch summary counts it so that step runs."""
    before = _row(id=1, qty=5)
    after = _row(id=1, qty=6, note=UNAVAILABLE_PLACEHOLDER)
    records = list(decode_messages(SETTINGS, [_message(7, "u", before, after, lsn=2000)]))
    delete, upsert = records
    assert isinstance(delete, DecodedChange) and isinstance(upsert, DecodedChange)
    assert (delete.moved_from, upsert.moved_from, upsert.unavailable) == (None, (5,), ("note",))
    summary = BatchSummary()
    for record in records:
        summary.add(record)
    assert summary.moves_unavailable == 1


@pytest.mark.parametrize("before", [None, _row(id=1)], ids=["no before image", "primary key only"])
def test_an_update_without_the_old_key_is_a_bad_message_naming_the_identity_fix(
    before: dict[str, Any] | None,
) -> None:
    """Issue 34 review 6: REPLICA IDENTITY DEFAULT set after onboarding sends updates without the old
    ``qty``; upserting the new one left the row under its old key (two lake rows).  The table stops at
    the update, naming REPLICA IDENTITY FULL and the re-bootstrap, whatever the identity is by the time
    the batch runs (set to DEFAULT and back to FULL in between: the update still lacks it)."""
    kept = _message(1, "u", _row(id=1, qty=5, note="a"), _row(id=1, qty=5, note="b"), lsn=2000)
    moved = _message(2, "u", before, _row(id=1, qty=6), lsn=3000)

    records = list(decode_messages(SETTINGS, [kept, moved]))

    assert [type(r) for r in records] == [DecodedChange, BadMessage]
    bad = records[1]
    assert isinstance(bad, BadMessage) and bad.offset == 2
    assert bad.reason == (
        "table public.orders: update without the old value of key column(s) qty (key qty): the source no "
        "longer logs the old key, so a changed key would leave its old row in the lake; on Postgres run "
        "ALTER TABLE public.orders REPLICA IDENTITY FULL (MySQL/MariaDB: binlog_row_image=FULL), then "
        "re-bootstrap the table (cdc-lake rebootstrap)"
    )


def test_an_update_of_a_table_keyed_by_its_message_key_needs_no_before_image() -> None:
    """Keyed by the primary key (configured or not), a key change arrives as delete + create."""
    update = _message(1, "u", None, _row(id=1, qty=6), lsn=2000)
    by_id = dataclasses.replace(SETTINGS, key_fields=("id",))

    assert [r.op for r in decode_messages(by_id, [update]) if isinstance(r, DecodedChange)] == ["u"]
