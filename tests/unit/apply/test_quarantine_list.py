"""``cdc-lake quarantine --list``: the key each message carried (decoded, else its length), at 80 columns."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner
from support.change_model import KEY_ID, SCHEMAS, framed

from cdc_lake.apply.quarantine import describe, key_text, list_lines
from cdc_lake.cli.main import cli
from cdc_lake.state.records import QuarantinedMessage
from cdc_lake.state.store import StateStore

WHEN = datetime(2026, 11, 25, 23, 0, tzinfo=UTC)


def _message(key: bytes | None, reason: str = "truncated by a bug") -> QuarantinedMessage:
    return QuarantinedMessage(
        id=1, table="pg.public.orders", topic="pg.public.orders", partition=0, offset=3, reason=reason,
        key=key, value=b"\x00v", quarantined_at=WHEN, topic_id="id", lake_path="/lake/orders",
    )


def test_a_key_is_decoded_with_its_schema_else_shown_as_its_length() -> None:
    assert key_text(framed(KEY_ID, {"id": 9}), SCHEMAS) == "id=9"
    assert key_text(b"\x00\x00\x00\x00\x63abc", SCHEMAS) == "8 bytes (not decoded)"
    assert key_text(b"xy", SCHEMAS) == "2 bytes (not decoded)"
    assert key_text(None, SCHEMAS) == "none"
    assert key_text(framed(KEY_ID, {"id": 9}), None) == "6 bytes (not decoded)"


def test_the_list_names_table_place_key_reason_and_time_within_80_columns() -> None:
    lines = list_lines([_message(framed(KEY_ID, {"id": 9}), "x" * 200)], SCHEMAS)

    assert lines[0] == "pg.public.orders  quarantined 2026-11-25 23:00:00Z"
    assert lines[1] == "  at: topic 'pg.public.orders' partition 0 offset 3"
    assert "  key: id=9" in lines
    assert any(line.startswith("  reason: xxx") for line in lines)
    assert all(len(line) <= 80 for line in lines), [len(line) for line in lines]


def test_the_json_rows_carry_the_key() -> None:
    (row,) = describe([_message(framed(KEY_ID, {"id": 9}))], SCHEMAS)

    assert row["key"] == "id=9" and row["key_bytes"] == 6 and row["offset"] == 3
    assert row["topic_id"] == "id" and row["lake_path"] == "/lake/orders"


def test_the_list_verb_reads_the_store_and_refuses_a_half_given_quarantine(tmp_path: Path) -> None:
    config = tmp_path / "cdc-lake.yaml"
    url = f"sqlite:///{tmp_path}/state.db"
    config.write_text(f"state_store:\n  url: {url}\nschema_registry:\n  url: http://127.0.0.1:1\n")
    with StateStore.open(url) as store:
        store.upsert_source("pg", "postgres", ["c"])
        store.upsert_table("pg.public.orders", "pg", 1, "/lake/orders")
        store.quarantine_message(
            "pg.public.orders", topic="t", partition=0, offset=3, reason="cut", key=b"ab", value=None
        )
    runner = CliRunner()

    listed = runner.invoke(cli, ["--config", str(config), "quarantine", "--list", "--no-decode"])
    as_json = runner.invoke(cli, ["--config", str(config), "quarantine", "--list", "pg.public.x", "--json"])
    half = runner.invoke(cli, ["--config", str(config), "quarantine", "pg.public.orders", "--offset", "3"])

    assert listed.exit_code == 0, listed.output
    assert "  key: 2 bytes (not decoded)" in listed.output and "  reason: cut" in listed.output
    assert as_json.exit_code == 0 and json.loads(as_json.output) == []
    assert half.exit_code != 0 and "--partition" in half.output


def test_a_replayed_message_is_listed_with_when_by_whom_and_its_commit() -> None:
    replayed = dataclasses.replace(
        _message(None), replayed_at=WHEN, replayed_by="ops", replay_commit="2026112523"
    )

    lines = list_lines([replayed, _message(None)])
    (row, missing) = describe([replayed, _message(None)])

    assert lines.count("  replayed: 2026-11-25 23:00:00Z by ops, commit 2026112523") == 1
    assert row["replayed_at"] == WHEN.isoformat() and row["replayed_by"] == "ops"
    assert row["replay_commit"] == "2026112523" and missing["replayed_at"] is None


def test_the_replay_verb_refuses_a_half_given_request_and_a_reason(tmp_path: Path) -> None:
    config = tmp_path / "cdc-lake.yaml"
    config.write_text(f"state_store:\n  url: sqlite:///{tmp_path}/state.db\n")
    runner = CliRunner()

    half = runner.invoke(cli, ["--config", str(config), "quarantine", "--replay", "pg.public.orders"])
    both = runner.invoke(cli, ["--config", str(config), "quarantine", "--replay", "pg.public.orders",
                               "--partition", "0", "--offset", "3", "--reason", "x"])

    assert half.exit_code != 0 and "--partition, --offset" in half.output
    assert both.exit_code != 0 and "--reason" in both.output and "--replay" in both.output
