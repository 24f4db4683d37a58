"""Scenario 1, MariaDB failover: the connector is repointed at a promoted replica whose binlog numbers
are lower than the old primary's.

Built from the recorded MariaDB update (tests/unit/data/recorded/mariadb.jsonl, its real schemas and
bytes), with only the ``source`` block changed the way a failover changes it: after the repoint the new
server's binlog file is ``mysql-bin.000002`` where the old primary had reached ``mysql-bin.000007``;
transactions the old primary committed but Debezium had not read yet arrive from the new server with
their original GTIDs (``0-1-N``, originating server 1), and the new primary's own ones as ``0-2-N``.
"""

from __future__ import annotations

import io
import json
from typing import Any

from fastavro import parse_schema, schemaless_reader
from support.fake_registry import InMemorySchemas
from support.recorded import RECORDED_DIR, load_recording
from support.wire import framed

from cdc_lake.apply.decoding import (
    BatchSummary,
    DecodedChange,
    DecodeSettings,
    Redelivered,
    decode_messages,
    summarize,
)
from cdc_lake.apply.redelivery import advance
from cdc_lake.decode.types import stash_logical_types
from cdc_lake.kafka.reader import RawMessage

RECORDING = load_recording(RECORDED_DIR / "mariadb.jsonl")
UPDATE = next(m for m in RECORDING.messages if m.expect.get("op") == "u")
SCHEMAS = InMemorySchemas(dict(RECORDING.schemas))
VALUE_ID = int.from_bytes(UPDATE.value[1:5], "big") if UPDATE.value else 0
VALUE_SCHEMA: dict[str, Any] = json.loads(RECORDING.schemas[VALUE_ID])
RAW_UPDATE: dict[str, Any] = schemaless_reader(
    io.BytesIO((UPDATE.value or b"")[5:]), parse_schema(stash_logical_types(VALUE_SCHEMA)), None
)


def _message(offset: int, gtid: str, file_number: int, pos: int) -> RawMessage:
    """The recorded update as read from a server at ``mysql-bin.<file_number>:<pos>`` with ``gtid``."""
    server_id = int(gtid.split("-")[1])
    source = {**RAW_UPDATE["source"], "gtid": gtid, "server_id": server_id}
    source.update(file=f"mysql-bin.{file_number:06d}", pos=pos, row=0)
    return RawMessage(0, offset, UPDATE.key, framed(VALUE_ID, VALUE_SCHEMA, {**RAW_UPDATE, "source": source}))


def _settings(applied: dict[int, str] | None = None) -> DecodeSettings:
    return DecodeSettings(UPDATE.topic, SCHEMAS, None, False, applied or {})


def _decode(messages: list[RawMessage], applied: dict[int, str] | None = None) -> list[Any]:
    return list(decode_messages(_settings(applied), messages))


def _applied_marks(records: list[Any], stored: dict[int, str] | None = None) -> dict[int, str]:
    """The marks a commit of ``records`` stores, after ``stored``."""
    summary = BatchSummary()
    summary.merge(next(summarize(records)))
    return advance(stored or {}, summary.marks)


def test_failover_changes_of_the_new_primary_win_over_stored_rows() -> None:
    old, new = _decode([_message(10, "0-1-100", 7, 9000), _message(11, "0-2-101", 2, 400)])

    assert isinstance(old, DecodedChange) and isinstance(new, DecodedChange)
    assert new.ordering > old.ordering, "the new primary's change loses to the stored row: lost update"


def test_failover_unread_changes_of_the_old_primary_are_applied_not_skipped() -> None:
    before = _decode([_message(o, f"0-1-{98 + o}", 7, 9000 + 100 * o) for o in range(3)])
    applied = _applied_marks(before)

    after = _decode(
        [
            _message(3, "0-1-99", 2, 300),  # re-sent: applied before the failover
            _message(4, "0-1-101", 2, 500),  # committed on the old primary, unread at the failover
            _message(5, "0-1-102", 2, 800),
            _message(6, "0-2-103", 2, 1100),  # the new primary's own
        ],
        applied,
    )

    assert after[0] == Redelivered(0, 3)
    skipped = [r.offset for r in after[1:] if isinstance(r, Redelivered)]
    assert not skipped, f"unseen changes at offsets {skipped} were skipped as re-sent: silent loss"
    assert all(isinstance(r, DecodedChange) for r in after[1:])


def test_failover_marks_stored_by_the_binlog_coordinate_format_skip_nothing() -> None:
    # A mark written before failover support: "<server_id>:<file 10><pos 20><row 10>".
    stored = {0: "1:" + "0000000007" + f"{9200:020d}" + f"{0:010d}"}

    records = _decode([_message(3, "0-1-101", 2, 500), _message(4, "0-2-102", 2, 800)], stored)

    assert all(isinstance(r, DecodedChange) for r in records)
    assert _applied_marks(records, stored) == {0: "gtid:0=102"}
