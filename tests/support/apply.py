"""Captured source tables, applier configs and lake-versus-source comparison for the apply tests.

A capture creates a table on the stack's Postgres or MariaDB primary and a Debezium connector for it
(rendered from the reviewed templates, registered through Kafka Connect, waited on until it streams),
and drops both afterwards.  :func:`config_dict` is a cdc-lake config naming the captured tables
(``support.common.write_and_load`` writes it), :func:`record_catching_up` records them in the state
store as CATCHING_UP (what onboarding and bootstrap leave behind), and :func:`assert_lake_matches`
compares every row and value of the lake table with the source table, column by column through the
type of the lake column (``support.compare``).
"""

from __future__ import annotations

import io
import json
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
import pytest
import requests
from confluent_kafka import Producer
from fastavro import parse_schema, schemaless_writer
from pyspark.sql import SparkSession

from cdc_lake.config import Config
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.connect.render import ConnectorParams, heartbeat_table_ddl, render_connector
from cdc_lake.connect.streaming import heartbeat_count, wait_streaming
from cdc_lake.decode.framing import encode_frame
from cdc_lake.decode.types import stash_logical_types
from cdc_lake.hudi.writer import read_table
from cdc_lake.kafka.offsets import end_offsets
from cdc_lake.lake.columns import METADATA_FIELDS
from cdc_lake.sources.mysql.settings import MySqlCaptureIds
from cdc_lake.sources.postgres.settings import PostgresCaptureIds
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.mariadb import MariaDbPrimary, MariaDbReplica
from cdc_lake.stack.service import DEMO_DATABASE, HOST
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore
from support.common import suffix, write_and_load
from support.compare import assert_rows_equal
from support.second_reader import second_reader_rows
from support.trino_reader import assert_trino_reads_as_spark

PASSWORD_ENV = "CDC_LAKE_DB_PASSWORD"
METADATA_NAMES = frozenset(f.name for f in METADATA_FIELDS)


@dataclass
class Capture:
    """A captured source table and its connector."""

    engine: str
    source_name: str
    schema: str
    table: str
    connector: str
    stack: LocalStack
    key: tuple[str, ...] = ("id",)
    server_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    promoted: bool = False
    database: str = DEMO_DATABASE
    """The Postgres database holding ``schema`` (on MariaDB the schema is the database)."""

    @property
    def topic_prefix(self) -> str:
        """The connector's topic prefix (also its name)."""
        return self.connector

    @property
    def topic(self) -> str:
        """The table's Debezium topic."""
        return f"{self.topic_prefix}.{self.schema}.{self.table}"

    @property
    def qualified_name(self) -> str:
        """``source.schema.table``."""
        return f"{self.source_name}.{self.schema}.{self.table}"

    def mariadb_writer(self) -> MariaDbPrimary | MariaDbReplica:
        """The MariaDB server taking writes: the stack's primary, or its replica once promoted."""
        return self.stack.mariadb_replica if self.promoted else self.stack.mariadb_primary

    def execute(self, *statements: str | tuple[str, Sequence[Any]]) -> None:
        """Run statements (each SQL, or SQL with parameters) on the primary, autocommitted one by one."""
        if self.engine == "postgres":
            with self.stack.postgres_primary.connect(self.database) as conn:
                for statement in statements:
                    sql, params = statement if isinstance(statement, tuple) else (statement, ())
                    conn.execute(sql, params)  # type: ignore[arg-type]
        else:
            with self.mariadb_writer().connect(self.schema) as conn, conn.cursor() as cur:
                for statement in statements:
                    sql, params = statement if isinstance(statement, tuple) else (statement, ())
                    cur.execute(sql, params)

    def rows(self) -> list[dict[str, Any]]:
        """Every row of the source table, ordered by key."""
        order = ", ".join(self.key)
        if self.engine == "postgres":
            with self.stack.postgres_primary.connect(self.database) as conn:
                cur = conn.execute(f'select * from "{self.schema}"."{self.table}" order by {order}')
                names = [d.name for d in cur.description or ()]
                return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        with self.mariadb_writer().connect(self.schema) as conn, conn.cursor() as cur:
            cur.execute(f"select * from `{self.table}` order by {order}")
            names = [d[0] for d in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def end_offset(self) -> int:
        """Messages in the table's topic so far (all partitions)."""
        return sum(end_offsets(self.stack.kafka.address(), self.topic).values())

    def wait_for(self, at_least: int, timeout: float = 120.0) -> None:
        """Wait until the topic holds at least ``at_least`` messages."""
        deadline = time.monotonic() + timeout
        while self.end_offset() < at_least:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.topic}: {self.end_offset()} messages, expected {at_least}")
            time.sleep(0.5)


def _start(
    stack: LocalStack, connect: KafkaConnectClient, engine: str, name: str, params: ConnectorParams
) -> None:
    baseline = heartbeat_count(stack.kafka.address(), name)
    connect.create_or_update(name, render_connector(engine, name, params))
    connect.wait_running(name, timeout=120)
    wait_streaming(stack.kafka.address(), name, name, baseline=baseline, timeout=120)


@contextmanager
def postgres_capture(
    stack: LocalStack, table_ddl: str, table: str = "items", **extra: Any
) -> Iterator[Capture]:
    """A Postgres table created by ``table_ddl`` (``{table}`` is the qualified name) and its connector."""
    run = suffix()
    schema, name = f"apply_{run}", f"apply-pg-{run}"
    qualified = f'"{schema}"."{table}"'
    connect = KafkaConnectClient(stack.connect.url)
    with stack.postgres_primary.connect(DEMO_DATABASE) as conn:
        conn.execute(f'create schema "{schema}"')
        conn.execute(table_ddl.format(table=qualified, schema=f'"{schema}"'))  # type: ignore[arg-type]
        conn.execute(heartbeat_table_ddl(f"{schema}.heartbeat"))  # type: ignore[arg-type]
        conn.execute(f'create publication "{schema}" for table {qualified}, "{schema}".heartbeat')  # type: ignore[arg-type]
    creds = stack.layout.credentials
    params = ConnectorParams(
        host=HOST,
        port=stack.layout.ports.postgres_primary,
        user=creds.db_user,
        password_env=PASSWORD_ENV,
        topic_prefix=name,
        tables=[f"{schema}.{table}"],
        registry_url=stack.registry.base_url,
        database=DEMO_DATABASE,
        heartbeat_table=f"{schema}.heartbeat",
        heartbeat_interval_ms=1000,
        engine_values=PostgresCaptureIds(slot_name=schema, publication_name=schema).template_values(),
    )
    _start(stack, connect, "postgres", name, params)
    try:
        yield Capture("postgres", f"pg_{run}", schema, table, name, stack, extra=extra)
    finally:
        connect.delete(name)
        with stack.postgres_primary.connect(DEMO_DATABASE) as conn:
            for _ in range(30):
                active = conn.execute(
                    "select active from pg_replication_slots where slot_name = %s", (schema,)
                ).fetchone()
                if active is None or not active[0]:
                    break
                time.sleep(1)
            conn.execute(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
                "where slot_name = %s and not active",
                (schema,),
            )
            conn.execute(f'drop publication if exists "{schema}"')  # type: ignore[arg-type]
            conn.execute(f'drop schema "{schema}" cascade')  # type: ignore[arg-type]


@contextmanager
def mariadb_capture(
    stack: LocalStack, table_ddl: str, table: str = "items", **extra: Any
) -> Iterator[Capture]:
    """A MariaDB table created by ``table_ddl`` (``{table}`` is the qualified name) and its connector."""
    run = suffix()
    database, name = f"apply_{run}", f"apply-maria-{run}"
    connect = KafkaConnectClient(stack.connect.url)
    with stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"create database `{database}`")
        cur.execute(table_ddl.format(table=f"`{database}`.`{table}`", schema=f"`{database}`"))
    creds = stack.layout.credentials
    server_id = 10_000 + int(run[:6], 16) % 100_000
    params = ConnectorParams(
        host=HOST,
        port=stack.layout.ports.mariadb_primary,
        user=creds.db_user,
        password_env=PASSWORD_ENV,
        topic_prefix=name,
        tables=[f"{database}.{table}"],
        registry_url=stack.registry.base_url,
        kafka_bootstrap=stack.kafka.address(),
        heartbeat_interval_ms=1000,
        engine_values=MySqlCaptureIds(server_id=server_id).template_values(),
    )
    _start(stack, connect, "mariadb", name, params)
    try:
        yield Capture(
            "mariadb", f"maria_{run}", database, table, name, stack, server_id=server_id, extra=extra
        )
    finally:
        connect.delete(name)
        with stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"drop database `{database}`")


def config_dict(
    stack: LocalStack,
    captures: Sequence[Capture],
    lake_base: str,
    state_url: str,
    tables: dict[str, dict[str, Any]] | None = None,
    lake: dict[str, Any] | None = None,
    apply: dict[str, Any] | None = None,
    spark_conf: dict[str, str] | None = None,
    synthetic: Sequence[SyntheticTopic] = (),
) -> dict[str, Any]:
    """A cdc-lake config (as YAML-ready data) for ``captures`` and ``synthetic`` topics.

    ``tables`` adds per-table settings by qualified name.  A synthetic topic becomes a Postgres source
    named after its prefix (its connection is never used by the applier).
    """
    ports = stack.layout.ports
    sources: dict[str, Any] = {}
    for topic in synthetic:
        primary = {"host": HOST, "port": ports.postgres_primary, "database": DEMO_DATABASE, "user": "cdc"}
        sources[topic.prefix] = {
            "engine": "postgres",
            "primary": primary,
            "topic_prefix": topic.prefix,
            "tables": [{"name": f"{topic.schema}.{topic.table}"}],
        }
    for capture in captures:
        table_entry = {
            "name": f"{capture.schema}.{capture.table}",
            **(tables or {}).get(capture.qualified_name, {}),
        }
        if capture.engine == "postgres":
            primary = {
                "host": HOST,
                "port": ports.postgres_primary,
                "database": DEMO_DATABASE,
                "user": stack.layout.credentials.db_user,
                "password": "${CDC_LAKE_DB_PASSWORD:-cdc-lake-local}",
            }
            source: dict[str, Any] = {"engine": "postgres", "primary": primary}
        else:
            primary = {
                "host": HOST,
                "port": ports.mariadb_primary,
                "user": stack.layout.credentials.db_user,
                "password": "${CDC_LAKE_DB_PASSWORD:-cdc-lake-local}",
            }
            source = {"engine": "mariadb", "primary": primary, "server_id": capture.server_id}
        source.update({"topic_prefix": capture.topic_prefix, "tables": [table_entry]})
        sources[capture.source_name] = source
    creds = stack.layout.credentials
    config: dict[str, Any] = {
        "lake": {"base_path": lake_base, **(lake or {})},
        "state_store": {"url": state_url},
        "kafka": {"bootstrap_servers": stack.kafka.address()},
        "schema_registry": {"url": stack.registry.confluent_url},
        "kafka_connect": {"url": stack.connect.url},
        "spark": {"conf": spark_conf or {}},
        "apply": apply or {},
        "sources": sources,
    }
    if lake_base.startswith("s3a://"):
        config["lake"]["s3"] = {
            "endpoint": stack.object_store.endpoint,
            "region": "us-east-1",
            "access_key": creds.s3_access_key,
            "secret_key": creds.s3_secret_key,
            "path_style_access": True,
        }
    return config


def record_catching_up(config: Config) -> None:
    """Record every configured table as CATCHING_UP, as onboarding and an empty bootstrap leave it
    (without onboarding: the applier tests' connectors are their own)."""
    with StateStore.open(config.state_store.url) as store:
        for source, table in config.iter_tables():
            qualified = table.qualified_name(source)
            store.upsert_source(source.name, source.engine, [source.topic_prefix or source.name])
            store.upsert_table(qualified, source.name, table.tier, config.lake.table_base_path(qualified))
            if store.require_table(qualified).state is TableState.PENDING_BOOTSTRAP:
                store.transition(qualified, TableState.BOOTSTRAPPING)
                store.transition(qualified, TableState.CATCHING_UP)


def synthetic_config(
    stack: LocalStack, tmp_path: Path, topics: Sequence[SyntheticTopic]
) -> tuple[Path, Config]:
    """``tmp_path/cdc-lake.yaml`` for ``topics`` (lake and SQLite state under ``tmp_path``), loaded,
    its tables recorded CATCHING_UP: the applier tests' usual start."""
    path = tmp_path / "cdc-lake.yaml"
    config = write_and_load(
        path,
        config_dict(stack, [], str(tmp_path / "lake"), f"sqlite:///{tmp_path}/state.db", synthetic=topics),
    )
    record_catching_up(config)
    return path, config


def lake_rows(spark: SparkSession, base_path: str, key: Sequence[str] = ("id",)) -> list[dict[str, Any]]:
    """Every row of the lake table (all columns, metadata included), ordered by key.

    Read with Spark+Hudi; the second reader (``support.second_reader``) must read the same keys and the
    same values in every column, and Trino through a catalog entry the same as Spark's read-optimized view
    (``support.trino_reader.assert_trino_reads_as_spark``).
    """
    frame = read_table(spark, base_path)
    rows = [row.asDict(recursive=True) for row in frame.orderBy(*key).collect()]
    types = {f.name: f.dataType for f in frame.schema.fields}
    second = second_reader_rows(base_path, list(types))
    assert_rows_equal(base_path, rows, second, types, key, reader="second reader", expected_from_source=False)
    assert_trino_reads_as_spark(spark, base_path, key)
    return rows


def assert_lake_matches(
    spark: SparkSession,
    capture: Capture,
    base_path: str,
    json_columns: Sequence[str] = (),
    naive_utc_columns: Sequence[str] = (),
    live_only: bool = False,
) -> list[dict[str, Any]]:
    """The lake table equals the source table row for row and value for value; returns the lake rows.

    ``json_columns`` are compared as parsed JSON (the source's text formatting may differ);
    ``naive_utc_columns`` are source timestamps the driver returns naive in UTC (MariaDB TIMESTAMP);
    ``live_only`` compares only rows not flagged ``_cdc_deleted`` (soft-delete tables).
    """
    frame = read_table(spark, base_path)
    types = {f.name: f.dataType for f in frame.schema.fields}
    lake = [r for r in lake_rows(spark, base_path, capture.key) if not (live_only and r["_cdc_deleted"])]
    assert_rows_equal(
        capture.qualified_name,
        capture.rows(),
        lake,
        types,
        capture.key,
        json_columns=json_columns,
        naive_utc_columns=naive_utc_columns,
    )
    return lake


SIMPLE_DDL = {
    "postgres": (
        "create table {table} (id int primary key, region text not null, amount numeric(12, 2), note text, "
        "big text); alter table {table} alter column big set storage external"
    ),
    "mariadb": (
        "create table {table} (id int primary key, region varchar(8) not null, amount decimal(12, 2), "
        "note text, big mediumtext)"
    ),
}
"""A small table for workload tests: a partition column, a decimal, and a column Postgres TOASTs."""


@contextmanager
def simple_capture(stack: LocalStack, engine: str) -> Iterator[Capture]:
    """A captured :data:`SIMPLE_DDL` table on ``engine``."""
    capture = postgres_capture if engine == "postgres" else mariadb_capture
    with capture(stack, SIMPLE_DDL[engine]) as captured:
        yield captured


def per_engine_capture() -> Any:
    """A ``capture`` fixture yielding a :func:`simple_capture` on Postgres, then on MariaDB."""

    @pytest.fixture(params=["postgres", "mariadb"])
    def capture(request: pytest.FixtureRequest, local_stack: LocalStack) -> Iterator[Capture]:
        with simple_capture(local_stack, request.param) as captured:
            yield captured

    return capture


def workload_config(path: Path, stack: LocalStack, capture: Capture, batch_max_events: int) -> Config:
    """Write a config for ``capture``'s :class:`Workload` table (partitioned by region, applied in
    batches of ``batch_max_events``) to ``path``, its lake and SQLite state store beside it."""
    tables = {capture.qualified_name: {"partition_by": ["region"]}}
    state = f"sqlite:///{path.parent}/state.db"
    lake_base = str(path.parent / "lake")
    apply = {"batch_max_events": batch_max_events}
    return write_and_load(path, config_dict(stack, [capture], lake_base, state, tables=tables, apply=apply))


FAULT_SIZE_ENV = "CDC_LAKE_FAULT_{}"
"""The fault tests' sizes: reduced in CI, full size through ``benchmarks/fault_bench.py``."""


def fault_size(name: str, reduced: int) -> int:
    """Fault test size ``name`` (OPERATIONS, CHANGES, RESENT): ``CDC_LAKE_FAULT_<name>``, or ``reduced``.

    A bad value fails the test run at collection, naming the variable.
    """
    variable = FAULT_SIZE_ENV.format(name)
    value = os.environ.get(variable, "")
    if not value:
        return reduced
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{variable}={value!r}: expected a whole number of at least 1")
    return int(value)


@dataclass(frozen=True)
class Operation:
    """One source transaction of a :class:`Workload`: statements with parameters, or a bulk load of
    ``rows`` (id, region, amount, note, big) by COPY (Postgres) or LOAD DATA (MariaDB)."""

    statements: tuple[tuple[str, tuple[object, ...]], ...] = ()
    rows: tuple[tuple[object, ...], ...] = ()


_BULK_COLUMNS = "(id, region, amount, note, big)"

ADDED_COLUMNS = (("added_int", "int"), ("added_text", "text"))
"""The columns a :class:`Workload`'s DDL steps add, in order: types both engines capture alike (Avro
int and string), nullable with no default."""


def _tsv(row: Sequence[object]) -> str:
    """A row as COPY text and LOAD DATA read it: tab-separated, ``\\N`` for null."""
    return "\t".join("\\N" if value is None else str(value) for value in row)


class Workload:
    """Random changes of a :data:`SIMPLE_DDL` table, each operation one source transaction, logged.

    The single-row changes (:meth:`step`): inserts, updates of values and of the partition column,
    deletes, re-inserts of deleted keys.  ``mixed=True`` adds the shapes that share stream positions or
    carry TOAST placeholders: bulk loads (COPY, whose rows of one heap page share one change LSN; LOAD
    DATA, one GTID), primary-key updates (delete + tombstone + create with one position), multi-statement
    transactions (among them a delete, re-insert and update of one key), INSERT … SELECT, and updates
    of the Postgres TOASTed column ``big`` (every other update leaves it unchanged: a placeholder).  On
    Postgres a row whose ``big`` is TOASTed is never moved to another key: under REPLICA IDENTITY DEFAULT
    a batch cut between such a move's delete and create leaves ``big`` null, a documented limit
    (docs/applier.md, "Postgres TOAST").

    ``ddl_window=N`` adds DDL steps: one or two ``ALTER TABLE … ADD COLUMN`` of :data:`ADDED_COLUMNS`
    (nullable, no default: the kind the applier evolves in place, docs/schema-changes.md; a default,
    a drop or a type change stops the table, so none is made here), each at a place drawn from the seed
    among the first N operations made by :meth:`running` with ``ddl=True`` (the caller picks the phase,
    e.g. while the applier streams, and lets changes follow them).  From then on single-row inserts
    and updates write the added columns (a value or NULL); bulk loads, INSERT … SELECT and rows not
    changed since keep NULL there.  The added columns' values are drawn whether the column exists yet or
    not, so the seed fixes every other value whatever the timing.

    Every update changes the row (MySQL/MariaDB log nothing for an update that changes nothing), so the
    number of Kafka messages is known: 1 per inserted or updated row, 2 per deleted row (with its
    tombstone), 3 per moved key, none for an ``ADD COLUMN``.  :meth:`write_script` writes every
    operation made so far (the DDL steps included) as a script that replays them (psql, or the mysql
    client with ``--local-infile``).
    """

    REGIONS = ("eu", "us", "apac")

    def __init__(self, capture: Capture, seed: int, mixed: bool = False, ddl_window: int = 0) -> None:
        self.capture = capture
        self.seed = seed
        self.mixed = mixed
        self.rng = random.Random(seed)
        self.add_columns = ddl_window > 0
        count = self.rng.randint(1, len(ADDED_COLUMNS)) if self.add_columns else 0
        self.ddl_at = sorted(self.rng.sample(range(ddl_window), count))
        """Places of the DDL steps, counted in operations made by ``running(…, ddl=True)``."""
        self.ddl_counted = 0
        self.added: list[str] = []  # the columns of ADDED_COLUMNS added so far, in order
        self.live: set[int] = set()
        self.deleted: set[int] = set()
        self.toasted: set[int] = set()  # live keys whose ``big`` is long (TOASTed on Postgres)
        self.next_key = 1
        self.version = 0
        self.messages = 0
        self.tombstones = 0  # of those messages: the tombstone after each delete (not a change event)
        self.done: list[Operation] = []
        self.quote = '"' if capture.engine == "postgres" else "`"
        self.table = f"{self._name(capture.schema)}.{self._name(capture.table)}"

    def _name(self, identifier: str) -> str:
        """``identifier`` quoted for the engine."""
        return f"{self.quote}{identifier}{self.quote}"

    def _added_values(self) -> dict[str, object]:
        """Values for the columns added so far (a fourth of them NULL): drawn for every column of
        :data:`ADDED_COLUMNS` when there are DDL steps, added yet or not, so the draws do not depend on
        where the DDL steps fell."""
        if not self.add_columns:
            return {}
        drawn: dict[str, object] = {}
        for name, kind in ADDED_COLUMNS:
            null = self.rng.random() < 0.25
            value = self.rng.randint(-(10**6), 10**6) if kind == "int" else f"a{self.version}"
            drawn[name] = None if null else value
        return {name: drawn[name] for name in self.added}

    def _ddl(self) -> Operation:
        """The next DDL step: ``ADD COLUMN`` of the next of :data:`ADDED_COLUMNS` (no row message)."""
        name, kind = ADDED_COLUMNS[len(self.added)]
        self.added.append(name)
        return Operation(((f"alter table {self.table} add column {self._name(name)} {kind}", ()),))

    def _big(self, key: int) -> str:
        return "".join(f"{key}-{self.version}-{i:04d}|" for i in range(500))

    def _values(self, key: int, long: bool = True) -> list[object]:
        """A new row of ``key`` (``long``: its ``big`` is TOASTed on Postgres)."""
        self.live.add(key)
        self.deleted.discard(key)
        (self.toasted.add if long else self.toasted.discard)(key)
        amount = f"{self.rng.randint(-(10**8), 10**8) / 100:.2f}"
        big = self._big(key) if long else f"b{key}-{self.version}"
        return [key, self.rng.choice(self.REGIONS), amount, f"n{self.version}", big]

    def _insert(self, key: int) -> tuple[str, list[object]]:
        values, added = self._values(key), self._added_values()
        columns = ", ".join(["id", "region", "amount", "note", "big", *map(self._name, added)])
        marks = ", ".join("%s" for _ in range(len(values) + len(added)))
        return f"insert into {self.table} ({columns}) values ({marks})", [*values, *added.values()]

    def _set_added(self) -> tuple[str, list[object]]:
        """An update's ``SET`` items for the added columns (``, "c" = %s`` each), and their values."""
        added = self._added_values()
        return "".join(f", {self._name(name)} = %s" for name in added), list(added.values())

    def _delete(self, key: int) -> tuple[str, list[object]]:
        self.live.discard(key)
        self.toasted.discard(key)
        self.deleted.add(key)
        self.messages += 2
        self.tombstones += 1
        return f"delete from {self.table} where id = %s", [key]

    def _new_key(self) -> int:
        key, self.next_key = self.next_key, self.next_key + 1
        return key

    def step(self) -> tuple[str, list[object]]:
        """One random single-row change, as SQL with parameters."""
        self.version += 1
        roll = self.rng.random()
        if roll < 0.3 or not self.live:
            self.messages += 1
            return self._insert(self._new_key())
        if roll < 0.9 and self.deleted and roll > 0.82:
            self.messages += 1
            return self._insert(self.rng.choice(sorted(self.deleted)))
        key = self.rng.choice(sorted(self.live))
        if roll < 0.72:
            self.messages += 1
            sets, added = self._set_added()
            if self.rng.random() < 0.3:
                region = "case region when 'eu' then 'us' when 'us' then 'apac' else 'eu' end"
                return f"update {self.table} set region = {region}, note = %s{sets} where id = %s", [
                    f"m{self.version}",
                    *added,
                    key,
                ]
            amount = "amount = coalesce(amount, 0) + 1"
            return f"update {self.table} set {amount}, note = %s{sets} where id = %s", [
                f"u{self.version}",
                *added,
                key,
            ]
        return self._delete(key)

    def _bulk(self) -> Operation:
        """A bulk load of new keys, mostly short rows (many to a heap page), some TOASTed."""
        count = self.rng.randint(5, 60)
        self.messages += count
        rows = [self._values(self._new_key(), long=self.rng.random() < 0.1) for _ in range(count)]
        return Operation(rows=tuple(tuple(row) for row in rows))

    def _move(self) -> Operation:
        """Primary-key updates of one to three rows in one statement (TOASTed Postgres rows stay put)."""
        movable = self.live - self.toasted if self.capture.engine == "postgres" else self.live
        if not movable:
            return self._transaction()
        old = self.rng.sample(sorted(movable), min(len(movable), self.rng.randint(1, 3)))
        new = [self._new_key() for _ in old]
        for before, after in zip(old, new, strict=True):
            self.live.discard(before)
            self.deleted.add(before)
            self.live.add(after)
        self.messages += 3 * len(old)
        self.tombstones += len(old)
        cases = " ".join("when %s then %s" for _ in old)
        where = ", ".join("%s" for _ in old)
        params = [v for pair in zip(old, new, strict=True) for v in pair] + old
        return Operation(
            ((f"update {self.table} set id = case id {cases} end where id in ({where})", tuple(params)),)
        )

    def _transaction(self) -> Operation:
        """Two to four changes in one transaction, or a delete, re-insert and update of one key."""
        if self.live and self.rng.random() < 0.4:
            key = self.rng.choice(sorted(self.live))
            self.version += 1
            delete = self._delete(key)
            insert = self._insert(key)
            update = (f"update {self.table} set note = %s where id = %s", [f"t{self.version}", key])
            self.messages += 2
            return Operation(tuple((sql, tuple(params)) for sql, params in (delete, insert, update)))
        return Operation(
            tuple(
                (sql, tuple(params)) for sql, params in (self.step() for _ in range(self.rng.randint(2, 4)))
            )
        )

    def _insert_select(self) -> Operation:
        """Copies of one to five live rows under new keys, in one INSERT … SELECT."""
        if not self.live:
            return self._bulk()
        sources = sorted(self.rng.sample(sorted(self.live), min(len(self.live), self.rng.randint(1, 5))))
        first = self.next_key
        for source in sources:
            key = self._new_key()
            self.live.add(key)
            if source in self.toasted:
                self.toasted.add(key)
        self.messages += len(sources)
        where = ", ".join("%s" for _ in sources)
        statement = (
            f"insert into {self.table} {_BULK_COLUMNS} select %s + row_number() over (order by id), "
            f"region, amount, concat('copy of ', id), big from {self.table} where id in ({where})"
        )
        return Operation(((statement, (first - 1, *sources)),))

    def _toast(self) -> Operation:
        """An update of ``big``: a new long (TOASTed) value, or a short one."""
        key = self.rng.choice(sorted(self.live))
        long = self.rng.random() < 0.6
        (self.toasted.add if long else self.toasted.discard)(key)
        self.version += 1
        self.messages += 1
        big = self._big(key) if long else f"s{key}-{self.version}"
        return Operation(((f"update {self.table} set big = %s where id = %s", (big, key)),))

    def operation(self, ddl: bool = False) -> Operation:
        """The next random operation: a single change, or (``mixed``) any shape of the class docstring;
        ``ddl``: this operation counts towards the DDL steps' places (:attr:`ddl_at`), and is one if due."""
        if ddl and self.add_columns:
            self.ddl_counted += 1
            if self.ddl_counted - 1 in self.ddl_at:
                return self._ddl()
        roll = self.rng.random() if self.mixed and self.live else 1.0
        if roll < 0.08:
            return self._bulk()
        if roll < 0.2:
            return self._move()
        if roll < 0.32:
            return self._transaction()
        if roll < 0.4:
            return self._insert_select()
        if roll < 0.5:
            return self._toast()
        sql, params = self.step()
        return Operation(((sql, tuple(params)),))

    @contextmanager
    def _session(self) -> Iterator[Callable[[Operation], None]]:
        """A connection to the writing server, as a function making one operation a transaction."""
        capture = self.capture
        if capture.engine == "postgres":
            with capture.stack.postgres_primary.connect(capture.database) as pg:

                def on_postgres(operation: Operation) -> None:
                    with pg.transaction(), pg.cursor() as cur:
                        if operation.rows:
                            with cur.copy(f"copy {self.table} {_BULK_COLUMNS} from stdin") as copy:  # type: ignore[arg-type]
                                for row in operation.rows:
                                    copy.write_row(row)
                        for sql, params in operation.statements:
                            cur.execute(sql, params)  # type: ignore[arg-type]

                yield on_postgres
            return
        server = capture.mariadb_writer()
        creds = capture.stack.layout.credentials
        maria = pymysql.connect(
            host=HOST,
            port=server.port,
            user=creds.db_user,
            password=creds.db_password,
            database=capture.schema,
            local_infile=True,
        )

        def on_mariadb(operation: Operation) -> None:
            with maria.cursor() as cur, tempfile.NamedTemporaryFile("w", suffix=".tsv") as data:
                if operation.rows:
                    data.write("".join(f"{_tsv(row)}\n" for row in operation.rows))
                    data.flush()
                    cur.execute(
                        f"load data local infile %s into table {self.table} {_BULK_COLUMNS}", (data.name,)
                    )
                for sql, params in operation.statements:
                    cur.execute(sql, params)
            maria.commit()

        try:
            yield on_mariadb
        finally:
            maria.close()

    def run(self, count: int) -> None:
        """Make ``count`` operations, each committed on its own."""
        with self._session() as execute:
            for _ in range(count):
                operation = self.operation()
                execute(operation)
                self.done.append(operation)

    @contextmanager
    def running(self, limit: int, pause: float, ddl: bool = False) -> Iterator[None]:
        """Make up to ``limit`` operations, ``pause`` seconds apart, in a thread while the block runs.

        ``ddl``: the operations count towards the DDL steps' places (``ddl_window``).  The thread stops
        at the end of the block (after the operation it is making); what it raised is raised there.
        """
        stop = threading.Event()
        failures: list[BaseException] = []

        def write() -> None:
            try:
                with self._session() as execute:
                    for _ in range(limit):
                        operation = self.operation(ddl)
                        execute(operation)
                        self.done.append(operation)
                        if stop.wait(pause):
                            return
            except BaseException as exc:  # raised by the block's exit
                failures.append(exc)

        thread = threading.Thread(target=write, name="workload", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=120)
        if failures:
            raise failures[0]

    def _literal(self, value: object) -> str:
        if value is None:
            return "null"
        if isinstance(value, int):
            return str(value)
        text = str(value).replace("'", "''")
        return f"'{text.replace(chr(92), chr(92) * 2)}'" if self.capture.engine != "postgres" else f"'{text}'"

    def write_script(self, directory: Path) -> Path:
        """Write the operations made so far to ``directory`` as a replayable SQL script; returns its path.

        The script creates the table, then makes each operation as one transaction in order.  Postgres:
        ``psql -v ON_ERROR_STOP=1 -f FILE`` (bulk loads as ``COPY … FROM stdin``).  MariaDB:
        ``mysql --local-infile=1 < FILE`` (bulk loads read data files written beside it).
        """
        directory.mkdir(parents=True, exist_ok=True)
        engine = self.capture.engine
        script = directory / f"workload-{engine}-{self.seed}.sql"
        schema = self.table.rsplit(".", 1)[0]
        lines = [
            f"-- cdc-lake test workload: {engine}, seed {self.seed}, {len(self.done)} operations",
            f"create {'schema' if engine == 'postgres' else 'database'} if not exists {schema};",
            f"{SIMPLE_DDL[engine].format(table=self.table)};",
        ]
        for number, operation in enumerate(self.done):
            lines.append("begin;" if engine == "postgres" else "start transaction;")
            if operation.rows and engine == "postgres":
                lines.append(f"copy {self.table} {_BULK_COLUMNS} from stdin;")
                lines += [_tsv(row) for row in operation.rows] + ["\\."]
            elif operation.rows:
                data = directory / f"{script.stem}-{number}.tsv"
                data.write_text("".join(f"{_tsv(row)}\n" for row in operation.rows), encoding="utf-8")
                lines.append(f"load data local infile '{data}' into table {self.table} {_BULK_COLUMNS};")
            for sql, params in operation.statements:
                parts = sql.split("%s")
                rendered = parts[0] + "".join(
                    self._literal(value) + part for value, part in zip(params, parts[1:], strict=True)
                )
                lines.append(f"{rendered};")
            lines.append("commit;")
        script.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return script


def debezium_postgres_schemas(
    topic: str, value_fields: list[dict[str, Any]], key_type: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Key and envelope schemas shaped like Debezium's Postgres ones, for a table keyed by ``id`` of
    Avro type ``key_type`` whose columns are ``value_fields`` (Avro fields, ``id`` first)."""
    value = {"type": "record", "name": "Value", "fields": value_fields}
    source = {
        "type": "record",
        "name": "Source",
        "namespace": "io.debezium.connector.postgresql",
        "fields": [
            {"name": "version", "type": "string"},
            {"name": "connector", "type": "string"},
            {"name": "name", "type": "string"},
            {"name": "ts_ms", "type": "long"},
            {"name": "snapshot", "type": ["string", "null"], "default": "false"},
            {"name": "db", "type": "string"},
            {"name": "sequence", "type": ["null", "string"], "default": None},
            {"name": "schema", "type": "string"},
            {"name": "table", "type": "string"},
            {"name": "txId", "type": ["null", "long"], "default": None},
            {"name": "lsn", "type": ["null", "long"], "default": None},
        ],
    }
    envelope = {
        "type": "record",
        "name": "Envelope",
        "namespace": topic,
        "fields": [
            {"name": "before", "type": ["null", value], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "source", "type": source},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
        ],
    }
    key = {"type": "record", "name": "Key", "namespace": topic, "fields": [{"name": "id", "type": key_type}]}
    return key, envelope


_SYNTHETIC_FIELDS: list[dict[str, Any]] = [  # (id, name, ratio)
    {"name": "id", "type": "int"},
    {"name": "name", "type": ["null", "string"], "default": None},
    {
        "name": "ratio",
        "type": [
            "null",
            {
                "type": "record",
                "name": "VariableScaleDecimal",
                "namespace": "io.debezium.data",
                "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
                "connect.name": "io.debezium.data.VariableScaleDecimal",
            },
        ],
        "default": None,
    },
]


class SyntheticTopic:
    """A Kafka topic of Debezium-shaped Postgres change events written by the test itself.

    For bad-input tests: good events are Avro-encoded with schemas registered in the stack's registry
    (Confluent framing), and any raw bytes can be put between them.  ``registry_url`` and ``auth``
    register them elsewhere (the secured registry, with its basic credentials).
    """

    def __init__(
        self,
        stack: LocalStack,
        prefix: str,
        schema: str = "s",
        table: str = "t",
        registry_url: str | None = None,
        auth: tuple[str, str] | None = None,
    ) -> None:
        self.stack = stack
        self.registry_url = registry_url or stack.registry.confluent_url
        self.auth = auth
        self.prefix, self.schema, self.table = prefix, schema, table
        self.topic = f"{prefix}.{schema}.{table}"
        self.key_schema, self.value_schema = debezium_postgres_schemas(self.topic, _SYNTHETIC_FIELDS, "int")
        self.key_id = self._register(f"{self.topic}-key", self.key_schema)
        self.value_id = self._register(f"{self.topic}-value", self.value_schema)
        self.lsn = 1_000_000
        self.producer = Producer({"bootstrap.servers": stack.kafka.address()})

    def _register(self, subject: str, schema: dict[str, Any]) -> int:
        response = requests.post(
            f"{self.registry_url}/subjects/{subject}/versions",
            json={"schema": json.dumps(schema)},
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            timeout=10,
            auth=self.auth,
        )
        response.raise_for_status()
        schema_id: int = response.json()["id"]
        return schema_id

    def _frame(self, schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        schemaless_writer(out, parse_schema(stash_logical_types(schema)), record)
        return encode_frame(schema_id, out.getvalue())

    def key(self, key: int) -> bytes:
        """The framed key of ``key``."""
        return self._frame(self.key_id, self.key_schema, {"id": key})

    def change(
        self,
        op: str,
        key: int,
        name: str | None = None,
        ratio: tuple[int, int] | None = None,
        *,
        before: bool = False,
    ) -> bytes:
        """The framed value of an ``op`` change of row ``key`` (``ratio`` is (unscaled, scale)); ``before``:
        an update carries its before image (REPLICA IDENTITY FULL), with the key unchanged."""
        self.lsn += 100
        row = {
            "id": key,
            "name": name,
            "ratio": None
            if ratio is None
            else {"scale": ratio[1], "value": ratio[0].to_bytes(16, "big", signed=True)},
        }
        source = {
            "version": "3.5.0.Final",
            "connector": "postgresql",
            "name": self.prefix,
            "ts_ms": int(time.time() * 1000),
            "snapshot": "false",
            "db": "app",
            "sequence": f'["{self.lsn - 50}","{self.lsn}"]',
            "schema": self.schema,
            "table": self.table,
            "txId": 1,
            "lsn": self.lsn,
        }
        value = {
            "before": row if op == "d" or (before and op == "u") else None,
            "after": None if op == "d" else row,
            "source": source,
            "op": op,
            "ts_ms": source["ts_ms"],
        }
        return self._frame(self.value_id, self.value_schema, value)

    def send(self, messages: Sequence[tuple[bytes | None, bytes | None]]) -> None:
        """Produce (key, value) messages in order to partition 0 and wait until they are written."""
        for key, value in messages:
            self.producer.produce(self.topic, key=key, value=value, partition=0)
        assert self.producer.flush(30) == 0
