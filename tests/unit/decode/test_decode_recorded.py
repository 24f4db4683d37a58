"""Every recorded real Debezium message in tests/unit/data/recorded/ must decode as recorded.

Set ``CDC_LAKE_REQUIRE_RECORDED=1`` (CI does, once recordings exist) to fail when there are none.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path

from support import debezium as dbz
from support.fake_registry import InMemorySchemas
from support.recorded import Recording, jsonable, load_recording, recorded_files
from support.wire import framed, unscaled

from cdc_lake.decode import ChangeEvent, Tombstone, decode_message
from cdc_lake.exceptions import CdcLakeError


def check_recording(recording: Recording) -> list[str]:
    """Decode every message of ``recording``; return one line per mismatch or failure."""
    problems: list[str] = []
    lookup = InMemorySchemas(dict(recording.schemas))
    for message in recording.messages:
        where = f"{recording.path.name}:{message.line}"
        try:
            decoded = decode_message(
                lookup,
                message.topic,
                message.partition,
                message.offset,
                message.key,
                message.value,
                message.timestamp_ms,
            )
        except CdcLakeError as exc:
            if "error" not in message.expect:
                problems.append(f"{where}: {exc}")
            elif message.expect["error"] not in str(exc):
                problems.append(
                    f"{where}: expected an error containing {message.expect['error']!r}, got: {exc}"
                )
            continue
        expect = message.expect
        if "error" in expect:
            problems.append(f"{where}: expected an error containing {expect['error']!r}, but it decoded")
            continue
        if expect.get("tombstone", False) != isinstance(decoded, Tombstone):
            problems.append(
                f"{where}: expected tombstone={expect.get('tombstone', False)}, got {type(decoded).__name__}"
            )
            continue
        if isinstance(decoded, ChangeEvent) and "op" in expect and decoded.op != expect["op"]:
            problems.append(f"{where}: expected op {expect['op']!r}, got {decoded.op!r}")
        for part in ("before", "after", "key"):
            wanted = expect.get(part)
            if wanted is None:
                continue
            row = getattr(decoded, part, None) or {}
            got = {column: jsonable(row.get(column)) for column in wanted}
            if got != wanted:
                problems.append(f"{where}: {part} {json.dumps(got)} != {json.dumps(wanted)}")
    return problems


def test_every_recorded_message_decodes() -> None:
    files = recorded_files()
    if os.environ.get("CDC_LAKE_REQUIRE_RECORDED") == "1":
        assert files, "CDC_LAKE_REQUIRE_RECORDED=1 but tests/unit/data/recorded/ holds no *.jsonl recordings"
    problems: list[str] = []
    for path in files:
        recording = load_recording(path)
        if not recording.messages:
            problems.append(f"{path.name}: holds no messages")
        problems.extend(check_recording(recording))
    assert not problems, "\n".join(problems)


def test_recording_format_round_trip(tmp_path: Path) -> None:
    key = framed(1, dbz.pg_key(), {"id": 7})
    after = dbz.empty_row(dbz.PG_COLUMNS, id=7, amount=unscaled(Decimal("1.50"), 2))
    value = framed(2, dbz.pg_envelope(), dbz.value("c", None, after, dbz.pg_source()))
    lines = [
        {
            "topic": dbz.PG_TOPIC,
            "partition": 0,
            "offset": 1,
            "key": key.hex(),
            "value": value.hex(),
            "schemas": {"1": json.dumps(dbz.pg_key()), "2": json.dumps(dbz.pg_envelope())},
            "expect": {"op": "c", "after": {"id": 7, "amount": "1.50"}, "key": {"id": 7}},
        },
        {
            "topic": dbz.PG_TOPIC,
            "partition": 0,
            "offset": 2,
            "key": key.hex(),
            "value": None,
            "expect": {"tombstone": True},
        },
        {
            "topic": dbz.PG_TOPIC,
            "partition": 0,
            "offset": 3,
            "key": None,
            "value": value.hex(),
            "expect": {"op": "u"},
        },
        {
            "topic": dbz.PG_TOPIC,
            "partition": 0,
            "offset": 4,
            "key": "0100000001",
            "value": None,
            "expect": {"error": "magic"},
        },
        {
            "topic": dbz.PG_TOPIC,
            "partition": 0,
            "offset": 5,
            "key": "01",
            "value": None,
            "expect": {"error": "magic"},
        },
        {
            "topic": dbz.PG_TOPIC,
            "partition": 0,
            "offset": 6,
            "key": None,
            "value": value.hex(),
            "expect": {"error": "x"},
        },
    ]
    path = tmp_path / "sample.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    assert recorded_files(tmp_path) == [path]
    recording = load_recording(path)
    assert sorted(recording.schemas) == [1, 2] and len(recording.messages) == 6
    assert check_recording(recording) == [
        "sample.jsonl:3: expected op 'u', got 'c'",
        "sample.jsonl:5: expected an error containing 'magic', got: topic 'pg.public.orders' partition 0 "
        "offset 5: key is 1 bytes, shorter than the 5-byte Confluent header",
        "sample.jsonl:6: expected an error containing 'x', but it decoded",
    ]
