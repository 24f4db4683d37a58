"""Record real Debezium change events from the local stack as unit-test data.

Run with the stack up (``cdc-lake stack up``)::

    .venv/bin/python dev/record_debezium_messages.py

For each engine (Postgres, MariaDB) it creates a table covering the mapped
types, inserts rows, starts a connector with an initial snapshot (so ``r``
events exist), then inserts, updates (Postgres: leaving a TOASTed column
unchanged, so Debezium sends its placeholder), and deletes (``d`` plus the
tombstone).  Every message of the table topic is written, raw bytes as hex
with the registry schemas it references, to
``tests/unit/data/recorded/<engine>.jsonl``, with the values decoding must
produce under ``expect``.
"""

from __future__ import annotations

import json
import sys
import time
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


def _run_postgres(stack: LocalStack, statements: list[str]) -> None:
    with stack.postgres_primary.connect(DEMO_DATABASE) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def _run_mariadb(stack: LocalStack, statements: list[str]) -> None:
    with stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def _connector(engine: str, stack: LocalStack, connect: KafkaConnectClient) -> tuple[str, str]:
    # A fresh name per run: Connect keeps a deleted connector's offsets, which would point into a dropped slot.
    name = f"record-{engine}-{int(time.time())}"
    creds = stack.layout.credentials
    common = {
        "user": creds.db_user,
        "password_env": "CDC_LAKE_DB_PASSWORD",
        "topic_prefix": name,
        "tables": ["rec.all_types"],
        "registry_url": stack.registry.base_url,
    }
    if engine == "postgres":
        _run_postgres(
            stack,
            [
                heartbeat_table_ddl("rec.heartbeat"),
                "drop publication if exists record_pub",
                "create publication record_pub for table rec.all_types, rec.heartbeat",
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
    return name, f"{name}.rec.all_types"


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


def record(engine: str, stack: LocalStack, connect: KafkaConnectClient) -> Path:
    """Produce, capture and write one engine's recording; returns its path."""
    run = _run_postgres if engine == "postgres" else _run_mariadb
    run(stack, PG_SETUP if engine == "postgres" else MARIADB_SETUP)
    name, topic = _connector(engine, stack, connect)
    time.sleep(5)  # the snapshot must finish before the streamed changes, so the topic order is fixed
    run(stack, PG_CHANGES if engine == "postgres" else MARIADB_CHANGES)
    expectations = EXPECT[engine]
    messages = _drain(topic, len(expectations), stack.kafka.address())
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
    connect.delete(name)
    if engine == "postgres":
        time.sleep(2)
        _run_postgres(stack, [f"select pg_drop_replication_slot('{SLOT}')"])
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{engine}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    """Record both engines."""
    stack = LocalStack(Config.default().stack)
    connect = KafkaConnectClient(stack.connect.url)
    for engine in sys.argv[1:] or ["postgres", "mariadb"]:
        print(f"recorded {record(engine, stack, connect)}")


if __name__ == "__main__":
    main()
