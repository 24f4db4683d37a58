"""Record real Debezium change events from the local stack as unit-test data.

Run with the stack up (``cdc-lake stack up``)::

    .venv/bin/python dev/record_debezium_messages.py [recording ...]

Each recording (:func:`_scenarios`; all of them without arguments) creates a
table on one engine, inserts rows, starts a connector with an initial snapshot
(so ``r`` events exist), runs its changes, and writes every message of the
table topic, raw bytes as hex with the registry schemas it references, to
``tests/unit/data/recorded/<recording>.jsonl``, with the values decoding must
produce under ``expect``.

- ``postgres``, ``mariadb``: a table covering the mapped types; inserts,
  updates (Postgres: leaving a TOASTed column unchanged, so Debezium sends its
  placeholder), and deletes (``d`` plus the tombstone).
- ``postgres_toast_arrays``: one TOASTed array of every mapped element type
  (and a TOASTed text and bytea), stored out of line, left unchanged by an
  update of another column (REPLICA IDENTITY DEFAULT): what Debezium sends for
  each type's unavailable value, beside small arrays updated the same way and
  real values shaped like another type's placeholder.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from confluent_kafka import Consumer, TopicPartition

from cdc_lake.config import Config
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.connect.render import ConnectorParams, heartbeat_table_ddl, render_connector
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.service import DEMO_DATABASE, HOST

OUT_DIR = Path(__file__).resolve().parent.parent / "tests" / "unit" / "data" / "recorded"
SLOT = "cdc_lake_recorder"
TOAST_TEXT = "".join(f"{i:05d}-toast-value-that-does-not-compress-" for i in range(400))

PG_SETUP = [
    "drop table if exists rec.all_types",
    "create schema if not exists rec",
    "do $$ begin create type rec.mood as enum ('happy', 'sad'); exception when duplicate_object then null; end $$",
    """create table rec.all_types (
        id bigint primary key, amount numeric(12,2), free_numeric numeric, created_at timestamptz,
        local_ts timestamp, d date, t time, doc jsonb, uid uuid, flag boolean, big text, data bytea,
        tags text[], mood rec.mood)""",
    "alter table rec.all_types alter column big set storage external",
    """insert into rec.all_types values
        (1, 12.34, 3.14159265358979, '2024-02-29 23:59:59.123456+00', '2024-01-01 00:00:00.5', '2024-02-29',
         '13:45:30.25', '{"a": 1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true, 'small', '\\x00ff', '{x,y}', 'happy'),
        (2, -0.01, -12345678901234567890.123456789, '1970-01-01 00:00:00+00', '1999-12-31 23:59:59', '1900-01-01',
         '00:00:00', '[]', 'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', false, null, null, '{}', 'sad')""",
]
PG_CHANGES = [
    f"""insert into rec.all_types values (3, 99999999.99, 0.000000000000000001, now(), now(), current_date, current_time,
        '{{"nested": {{"k": [1, 2]}}}}', gen_random_uuid(), null, '{TOAST_TEXT}', '\\xdeadbeef', '{{a}}', 'happy')""",
    "update rec.all_types set amount = 1.50 where id = 3",
    "delete from rec.all_types where id = 2",
]
MARIADB_SETUP = [
    "drop table if exists rec.all_types",
    "create database if not exists rec",
    """create table rec.all_types (
        id bigint primary key, amount decimal(12,2), created_at timestamp(6) null, dt datetime(3), d date,
        t time(6), doc json, flag tinyint(1), data blob, mood enum('happy','sad'), big text, u bigint unsigned)""",
    """insert into rec.all_types values
        (1, 12.34, '2024-02-29 23:59:59.123456', '2024-01-01 00:00:00.500', '2024-02-29', '13:45:30.25',
         '{"a": 1}', 1, x'00ff', 'happy', 'small', 18446744073709551615),
        (2, -0.01, '1970-01-01 00:00:01', '1999-12-31 23:59:59', '1900-01-01', '-838:59:59', '[]', 0, null,
         'sad', null, 0)""",
]
MARIADB_CHANGES = [
    """insert into rec.all_types values (3, 99999999.99, now(6), now(3), curdate(), '00:00:00', '{"k": [1, 2]}',
        null, x'deadbeef', 'happy', 'x', 42)""",
    "update rec.all_types set amount = 1.50 where id = 3",
    "delete from rec.all_types where id = 2",
]
EXPECT: dict[str, list[dict[str, Any]]] = {
    # In topic order: snapshot rows 1 and 2, insert 3, update 3, delete 2 and its tombstone.
    "postgres": [
        {
            "op": "r",
            "after": {
                "id": 1,
                "amount": "12.34",
                "doc": '{"a": 1}',
                "flag": True,
                "mood": "happy",
                "uid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                "d": "2024-02-29",
                "created_at": "2024-02-29T23:59:59.123456+00:00",
            },
        },
        {"op": "r", "after": {"id": 2, "amount": "-0.01", "big": None, "tags": []}},
        {"op": "c", "after": {"id": 3, "amount": "99999999.99", "big": TOAST_TEXT}},
        {"op": "u", "after": {"id": 3, "amount": "1.50", "big": "__debezium_unavailable_value"}},
        {"op": "d", "before": {"id": 2}},
        {"tombstone": True, "key": {"id": 2}},
    ],
    "mariadb": [
        {
            "op": "r",
            "after": {
                "id": 1,
                "amount": "12.34",
                "doc": '{"a": 1}',
                "mood": "happy",
                "d": "2024-02-29",
                "u": "18446744073709551615",
            },
        },
        {"op": "r", "after": {"id": 2, "amount": "-0.01", "big": None}},
        {"op": "c", "after": {"id": 3, "amount": "99999999.99", "big": "x"}},
        {"op": "u", "before": {"amount": "99999999.99"}, "after": {"id": 3, "amount": "1.50"}},
        {"op": "d", "before": {"id": 2, "mood": "sad"}},
        {"tombstone": True, "key": {"id": 2}},
    ],
}


# One column per mapped array element type, plus a text and a bytea, stored EXTERNAL (out of line, not
# compressed, once a value passes the TOAST threshold): (type, a value over the threshold, a small value).
TOAST_COLUMNS: dict[str, tuple[str, str, str]] = {
    "a_uuid": (
        "uuid[]",
        "array(select md5(i::text)::uuid from generate_series(1, 300) i)",
        "array['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, null]",
    ),
    "a_s": (
        "smallint[]",
        "array(select (i % 30000)::smallint from generate_series(1, 3000) i)",
        "array['-32768'::smallint, null]",
    ),
    "a_int": ("integer[]", "array(select i from generate_series(1, 2000) i)", "array[2, null]"),
    "a_big": (
        "bigint[]",
        "array(select i * 1000000000000 from generate_series(1, 1000) i)",
        "array[9223372036854775807, null]",
    ),
    "a_bool": ("boolean[]", "array(select i % 3 = 0 from generate_series(1, 5000) i)", "array[true, null]"),
    "a_r": ("real[]", "array(select i::real / 4 from generate_series(1, 2000) i)", "array[1.5::real, null]"),
    "a_dp": (
        "double precision[]",
        "array(select i::float8 / 8 from generate_series(1, 1000) i)",
        "array[2.5::float8, null]",
    ),
    "a_num": (
        "numeric[]",
        "array(select i::numeric / 100 from generate_series(1, 1000) i)",
        "array[3.5, null]",
    ),
    "a_tstz": (
        "timestamptz[]",
        "array(select timestamptz '2024-01-01 00:00:00.123456+00' + i * interval '1 minute' "
        "from generate_series(1, 1000) i)",
        "array['2024-01-01 00:00:00.5+00'::timestamptz, null]",
    ),
    "a_date": (
        "date[]",
        "array(select date '2024-01-01' + i from generate_series(1, 2000) i)",
        "array['2024-02-29'::date, null]",
    ),
    "a_text": (
        "text[]",
        "array(select 'text-element-' || i from generate_series(1, 500) i)",
        "array['t', null]",
    ),
    "a_vc": (
        "varchar(40)[]",
        "array(select ('vc-' || i)::varchar(40) from generate_series(1, 500) i)",
        "array['v'::varchar, null]",
    ),
    "a_json": (
        "jsonb[]",
        "array(select jsonb_build_object('k', i) from generate_series(1, 500) i)",
        """array['{"a": 1}'::jsonb, null]""",
    ),
    "big": ("text", "repeat('0123456789abcdef', 400)", "'small'"),
    "by": ("bytea", "decode(repeat('deadbeef', 2000), 'hex')", "'\\x00ff'::bytea"),
}
# Debezium 3.5 has no placeholder for an unchanged TOASTed array of these: converting it fails, which
# stops the connector (event.converting.failure.handling.mode=fail; Debezium's default, warn, writes
# NULL).  Onboarding refuses them under REPLICA IDENTITY DEFAULT; here they stay small (inline: an update
# sends them in full), so the recording holds the update.
NO_PLACEHOLDER = ("a_s", "a_bool", "a_r", "a_dp", "a_num", "a_tstz")
PLACEHOLDER_TEXT = "__debezium_unavailable_value"
PLACEHOLDER_INTS = list(PLACEHOLDER_TEXT.encode())
TOAST_NAMES = ", ".join(TOAST_COLUMNS)
BIG_ROW = ", ".join(
    small if name in NO_PLACEHOLDER else big for name, (_, big, small) in TOAST_COLUMNS.items()
)
SMALL_ROW = ", ".join(small for _, _, small in TOAST_COLUMNS.values())
# Real values shaped like a placeholder: decoding keeps them in a snapshot read (Debezium never sends a
# placeholder there) and in a smallint[] (Debezium never sends the int-array shape for one).
_INTS = "array[" + ", ".join(map(str, PLACEHOLDER_INTS)) + "]"
LOOKALIKE_ROW = ", ".join(
    {
        "a_s": f"{_INTS}::smallint[]",
        "a_int": _INTS,
        "a_text": f"array['{PLACEHOLDER_TEXT}']",
        "a_vc": f"array['{PLACEHOLDER_TEXT}'::varchar]",
        "big": f"'{PLACEHOLDER_TEXT}'",
        "by": f"'{PLACEHOLDER_TEXT}'::bytea",
    }.get(name, "null")
    for name in TOAST_COLUMNS
)
PG_TOAST_ARRAYS_SETUP = [
    "drop table if exists rec.toast_arrays",
    "create schema if not exists rec",
    "create table rec.toast_arrays (id bigint primary key, n int, "
    + ", ".join(f"{name} {kind}" for name, (kind, _, _) in TOAST_COLUMNS.items())
    + ")",
    "alter table rec.toast_arrays "
    + ", ".join(f"alter column {name} set storage external" for name in TOAST_COLUMNS),
    f"insert into rec.toast_arrays (id, n, {TOAST_NAMES}) values (0, 0, {LOOKALIKE_ROW})",
]
PG_TOAST_ARRAYS_CHANGES = [
    f"insert into rec.toast_arrays (id, n, {TOAST_NAMES}) select 1, 0, {BIG_ROW}",
    f"insert into rec.toast_arrays (id, n, {TOAST_NAMES}) values (2, 0, {SMALL_ROW})",
    f"insert into rec.toast_arrays (id, n, {TOAST_NAMES}) values (3, 0, {LOOKALIKE_ROW})",
    "update rec.toast_arrays set n = n + 1 where id in (1, 2, 3)",
]
_SMALL: dict[str, Any] = {
    "a_uuid": ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", None],
    "a_s": [-32768, None],
    "a_int": [2, None],
    "a_big": [9223372036854775807, None],
    "a_bool": [True, None],
    "a_r": [1.5, None],
    "a_dp": [2.5, None],
    "a_num": ["3.500000000000000000", None],
    "a_tstz": ["2024-01-01T00:00:00.500000+00:00", None],
    "a_date": ["2024-02-29", None],
    "a_text": ["t", None],
    "a_vc": ["v", None],
    "a_json": ['{"a": 1}', None],
    "big": "small",
    "by": "AP8=",
}
_UNAVAILABLE = {name: PLACEHOLDER_TEXT for name in TOAST_COLUMNS if name not in NO_PLACEHOLDER}
_LOOKALIKES_KEPT: dict[str, Any] = {
    "a_s": PLACEHOLDER_INTS,
    "a_int": PLACEHOLDER_INTS,
    "a_text": [PLACEHOLDER_TEXT],
    "a_vc": [PLACEHOLDER_TEXT],
    "big": PLACEHOLDER_TEXT,
    "by": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
    "a_uuid": None,
}
# In a create or an update Debezium's placeholder and a real value of that shape cannot be told apart
# (a create carries placeholders when a primary-key update moves a row): only smallint[] is kept.
_LOOKALIKES_STREAMED = {
    **{name: PLACEHOLDER_TEXT for name in ("a_int", "a_text", "a_vc", "big", "by")},
    "a_s": PLACEHOLDER_INTS,
    "a_uuid": None,
}
TOAST_EXPECT: list[dict[str, Any]] = [
    {"op": "r", "after": {"id": 0, **_LOOKALIKES_KEPT}},
    {"op": "c", "after": {"id": 1, "n": 0, **{name: _SMALL[name] for name in NO_PLACEHOLDER}}},
    {"op": "c", "after": {"id": 2, "n": 0, **_SMALL}},
    {"op": "c", "after": {"id": 3, **_LOOKALIKES_STREAMED}},
    {
        "op": "u",
        "after": {"id": 1, "n": 1, **_UNAVAILABLE, **{name: _SMALL[name] for name in NO_PLACEHOLDER}},
    },
    {"op": "u", "after": {"id": 2, "n": 1, **_SMALL}},
    {"op": "u", "after": {"id": 3, "n": 1, **_LOOKALIKES_STREAMED}},
]


def _scenarios() -> dict[str, Scenario]:
    return {
        "postgres": Scenario("postgres", "rec.all_types", PG_SETUP, PG_CHANGES, EXPECT["postgres"]),
        "mariadb": Scenario("mariadb", "rec.all_types", MARIADB_SETUP, MARIADB_CHANGES, EXPECT["mariadb"]),
        "postgres_toast_arrays": Scenario(
            "postgres", "rec.toast_arrays", PG_TOAST_ARRAYS_SETUP, PG_TOAST_ARRAYS_CHANGES, TOAST_EXPECT
        ),
    }


def _run_postgres(stack: LocalStack, statements: list[str]) -> None:
    with stack.postgres_primary.connect(DEMO_DATABASE) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def _run_mariadb(stack: LocalStack, statements: list[str]) -> None:
    with stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@dataclass(frozen=True)
class Scenario:
    """One recording: its engine, table, setup before the connector starts, changes after, expectations."""

    engine: str
    table: str
    setup: list[str]
    changes: list[str]
    expect: list[dict[str, Any]]


def _connector(scenario: Scenario, stack: LocalStack, connect: KafkaConnectClient) -> tuple[str, str]:
    engine, table = scenario.engine, scenario.table
    # A fresh name per run: Connect keeps a deleted connector's offsets, which would point into a dropped slot.
    name = f"record-{engine}-{int(time.time())}"
    creds = stack.layout.credentials
    common = {
        "user": creds.db_user,
        "password_env": "CDC_LAKE_DB_PASSWORD",
        "topic_prefix": name,
        "tables": [table],
        "registry_url": stack.registry.base_url,
    }
    if engine == "postgres":
        _run_postgres(
            stack,
            [
                heartbeat_table_ddl("rec.heartbeat"),
                "drop publication if exists record_pub",
                f"create publication record_pub for table {table}, rec.heartbeat",
            ],
        )
        params = ConnectorParams(
            host=HOST,
            port=stack.layout.ports.postgres_primary,
            database=DEMO_DATABASE,
            slot_name=SLOT,
            publication_name="record_pub",
            heartbeat_table="rec.heartbeat",
            **common,
        )  # type: ignore[arg-type]
    else:
        params = ConnectorParams(
            host=HOST,
            port=stack.layout.ports.mariadb_primary,
            server_id=9101,
            kafka_bootstrap=stack.kafka.address(),
            **common,
        )  # type: ignore[arg-type]
    config = render_connector(engine, name, params)
    config["snapshot.mode"] = "initial"
    connect.create_or_update(name, config)
    connect.wait_running(name, timeout=120)
    return name, f"{name}.{table}"


def _drain(topic: str, expected: int, bootstrap: str) -> list[Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"recorder-{time.time()}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[Any] = []
    deadline = time.monotonic() + 120
    while len(messages) < expected and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and not message.error():
            messages.append(message)
    consumer.close()
    if len(messages) < expected:
        raise SystemExit(f"{topic}: got {len(messages)} of {expected} messages")
    return messages


def _schema_ids(*frames: bytes | None) -> list[int]:
    return [int.from_bytes(frame[1:5], "big") for frame in frames if frame]


def _drop_slot(stack: LocalStack) -> None:
    """Drop the recorder's slot once its deleted connector has released it."""
    deadline = time.monotonic() + 60
    with stack.postgres_primary.connect(DEMO_DATABASE) as conn:
        while time.monotonic() < deadline:
            active = conn.execute(
                "select active from pg_replication_slots where slot_name = %s", (SLOT,)
            ).fetchone()
            if active is None:
                return
            if not active[0]:
                conn.execute("select pg_drop_replication_slot(%s)", (SLOT,))
                return
            time.sleep(1)


def record(recording: str, stack: LocalStack, connect: KafkaConnectClient) -> Path:
    """Produce, capture and write one recording; returns its path."""
    scenario = _scenarios()[recording]
    run = _run_postgres if scenario.engine == "postgres" else _run_mariadb
    run(stack, scenario.setup)
    name, topic = _connector(scenario, stack, connect)
    try:
        time.sleep(5)  # the snapshot must finish before the streamed changes, so the topic order is fixed
        run(stack, scenario.changes)
        expectations = scenario.expect
        messages = _drain(topic, len(expectations), stack.kafka.address())
    finally:
        # Also on failure: a connector left behind keeps the slot, and the next run's connector waits on it.
        connect.delete(name)
        if scenario.engine == "postgres":
            _drop_slot(stack)
    seen: set[int] = set()
    lines = []
    for message, expect in zip(messages, expectations, strict=True):
        schemas = {}
        for schema_id in _schema_ids(message.key(), message.value()):
            if schema_id not in seen:
                response = requests.get(f"{stack.registry.confluent_url}/schemas/ids/{schema_id}", timeout=10)
                response.raise_for_status()
                schemas[str(schema_id)] = response.json()["schema"]
                seen.add(schema_id)
        lines.append(
            json.dumps(
                {
                    "topic": message.topic(),
                    "partition": message.partition(),
                    "offset": message.offset(),
                    "timestamp_ms": message.timestamp()[1],
                    "key": message.key().hex() if message.key() else None,
                    "value": message.value().hex() if message.value() else None,
                    "schemas": schemas,
                    "expect": expect,
                }
            )
        )
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{recording}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    """Record the recordings named on the command line, or all of them."""
    stack = LocalStack(Config.default().stack)
    connect = KafkaConnectClient(stack.connect.url)
    for recording in sys.argv[1:] or list(_scenarios()):
        print(f"recorded {record(recording, stack, connect)}")


if __name__ == "__main__":
    main()
