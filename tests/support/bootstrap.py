"""Helpers for the bootstrap tests: a throwaway source database, onboarding, a concurrent writer, checks.

Each test module gets its own database on the stack's primary (replicated to the read replica), a
source with a unique name, and removes its connectors, slots and database at the end.  Tables are
onboarded with the real ``cdc-lake onboard`` (so they start PENDING_BOOTSTRAP with a streaming
Debezium connector), bootstrapped, and compared with the primary row for row after the applier caught up.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import psycopg
import pymysql
from psycopg import sql
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType

from cdc_lake.apply.runner import ApplyRunner
from cdc_lake.catalog.entry import catalog_table_name
from cdc_lake.config import Config, load_config
from cdc_lake.connect.client import KafkaConnectClient, connector_failure
from cdc_lake.decode.registry import registry_client
from cdc_lake.exceptions import SchemaRegistryError
from cdc_lake.hudi.timeline import meta_client
from cdc_lake.hudi.writer import read_table
from cdc_lake.lake.target import target_for
from cdc_lake.sources import engine_for
from cdc_lake.sources.snapshot import SnapshotSource
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.postgres import PostgresServer
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.handoff import HandoffWait, SnapshotPoint, wait_until_streamed
from cdc_lake_bootstrap.progress import COMMIT_RUN
from support.common import PASSWORD_REF, cli_run, suffix, wait_until, write_config_in
from support.compare import assert_rows_equal
from support.onboard import delete_connectors, of_source
from support.second_reader import s3_storage_options, second_reader_rows
from support.trino_reader import drop_entries, mark_read_by_trino, trino_rows

MOVE_GAP = 10_000_000
"""Key moves and inserts by the writer use ids above this, far from the initial rows."""


@dataclass
class SourceDb:
    """A database of this test run on the stack's primary, and the source that names it."""

    engine: str
    stack: LocalStack
    database: str
    suffix: str
    server_id: int = 0
    postgres: PostgresServer | None = None
    """The Postgres server its connections go to (None: the stack's primary); a failover test points a
    copy at the promoted replica."""

    @property
    def source(self) -> str:
        """The source name in the config (also the topic prefix)."""
        return f"bts_{self.engine[:2]}_{self.suffix}"

    def schema_of(self, table: str) -> str:
        """``schema.table`` as the config names it."""
        return f"public.{table}" if self.engine == "postgres" else f"{self.database}.{table}"

    def qualified(self, table: str) -> str:
        """``source.schema.table``."""
        return f"{self.source}.{self.schema_of(table)}"

    def connect_pg(self) -> psycopg.Connection[tuple[Any, ...]]:
        """A connection to the Postgres primary (autocommit off)."""
        return (self.postgres or self.stack.postgres_primary).connect(self.database)

    def connect_maria(self) -> pymysql.connections.Connection[Any]:
        """A connection to the MariaDB primary in this database (autocommit off)."""
        conn = self.stack.mariadb_primary.connect(self.database)
        conn.autocommit(False)
        return conn

    def execute(self, *statements: str) -> None:
        """Run statements on the primary and commit, as one transaction."""
        self.execute_transactions([statements])

    def execute_transactions(self, transactions: Sequence[Sequence[str]]) -> None:
        """Run each transaction's statements on the primary and commit it, on one connection."""
        if self.engine == "postgres":
            with self.connect_pg() as conn:
                for statements in transactions:
                    with conn.transaction():
                        for statement in statements:
                            conn.execute(statement.encode())
            return
        conn = self.connect_maria()
        try:
            for statements in transactions:
                with conn.cursor() as cur:
                    for statement in statements:
                        cur.execute(statement)
                conn.commit()
        finally:
            conn.close()

    def rows(self, table: str, key: Sequence[str]) -> list[dict[str, Any]]:
        """Every row of ``table`` on the primary, ordered by key."""
        order = ", ".join(key)
        if self.engine == "postgres":
            with self.connect_pg() as conn:
                cur = conn.execute(f"select * from public.{table} order by {order}")  # type: ignore[arg-type]
                names = [d.name for d in cur.description or ()]
                return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        conn = self.connect_maria()
        try:
            with conn.cursor() as cur:
                cur.execute(f"select * from `{table}` order by {order}")
                names = [d[0] for d in cur.description or ()]
                return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        finally:
            conn.close()

    def source_config(self, tables: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
        """The config entry of this source with ``tables`` (names without the schema part)."""
        ports = self.stack.layout.ports
        named = [{**t, "name": self.schema_of(t["name"])} for t in tables]
        if self.engine == "postgres":
            primary = {
                "port": ports.postgres_primary,
                "database": self.database,
                "user": "cdc",
                "password": PASSWORD_REF,
            }
            replica: dict[str, Any] = {**primary, "port": ports.postgres_replica}
            # Heartbeats every 0.5 s (the product's default 2 s): on an idle table each wait for Debezium
            # past a position (the hand-off, ``wait_streamed``) waits for a heartbeat's offset, committed
            # about 0.7 s after the position then against 1.7 s (docs/benchmarks.md, "Debezium's poll
            # interval").
            entry: dict[str, Any] = {"engine": "postgres", "primary": primary, "replica": replica}
            entry["heartbeat_interval_seconds"] = 0.5
        else:
            primary = {"port": ports.mariadb_primary, "user": "cdc", "password": PASSWORD_REF}
            replica = {**primary, "port": ports.mariadb_replica}
            entry = {"engine": "mariadb", "server_id": self.server_id, "primary": primary, "replica": replica}
        return {**entry, "tables": named, **overrides}


def drop_catalog_entries(db: SourceDb) -> None:
    """Drop the metastore entries the product registered for ``db``'s tables (:func:`write_db_config`'s
    database ``lake_<engine>``), through this process's Spark JVM (a test whose process never started
    Spark, its verbs all subprocesses, leaves them: the metastore's client lives in that JVM)."""
    context = SparkContext._active_spark_context
    if context is not None:
        prefix = catalog_table_name(f"{db.source}.")
        drop_entries(context._jvm, db.stack, f"lake_{db.engine}", lambda name: name.startswith(prefix))


@contextmanager
def postgres_db(stack: LocalStack) -> Iterator[SourceDb]:
    """A fresh Postgres database; its connectors, slots and the database are dropped afterwards."""
    db = SourceDb("postgres", stack, f"bts_{(unique := suffix())}", unique)
    with stack.postgres_primary.connect() as admin:
        admin.autocommit = True
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(db.database)))
    wait_for_replica_database(stack, db.database)
    try:
        yield db
    finally:
        delete_connectors(stack, of_source(db.source))
        drop_catalog_entries(db)
        with stack.postgres_primary.connect() as admin:
            admin.autocommit = True
            drop_released_slots(admin, unique)
            admin.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(db.database)))


def wait_for_replica_database(stack: LocalStack, database: str, timeout: float = 60) -> None:
    """Wait until the streaming replica replayed ``create database``: onboarding's preflight connects
    to the replica's copy of the database, which lags the primary by a moment."""
    query = "select 1 from pg_database where datname = %s"
    with stack.postgres_replica.connect() as replica:
        wait_until(
            lambda: replica.execute(query, (database,)).fetchone() is not None,
            timeout,
            f"the replica to replay create database {database}",
        )


def drop_released_slots(
    admin: psycopg.Connection[tuple[Any, ...]], fragment: str, timeout: float = 60
) -> None:
    """Drop the replication slots whose name contains ``fragment``, each once its (deleted) connector
    released it, waiting up to ``timeout`` seconds for them all."""
    deadline = time.monotonic() + timeout
    while True:
        slots = admin.execute(
            "select slot_name, active from pg_replication_slots where slot_name like %s", (f"%{fragment}%",)
        ).fetchall()
        for name, active in slots:
            if not active:
                admin.execute("select pg_drop_replication_slot(%s)", (name,))
        if all(not active for _, active in slots) or time.monotonic() > deadline:
            return
        time.sleep(1)


@contextmanager
def mariadb_db(stack: LocalStack) -> Iterator[SourceDb]:
    """A fresh MariaDB database; its connectors and the database are dropped afterwards."""
    unique = suffix()
    db = SourceDb("mariadb", stack, f"bts_{unique}", unique, server_id=random.randint(100_000, 4_000_000_000))
    with stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"create database `{db.database}`")
    try:
        yield db
    finally:
        delete_connectors(stack, of_source(db.source))
        drop_catalog_entries(db)
        with stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"drop database if exists `{db.database}`")


def write_db_config(
    directory: Path,
    db: SourceDb,
    tables: list[dict[str, Any]],
    lake: str,
    source_settings: dict[str, Any] | None = None,
    **sections: Any,
) -> Path:
    """A config file in ``directory`` with its own SQLite state store, the lake at ``lake``, and ``db``
    (with ``source_settings`` added to its source entry).  Unless ``catalog`` is given, its tables are
    registered in the stack's Hive Metastore (database ``lake_<engine>``), so that
    :func:`assert_lake_equals_source` reads them through Trino too."""
    stack = db.stack
    lake_section: dict[str, Any] = {"base_path": lake}
    if lake.startswith("s3a://"):
        creds = stack.layout.credentials
        lake_section["s3"] = {
            "endpoint": stack.object_store.endpoint,
            "region": "us-east-1",
            "access_key": creds.s3_access_key,
            "secret_key": creds.s3_secret_key,
        }
    defaults: dict[str, Any] = {
        "lake": lake_section,
        "kafka": {"bootstrap_servers": stack.kafka.address()},
        "schema_registry": {"url": stack.registry.confluent_url},
        "kafka_connect": {"url": stack.connect.url},
        "bootstrap": {"replica_delay_seconds": 2, "replica_wait_timeout_seconds": 120},
        "catalog": {"hive": {"uri": stack.hive_metastore.uri, "database": f"lake_{db.engine}"}},
    }
    source = db.source_config(tables, **(source_settings or {}))
    return write_config_in(directory, {db.source: source}, **{**defaults, **sections})


def onboard(config: Path, source: str) -> None:
    """Onboard ``source`` for real (connectors streaming, tables PENDING_BOOTSTRAP)."""
    result = cli_run(config, "onboard", source)
    assert result.exit_code == 0, result.stderr or result.output


def state_of(config: Config, table: str) -> TableState:
    """The lifecycle state of ``table``."""
    with StateStore.open(config.state_store.url) as store:
        return store.require_table(table).state


@dataclass
class ChangeWriter:
    """Inserts, updates, deletes, deletes-and-re-inserts and key moves on the primary, in a thread.

    Every operation touches a random key among the first ``initial`` ids or the ids it created itself;
    a transaction holds one to four operations.  It stops after ``max_transactions`` or when stopped.
    """

    db: SourceDb
    table: str
    initial: int
    max_transactions: int = 3000
    pause: float = 0.002
    seed: int = 11
    new_ids_from: int = MOVE_GAP
    """Where the ids it inserts and moves keys to start (a second writer on a table takes others)."""
    operations: tuple[str, ...] = ("insert", "update", "update", "delete", "reinsert", "move")
    """The operations it draws from (a repeated one more often)."""
    transactions: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def start(self) -> ChangeWriter:
        """Start writing in a background thread."""
        self._thread = threading.Thread(target=self._run, name="change-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the running transaction and re-raise what the thread raised."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self.error is not None:
            raise self.error

    def _statements(self, rng: random.Random, next_id: list[int]) -> list[tuple[str, tuple[Any, ...]]]:
        pg = self.db.engine == "postgres"
        table = f"public.{self.table}" if pg else f"`{self.table}`"
        upsert = "insert into {t} (id, grp, val, amount, updated, flag) values (%s, %s, %s, %s, %s, %s)"
        insert = upsert + (" on conflict do nothing" if pg else "")
        if not pg:
            insert = insert.replace("insert into", "insert ignore into")
        statements: list[tuple[str, tuple[Any, ...]]] = []
        for _ in range(rng.randint(1, 4)):
            old = (
                rng.randint(1, self.initial)
                if rng.random() < 0.8
                else rng.randint(self.new_ids_from, max(self.new_ids_from, next_id[0]))
            )
            now = dt.datetime(2025, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**13))
            values = (
                rng.randint(0, 9),
                f"w{rng.random():.6f}",
                Decimal(rng.randint(-(10**8), 10**8)) / 100,
                now,
                rng.random() < 0.5,
            )
            op = rng.choice(self.operations)
            self.ops[op] = self.ops.get(op, 0) + 1
            if op == "insert":
                next_id[0] += 1
                statements.append((insert.format(t=table), (next_id[0], *values)))
            elif op == "update":
                columns = "grp = %s, val = %s, amount = %s, updated = %s, flag = %s"
                statements.append((f"update {table} set {columns} where id = %s", (*values, old)))
            elif op == "delete":
                statements.append((f"delete from {table} where id = %s", (old,)))
            elif op == "reinsert":
                statements.append((f"delete from {table} where id = %s", (old,)))
                statements.append((insert.format(t=table), (old, *values)))
            else:
                next_id[0] += 1
                statements.append((f"update {table} set id = %s where id = %s", (next_id[0], old)))
        return statements

    def _run(self) -> None:
        rng = random.Random(self.seed)
        next_id = [self.new_ids_from]
        try:
            if self.db.engine == "postgres":
                with self.db.connect_pg() as conn:
                    while not self._stop.is_set() and self.transactions < self.max_transactions:
                        with conn.transaction():
                            for statement, params in self._statements(rng, next_id):
                                conn.execute(statement, params)  # type: ignore[arg-type]
                        self.transactions += 1
                        time.sleep(self.pause)
                return
            conn = self.db.connect_maria()
            try:
                while not self._stop.is_set() and self.transactions < self.max_transactions:
                    with conn.cursor() as cur:
                        for statement, params in self._statements(rng, next_id):
                            cur.execute(statement, params)
                    conn.commit()
                    self.transactions += 1
                    time.sleep(self.pause)
            finally:
                conn.close()
        except BaseException as exc:  # surfaced by stop()
            self.error = exc


def wait_streamed(config: Config, table: str, timeout: float = 120.0) -> str:
    """Wait until Debezium has committed offsets past the primary's position now (all changes so far);
    the hand-off's sentence saying how it saw that."""
    source, entry = config.table(table)
    engine = cast(SnapshotSource, engine_for(source))
    point = SnapshotPoint(engine.current_position(), engine.primary_clock_ms())
    prefix = source.topic_prefix or source.name
    wait = HandoffWait.of(engine, prefix, timeout)
    with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
        how = wait_until_streamed(table, entry.name, point, wait, connect)
    assert how.startswith("Debezium"), how
    return how


def apply_until_live(spark: SparkSession, config: Config, table: str, timeout: float = 600.0) -> None:
    """Let Debezium stream every change made so far, then apply ``table`` until it is LIVE and idle."""
    wait_streamed(config, table)
    source, entry = config.table(table)
    target = target_for(config, source, entry)
    deadline = time.monotonic() + timeout
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config)
        while True:
            outcome = runner.catch_up(target)
            assert outcome.error is None, outcome.error
            if store.require_table(table).state is TableState.LIVE and outcome.offsets == 0:
                return
            assert time.monotonic() < deadline, f"{table} not LIVE after {timeout:.0f}s"


def assert_lake_equals_source(
    spark: SparkSession,
    config: Config,
    db: SourceDb,
    table: str,
    key: Sequence[str] = ("id",),
    base_path: str | None = None,
    *,
    read_optimized: bool = True,
) -> int:
    """The lake table (at ``base_path``, default the configured one) holds exactly the primary's rows,
    read by Spark+Hudi and by the second reader (``support.second_reader``), and by Trino through the
    catalog entry when the config registers one in ``catalog.hive`` (``support.trino_reader``), every
    column compared (JSON texts parsed), duplicate keys counted.  The catalog holds published tables
    only (LIVE, at their current copy's path: the applier registers them), so Trino reads those; a
    table still catching up, or a copy not switched in, has no entry by design.  Of a MERGE_ON_READ
    table (tier 0's layout) Trino, which reads base files only, must equal Spark's read-optimized view;
    ``read_optimized`` false: no Trino read at all."""
    qualified = db.qualified(table)
    base_path = base_path or config.lake.table_base_path(qualified)
    source = db.rows(table, key)
    lake_frame = read_table(spark, base_path)
    types = {f.name: f.dataType for f in lake_frame.schema.fields}
    columns = [name for name in types if not name.startswith("_cdc_") and name != "_hoodie_is_deleted"]
    lake = [row.asDict(recursive=True) for row in lake_frame.select(*columns).collect()]
    for row in source:
        assert set(row) == set(columns), f"source columns {sorted(row)} != lake {columns}"
    texts = [name for name in columns if isinstance(types[name], StringType)]
    compared: dict[str, Any] = {"json_columns": texts, "naive_utc_columns": columns}
    assert_rows_equal(qualified, source, lake, types, key, **compared)
    second = second_reader_rows(base_path, columns, s3_storage_options(config.lake.s3))
    assert_rows_equal(qualified, source, second, types, key, reader="second reader", **compared)
    if config.catalog.hive is not None and read_optimized and _published(config, qualified, base_path):
        trino = trino_rows(db.stack, config, qualified, columns)
        if str(meta_client(spark, base_path).getTableType()) == "MERGE_ON_READ":
            # Trino reads base files only (docs/hudi.md): what Spark's read-optimized view holds, which
            # the source is once every change is compacted.
            optimized = spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")
            frame = optimized.load(base_path).select(*columns)
            compacted = [row.asDict(recursive=True) for row in frame.collect()]
            assert_rows_equal(
                qualified, compacted, trino, types, key, reader="trino", expected_from_source=False
            )
        else:
            assert_rows_equal(qualified, source, trino, types, key, reader="trino", **compared)
        mark_read_by_trino(base_path)
    return len(source)


def _published(config: Config, table: str, base_path: str) -> bool:
    """Whether ``table`` is LIVE with its current copy at ``base_path``: what the catalog registers."""
    with StateStore.open(config.state_store.url) as store:
        info = store.get_table(table)
        live = info is not None and info.state is TableState.LIVE
        return live and store.current_copy(table).path == base_path


_KILLABLE = """
import sys
from pathlib import Path

from cdc_lake_bootstrap import partition_copy, partitions, run
from cdc_lake_bootstrap.progress import LineView
from cdc_lake.apply.runner import ApplyRunner
from cdc_lake.config import load_config

partitions.SINGLE_PARTITION_ROWS = 1000
partitions.ROWS_PER_PARTITION = 5000
partition_copy.PARTITIONS_PER_COMMIT_PER_SLOT = 1
config = load_config(Path(sys.argv[1]))
run.bootstrap_tables(
    config, run.BootstrapRequest(tables=(sys.argv[2],)), LineView(print), ApplyRunner.for_config
)
"""


def commit_runs(config_path: Path, table: str) -> list[list[int]]:
    """The plan partitions of every bootstrap commit of ``table`` recorded so far."""
    with StateStore.open(load_config(config_path).state_store.url) as store:
        return [run.detail["partitions"] for run in store.list_runs(table) if run.command == COMMIT_RUN]


def kill_after_first_commit(
    config_path: Path,
    table: str,
    timeout: float = 300.0,
    script: str = _KILLABLE,
    argument: str | None = None,
) -> list[list[int]]:
    """Run ``script`` (default: bootstrap ``table`` with small partitions) in a process of its own, with
    the config path and ``argument`` (default ``table``), and SIGKILL it after ``table``'s first commit.

    Returns the commits recorded when it died.
    """
    log_path = config_path.with_name(f"killed-{table}.log")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", script, str(config_path), argument or table],
            env={**os.environ, "PYTHONPATH": str(Path.cwd())},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    try:
        while not commit_runs(config_path, table):
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-3000:]
                raise AssertionError(f"the killable process exited with {process.returncode}:\n{tail}")
            assert time.monotonic() < deadline, f"no commit of {table} within {timeout:.0f}s"
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return commit_runs(config_path, table)


def wait_for_schema(config: Config, table: str, timeout: float = 240.0) -> None:
    """Wait until Debezium has registered the value schema of ``table``'s topic.

    It stops at once when one of the source's connectors FAILED, and a timeout names the connectors'
    states, so a run that fails here says whether Debezium stopped or only did not get there.
    """
    source, entry = config.table(table)
    subject = f"{target_for(config, source, entry).topic}-value"
    registry = registry_client(config)
    deadline = time.monotonic() + timeout
    with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
        names = [name for name in connect.list_connectors() if of_source(source.name)(name)]
        while True:
            try:
                registry.latest(subject)
                return
            except SchemaRegistryError:
                failure = connector_failure(connect, names)
                assert failure is None, f"no schema registered for {subject}: {failure}"
                if time.monotonic() > deadline:
                    states = ", ".join(f"{name}: {connect.status(name).describe()}" for name in names)
                    waited = f"no schema for {subject} in {timeout:.0f}s"
                    raise AssertionError(f"{waited}; connectors: {states or 'none'}") from None
                time.sleep(1)
