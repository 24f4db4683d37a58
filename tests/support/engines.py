"""What differs per source engine in the behaviour suites, declared once per engine.

The behaviour modules (``test_*_behaviors.py``) take the ``engine`` fixture (tests/integration/conftest.py),
parametrized over :data:`STACK_ENGINES`, and ask it for everything engine-specific: the SQL dialect of a
test table, a throwaway database on the stack's primary (replicated to its replica), the replica's port,
and the messages the product gives for that engine.  A test that holds for every engine is written once;
behaviour that only one engine has (Postgres slots, publications and REPLICA IDENTITY; MariaDB server ids
and GTID positions) stays in the per-engine modules.

The product knows three engines (``cdc_lake.engines.ENGINE_NAMES``: postgres, mysql, mariadb), but the
local stack runs no MySQL server, so the suite runs over the two engines the stack provides: Postgres and
MariaDB (MySQL shares MariaDB's engine code, as a flavour).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pymysql
from psycopg import sql

from cdc_lake.stack.manager import LocalStack
from support.bootstrap import (
    SourceDb,
    drop_released_slots,
    mariadb_db,
    postgres_db,
    wait_for_replica_database,
)
from support.common import PASSWORD_REF, suffix
from support.onboard import connectors_of, delete_connectors


@dataclass(frozen=True)
class ApplyTable:
    """An engine's every-type table for the applier tests (``items``, keyed by ``id``, partitioned by
    ``region``): its DDL (``{table}`` and ``{schema}`` are quoted names), its columns, and a row maker
    (key, random source, version) giving a value for every column; every fifth row is null but key and
    region."""

    ddl: str
    columns: str
    row: Callable[[int, random.Random, int], tuple[object, ...]]
    json_columns: tuple[str, ...]
    naive_utc_columns: tuple[str, ...] = ()
    """Timestamps the driver returns naive in UTC (MariaDB TIMESTAMP)."""
    toast_column: str | None = None
    """A column the source stores out of line, whose unchanged value Debezium sends as a placeholder."""


@dataclass(frozen=True)
class StackEngine:
    """One source engine of the local stack, as the behaviour tests see it."""

    name: str
    items_ddl: tuple[str, ...]
    """Create ``{name}`` (id bigint key, grp, val, amount, updated, flag) with ``{rows}`` rows (``val``
    padded by ``{width}`` characters), analyzed."""
    aware_items_ddl: tuple[str, ...]
    """As :attr:`items_ddl` (no padding, not analyzed) with a time-zone-aware ``updated``: hudi-rs 0.5
    cannot read the ``timestamp_ntz`` a wall-clock timestamp becomes in the lake."""
    not_a_replica: str
    """What the bootstrap says of a "replica" that is the primary."""
    partitions_of_30k: tuple[int, ...] | None
    """The partition counts the bootstrap plans for 30 000 items rows (5000-row partitions), if fixed."""
    types_ddl: str
    """Create ``types``: every type the engine maps, keyed by ``id``."""
    type_rows: tuple[str, ...]
    """Insert rows ``{first}``..``{last}`` of ``types`` with a value in every column, and the all-null
    row ``{nulls}``."""
    type_changes: tuple[str, ...]
    """Updates of every kind of column and deletes of ``types`` rows 50..60."""
    apply_table: ApplyTable
    """The applier tests' every-type table."""

    def quoted(self, schema: str, table: str) -> str:
        """``schema.table`` quoted in the engine's dialect."""
        return f'"{schema}"."{table}"' if self.name == "postgres" else f"`{schema}`.`{table}`"

    def types(self, db: SourceDb, first: int, last: int, nulls: int) -> None:
        """Insert rows ``first``..``last`` and the all-null row ``nulls`` into ``types``."""
        db.execute(*(s.format(first=first, last=last, nulls=nulls) for s in self.type_rows))

    def __str__(self) -> str:
        return self.name

    def database(self, stack: LocalStack) -> AbstractContextManager[SourceDb]:
        """A fresh database on the primary, dropped with its connectors (and slots) afterwards."""
        return postgres_db(stack) if self.name == "postgres" else mariadb_db(stack)

    def aware_items(self, db: SourceDb, name: str, rows: int) -> None:
        """Create and fill the items table ``name`` with a time-zone-aware ``updated`` (hudi-rs readable)."""
        db.execute(*(s.format(name=name, rows=rows) for s in self.aware_items_ddl))

    def primary_port(self, stack: LocalStack) -> int:
        """The stack's primary server port of this engine."""
        ports = stack.layout.ports
        return ports.postgres_primary if self.name == "postgres" else ports.mariadb_primary

    def replica_port(self, stack: LocalStack) -> int:
        """The stack's replica server port of this engine."""
        ports = stack.layout.ports
        return ports.postgres_replica if self.name == "postgres" else ports.mariadb_replica

    def items(self, db: SourceDb, name: str, rows: int, width: int = 0) -> None:
        """Create and fill the items table ``name`` with ``rows`` rows on ``db``'s primary."""
        db.execute(*(s.format(name=name, rows=rows, width=width) for s in self.items_ddl))


REGIONS = ("eu", "us", "apac")


def _pg_big(key: int, version: int) -> str:
    """A text that Postgres stores out of line (TOAST, storage external): about 6 kB."""
    return "".join(f"{key:06d}-{version}-{i:04d}-toasted|" for i in range(300))


def _pg_row(key: int, rng: random.Random, version: int) -> tuple[object, ...]:
    if key % 5 == 0:
        return (key, rng.choice(REGIONS), *([None] * 26))
    return (
        key,
        rng.choice(REGIONS),
        rng.randint(-32768, 32767),
        rng.randint(-(2**31), 2**31 - 1),
        rng.randint(-(2**63), 2**63 - 1),
        rng.choice([1.5, -2.25, 0.1, 3.4e38]),
        rng.random() * 1e6,
        f"{rng.randint(-9999999999, 9999999999) / 100:.2f}",
        f"{rng.randint(-(10**12), 10**12)}.{rng.randint(0, 10**9):09d}",
        rng.random() < 0.5,
        f"name-{key}-{version}",
        f"c{key % 1000:03d}",
        "note with 'quotes' and ünïcode",
        _pg_big(key, version) if key % 3 == 0 else "short",
        bytes([key % 256, 0, 255]),
        f"{1900 + key % 200}-02-28",
        f"{key % 24:02d}:{key % 60:02d}:59.123456",
        f"2024-03-{1 + key % 28:02d} 12:34:56.654321",
        f"2024-03-{1 + key % 28:02d} 12:34:56.5+02",
        f"{key % 24:02d}:15:00.25+05:30",
        f"{key % 30} days 04:05:06.789",
        f"a0eebc99-9c0b-4ef8-bb6d-{key:012d}",
        json.dumps({"k": key, "list": [1, 2]}),
        json.dumps({"nested": {"v": version}}),
        f"<r><k>{key}</k></r>",
        rng.choice(["happy", "sad", "meh"]),
        ["a", f"b{key}", "with,comma"],
        [key, -key, 0],
    )


def _maria_row(key: int, rng: random.Random, version: int) -> tuple[object, ...]:
    if key % 5 == 0:
        return (key, rng.choice(REGIONS), *([None] * 24))
    return (
        key,
        rng.choice(REGIONS),
        rng.randint(-128, 127),
        rng.randint(-32768, 32767),
        rng.randint(-8388608, 8388607),
        rng.randint(-(2**31), 2**31 - 1),
        rng.randint(-(2**63), 2**63 - 1),
        rng.choice([0, 2**64 - 1, rng.randint(0, 2**64 - 1)]),
        f"{rng.randint(-(10**10), 10**10) / 100:.2f}",
        rng.choice([1.5, -2.25, 0.1]),
        rng.random() * 1e9,
        rng.randint(0, 1),
        rng.randint(0, 1),
        f"c{key:03d}",
        f"name-{key}-{version}",
        "note with 'quotes' and ünïcode" * (1 + key % 3),
        bytes([key % 256, 0, 255]),
        bytes([1, 2, key % 256]),
        f"{1900 + key % 200}-02-28",
        rng.choice(["-838:59:59", "12:34:56.5", "00:00:00"]),
        f"2024-03-{1 + key % 28:02d} 12:34:56.654321",
        f"2024-03-{1 + key % 28:02d} 01:02:03.5",
        1901 + key % 254,
        json.dumps({"k": key, "list": [1, 2]}),
        rng.choice(["happy", "sad", "meh"]),
        rng.choice(["a", "a,c", "", "a,b,c"]),
    )


POSTGRES = StackEngine(
    name="postgres",
    items_ddl=(
        "create table public.{name} (id bigint primary key, grp int not null, val text, "
        "amount numeric(12, 2), updated timestamp(6), flag boolean)",
        "insert into public.{name} select g, g % 10, 'v' || g || repeat('x', {width}), g / 7.0, "
        "timestamp '2024-01-01' + g * interval '1 second', g % 2 = 0 from generate_series(1, {rows}) g",
        "analyze public.{name}",
    ),
    aware_items_ddl=(
        "create table public.{name} (id bigint primary key, grp int not null, val text, "
        "amount numeric(12, 2), updated timestamptz(6), flag boolean)",
        "insert into public.{name} select g, g % 10, 'v' || g, g / 7.0, "
        "timestamp '2024-01-01' + g * interval '1 second', g % 2 = 0 from generate_series(1, {rows}) g",
    ),
    not_a_replica="is not a standby",
    partitions_of_30k=(6, 7),
    types_ddl="""
create type public.mood as enum ('happy', 'sad', 'meh');
create table public.types (
    id int primary key, si smallint, i integer, bi bigint, r real, dp double precision, amount numeric(12, 2),
    free numeric, wide numeric(50, 10), flag boolean, name varchar(40), code char(5), note text,
    data bytea, d date, t time(6), ts timestamp(6), tstz timestamptz, uid uuid, doc json, docb jsonb,
    mood public.mood, tags text[], nums int[]
);
""",
    type_rows=(
        """
insert into public.types
select g, (g % 30000)::smallint, g * 1000, g::bigint * 1000000000, g / 3.0, g / 7.0, g / 9.0,
       round(g / 11.0, 12), (g::numeric * 10^20) / 7, g % 2 = 0, 'name-' || g, 'c' || (g % 100),
       'note ''quoted'' ünï', decode(lpad(to_hex(g), 8, '0'), 'hex'), date '1900-02-28' + g,
       time '00:00:01.5' + g * interval '17 minutes',
       timestamp '2024-03-01 12:34:56.654321' + g * interval '1 hour',
       timestamptz '2024-03-01 10:00+02' + g * interval '1 day', gen_random_uuid(),
       json_build_object('k', g, 'list', json_build_array(1, 2)), jsonb_build_object('n', g),
       (array['happy', 'sad', 'meh'])[1 + g % 3]::public.mood, array['a', 'b' || g, 'with,comma'],
       array[g, -g, 0]
from generate_series({first}, {last}) g
""",
        "insert into public.types (id) values ({nulls})",
    ),
    apply_table=ApplyTable(
        ddl="""
create type {schema}.mood as enum ('happy', 'sad', 'meh');
create table {table} (
    id bigint primary key, region text not null, si smallint, i integer, bi bigint, r real,
    dp double precision, amount numeric(12, 2), free numeric, flag boolean, name varchar(40),
    code char(5), note text, big text, data bytea, d date, t time(6), ts timestamp(6), tstz timestamptz,
    tz timetz, dur interval, uid uuid, doc json, docb jsonb, x xml, mood {schema}.mood, tags text[],
    nums int[]
);
alter table {table} alter column big set storage external;
""",
        columns=(
            "id, region, si, i, bi, r, dp, amount, free, flag, name, code, note, big, data, d, t, ts, tstz, "
            "tz, dur, uid, doc, docb, x, mood, tags, nums"
        ),
        row=_pg_row,
        json_columns=("doc", "docb"),
        toast_column="big",
    ),
    type_changes=(
        "update public.types set amount = amount + 1, tags = array['x'], t = '23:59:59.999999' where id < 50",
        "delete from public.types where id between 50 and 60",
    ),
)
MARIADB = StackEngine(
    name="mariadb",
    items_ddl=(
        "create table {name} (id bigint primary key, grp int not null, val varchar(200), "
        "amount decimal(12, 2), updated datetime(6), flag boolean)",
        "insert into {name} select seq, seq % 10, concat('v', seq, repeat('x', {width})), seq / 7, "
        "timestamp'2024-01-01 00:00:00' + interval seq second, seq % 2 = 0 from seq_1_to_{rows}",
        "analyze table {name}",
    ),
    aware_items_ddl=(
        "create table {name} (id bigint primary key, grp int not null, val varchar(200), "
        "amount decimal(12, 2), updated timestamp(6) null, flag boolean)",
        "insert into {name} select seq, seq % 10, concat('v', seq), seq / 7, "
        "timestamp'2024-01-01 00:00:00' + interval seq second, seq % 2 = 0 from seq_1_to_{rows}",
    ),
    not_a_replica="is not a replica (SHOW SLAVE STATUS is empty)",
    partitions_of_30k=None,
    types_ddl=(
        "create table types (id int primary key, ti tinyint, flag tinyint(1), su smallint unsigned, "
        "mi mediumint, i int, iu int unsigned, bi bigint, bu bigint unsigned, amount decimal(12, 2), "
        "big decimal(30, 10), "
        "f float, d2 double, name varchar(40), code char(5), note text, e enum('a', 'b'), st set('x', 'y'), "
        "doc json, data blob, b bit(1), y year, dt date, dtm datetime(3), ts timestamp(6) null, t time(6))"
    ),
    type_rows=(
        "insert into types select seq, cast(seq as signed) % 100 - 50, seq % 2, seq % 60000, seq * 7, "
        "seq * 1000, seq * 4000000, seq * 1000000000, 18446744073709551615 - seq, seq / 9, "
        "seq * 12345.6789, seq / 4, seq / 7, "
        "concat('name-', seq), concat('c', seq % 100), 'note ''quoted'' ünï', if(seq % 2, 'a', 'b'), "
        "if(seq % 3, 'x,y', 'y'), json_object('k', seq), unhex(lpad(hex(seq), 8, '0')), seq % 2, "
        "1901 + seq % 200, "
        "date'1900-02-28' + interval seq day, timestamp'2024-03-01 12:34:56.654' + interval seq hour, "
        "timestamp'2024-03-01 10:00:00.123456' + interval seq day, "
        "if(seq % 2, time'-838:59:59.000000', time'00:00:01.5') + interval seq minute "
        "from seq_{first}_to_{last}",
        "insert into types (id) values ({nulls})",
    ),
    apply_table=ApplyTable(
        ddl="""
create table {table} (
    id bigint primary key, region varchar(8) not null, ti tinyint, si smallint, mi mediumint, i int,
    bi bigint, ubi bigint unsigned, amount decimal(12, 2), f float, dbl double, flag tinyint(1), b1 bit(1),
    code char(5), name varchar(40), note text, data blob, vb varbinary(16), d date, t time(6),
    dtm datetime(6), ts timestamp(6) null, y year, doc json, mood enum('happy', 'sad', 'meh'),
    tags set('a', 'b', 'c')
)
""",
        columns=(
            "id, region, ti, si, mi, i, bi, ubi, amount, f, dbl, flag, b1, code, name, note, data, vb, d, t, "
            "dtm, ts, y, doc, mood, tags"
        ),
        row=_maria_row,
        json_columns=("doc",),
        naive_utc_columns=("ts",),
    ),
    type_changes=(
        "update types set amount = amount + 1, t = '12:00:00.25', ts = null where id < 50",
        "delete from types where id between 50 and 60",
    ),
)
STACK_ENGINES: tuple[StackEngine, ...] = (POSTGRES, MARIADB)
"""The engines the local stack runs a primary and a replica of (no MySQL server: see the docstring)."""


ONBOARD_PG_SCHEMA = """
create schema shop;
create table shop.customers (id int primary key, name text);
create table shop.orders (id int primary key, amount numeric(10, 2));
create table shop.events (id int primary key, kind text);
create table shop.nopk (x int);
create table shop.keyless (code int not null unique, v int);
create table shop.nothing (id int primary key);
alter table shop.nothing replica identity nothing;
"""


@dataclass
class PgEnv:
    """An onboarding test module's database on the stack's Postgres primary, and the roles tests created."""

    stack: LocalStack
    database: str
    suffix: str
    roles: list[str] = field(default_factory=list)
    engine: StackEngine = POSTGRES
    not_a_replica: str = "is not a standby (pg_is_in_recovery() is false)"
    replica_unreachable: str = "replica: 127.0.0.1:1 unreachable:"
    wrong_password: tuple[str, ...] = ("primary connection:", 'password authentication failed for user "cdc"')

    def name(self, table: str) -> str:
        """A table of the database as the config names it (``orders``, ``nopk``: in schema ``shop``)."""
        return f"shop.{table}"

    def missing(self, table: str) -> str:
        """What onboarding says of the configured ``table`` (config name) the database does not have."""
        return f"tables: not found in database {self.database}: {table}"

    def connect(self, database: str | None = None) -> psycopg.Connection[tuple[Any, ...]]:
        return self.stack.postgres_primary.connect(database or self.database)

    def execute(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.connect() as conn:
            cursor = conn.execute(statement, params)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def source(self, tables: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
        ports = self.stack.layout.ports
        primary = {
            "port": ports.postgres_primary,
            "database": self.database,
            "user": "cdc",
            "password": PASSWORD_REF,
        }
        replica = {**primary, "port": ports.postgres_replica}
        return {"engine": "postgres", "primary": primary, "replica": replica, "tables": tables, **overrides}

    def slots(self, source: str) -> dict[str, bool]:
        rows = self.execute(
            "select slot_name::text, active from pg_replication_slots where slot_name like %s",
            (f"cdc_lake_{source}%",),
        )
        return {str(name): bool(active) for name, active in rows}

    def publications(self, source: str) -> dict[str, set[str]]:
        rows = self.execute(
            "select p.pubname::text, t.schemaname || '.' || t.tablename from pg_publication p "
            "left join pg_publication_tables t on t.pubname = p.pubname where p.pubname like %s",
            (f"cdc_lake_{source}%",),
        )
        found: dict[str, set[str]] = {}
        for name, table in rows:
            found.setdefault(str(name), set()).update([str(table)] if table else [])
        return found

    def assert_nothing_made(self, source: str) -> None:
        """No connector, replication slot or publication of ``source`` exists."""
        assert connectors_of(source) == []
        assert self.slots(source) == {}
        assert self.publications(source) == {}


@contextmanager
def pg_env(stack: LocalStack) -> Iterator[PgEnv]:
    """A database ``onb_<suffix>`` with the ``shop`` schema; dropped with its connectors, slots and roles."""
    unique = suffix()
    env = PgEnv(stack=stack, database=f"onb_{unique}", suffix=unique)
    with stack.postgres_primary.connect() as admin:
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(env.database)))
    wait_for_replica_database(stack, env.database)
    with env.connect() as conn:
        conn.execute(ONBOARD_PG_SCHEMA)  # type: ignore[arg-type]
    yield env
    delete_connectors(stack, lambda name: env.suffix in name)
    with stack.postgres_primary.connect() as admin:
        drop_released_slots(admin, env.suffix)
        admin.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(env.database)))
        for role in env.roles:
            admin.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role)))


@dataclass
class MariaEnv:
    """An onboarding test module's database on the stack's MariaDB primary, and the users tests created."""

    stack: LocalStack
    database: str
    suffix: str
    server_id: int
    users: list[str] = field(default_factory=list)
    engine: StackEngine = MARIADB
    not_a_replica: str = "replicates from nowhere (no replication status)"
    replica_unreachable: str = "replica: 127.0.0.1:1: cannot connect as cdc:"
    wrong_password: tuple[str, ...] = (
        "primary connection: primary 127.0.0.1:",
        "Access denied for user 'cdc'",
    )

    def name(self, table: str) -> str:
        """A table of the database as the config names it (``database.table``)."""
        return f"{self.database}.{table}"

    def missing(self, table: str) -> str:
        """What onboarding says of the configured ``table`` (config name) the database does not have."""
        return f"tables: not found, or not visible to cdc@%: {table}"

    def connect(self) -> pymysql.connections.Connection[Any]:
        return self.stack.mariadb_primary.connect(self.database)

    def execute(self, *statements: str) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def administer(self, *statements: str) -> None:
        """Run ``statements`` as the primary's root: users and grants are not the application user's."""
        with self.stack.mariadb_primary.root_connection() as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def source(self, tables: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
        """The source entry for ``tables`` named in config form (see :meth:`name`)."""
        ports = self.stack.layout.ports
        primary = {"port": ports.mariadb_primary, "user": "cdc", "password": PASSWORD_REF}
        replica = {**primary, "port": ports.mariadb_replica}
        return {
            "engine": "mariadb",
            "server_id": self.server_id,
            "primary": primary,
            "replica": replica,
            "tables": tables,
            **overrides,
        }

    def topic(self, source: str, table: str) -> str:
        return f"{source}.{self.database}.{table}"

    def assert_nothing_made(self, source: str) -> None:
        """No connector of ``source`` exists (MariaDB onboarding creates nothing on the server)."""
        assert connectors_of(source) == []


@contextmanager
def maria_env(stack: LocalStack) -> Iterator[MariaEnv]:
    """A database ``onb_<suffix>`` with four tables; dropped with its connectors and users."""
    unique = suffix()
    env = MariaEnv(
        stack=stack, database=f"onb_{unique}", suffix=unique, server_id=random.randint(100_000, 4_000_000_000)
    )
    with stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"create database `{env.database}`")
    env.execute(
        "create table products (id int primary key, sku varchar(20))",
        "create table inventory (id int primary key, quantity int)",
        "create table orders (id int primary key, amount decimal(10, 2))",
        "create table nopk (x int)",
    )
    yield env
    delete_connectors(stack, lambda name: env.suffix in name)
    with stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"drop database if exists `{env.database}`")
    env.administer(*(f"drop user if exists '{user}'@'%'" for user in env.users))


OnboardEnv = PgEnv | MariaEnv
"""An onboarding test database of either engine."""
