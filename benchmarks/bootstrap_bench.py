"""Bootstrap throughput on one table of the local stack: three ways of getting it into the lake, one run.

(a) ``cdc-lake bootstrap``: watermark, replica wait, key-range partitions read in parallel from the
    read replica with Spark JDBC, Hudi bulk_insert, hand-off (the command's wall time);
(b) one unpartitioned JDBC read of the same replica, converted and bulk-inserted the same way;
(c) Debezium's own initial snapshot (``snapshot.mode=initial``) through Kafka, applied while it is still
    producing by the ``run`` service (``service_for``, 4 workers, the table on tier 0: a batch starts as
    soon as the previous one ends), timed from the connector's registration until the last snapshot
    event is committed to the lake.  This is the fair arm: production applies a snapshot as it arrives.
    (An earlier version waited for the whole snapshot in Kafka before applying; it only added the wait.)

Each lake table's row count is checked against the source's, and (b)'s and (c)'s content against (a)'s
on the source columns, so no figure comes from an incomplete table (exit 1 otherwise).

Each writes its own Hudi table (same index, type and spec) from the same source table.  Run it with
the stack up (``cdc-lake stack up``)::

    .venv/bin/python benchmarks/bootstrap_bench.py --rows 1000000 [--engine postgres|mariadb]
        [--lake s3a://lake/bench] [--json results.json]

It creates a database ``bench_<suffix>`` on the primary and a source for it, and drops both (and its
connectors and slots) at the end.  Figures are rows per second of wall time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import requests
import yaml
from click.testing import CliRunner
from psycopg import sql
from pyspark.sql import SparkSession

from cdc_lake.apply.commands import service_for
from cdc_lake.apply.runner import ApplyRunner, TableOutcome
from cdc_lake.cli.main import cli
from cdc_lake.config import Config, load_config
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.connect.render import ConnectorParams, render_connector
from cdc_lake.hudi.format import HudiFormat
from cdc_lake.hudi.writer import read_table
from cdc_lake.kafka.offsets import end_offsets
from cdc_lake.lake.schema import row_columns
from cdc_lake.lake.target import target_for
from cdc_lake.sources import engine_for
from cdc_lake.sources.snapshot import SnapshotSource
from cdc_lake.spark import get_spark
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import BootstrapPartition
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.lake_types import column_reads
from cdc_lake_bootstrap.progress import COMMIT_RUN, LineView
from cdc_lake_bootstrap.read import SnapshotQuery, snapshot_rows
from cdc_lake_bootstrap.run import BootstrapRequest, bootstrap_tables
from cdc_lake_bootstrap.write import write_group

PASSWORD_REF = "${CDC_LAKE_DB_PASSWORD:-cdc-lake-local}"
PASSWORD_ENV = "CDC_LAKE_DB_PASSWORD"
TABLE = "items"
RUN_WORKERS = 4
"""``cdc-lake run --parallel``'s default."""
SNAPSHOT_TIMEOUT = 3600.0


@dataclass
class Figure:
    """One way of bootstrapping the table: rows in the lake and the wall time it took."""

    method: str
    rows: int
    seconds: float
    detail: str
    base_path: str
    differing: int | None = None
    """Rows of (a)'s table missing here plus rows here that (a)'s lacks, by source columns (None: (a))."""

    @property
    def rows_per_second(self) -> float:
        """Rows per second of wall time."""
        return self.rows / self.seconds


@dataclass
class Bench:
    """The benchmark's database, source and config."""

    engine: str
    stack: LocalStack
    database: str
    source: str
    work: Path
    lake: str
    rows: int
    server_id: int

    @property
    def schema_table(self) -> str:
        return f"public.{TABLE}" if self.engine == "postgres" else f"{self.database}.{TABLE}"

    def source_entry(self, topic_prefix: str | None = None) -> dict[str, Any]:
        ports = self.stack.layout.ports
        table = {"name": self.schema_table}
        if self.engine == "postgres":
            primary = {
                "port": ports.postgres_primary,
                "database": self.database,
                "user": "cdc",
                "password": PASSWORD_REF,
            }
            entry: dict[str, Any] = {
                "engine": "postgres",
                "primary": primary,
                "replica": {**primary, "port": ports.postgres_replica},
            }
        else:
            primary = {"port": ports.mariadb_primary, "user": "cdc", "password": PASSWORD_REF}
            entry = {
                "engine": "mariadb",
                "server_id": self.server_id,
                "primary": primary,
                "replica": {**primary, "port": ports.mariadb_replica},
            }
        if topic_prefix:
            entry["topic_prefix"] = topic_prefix
        return {**entry, "tables": [table]}

    def write_config(
        self, name: str, sources: dict[str, dict[str, Any]], sections: dict[str, Any] | None = None
    ) -> Path:
        """The config of bench ``name``: its own state store and lake, the stack, ``sources`` and any other
        ``sections`` (``validation``, ``lake``'s keys added)."""
        stack = self.stack
        data: dict[str, Any] = {
            "state_store": {"url": f"sqlite:///{self.work / name / 'state.db'}"},
            "lake": {"base_path": f"{self.lake.rstrip('/')}/{name}"},
            "kafka": {"bootstrap_servers": stack.kafka.address()},
            "schema_registry": {"url": stack.registry.confluent_url},
            "kafka_connect": {"url": stack.connect.url},
            "bootstrap": {"replica_delay_seconds": 5},
            "sources": sources,
        }
        for section, settings in (sections or {}).items():
            data[section] = {**data.get(section, {}), **settings}
        if self.lake.startswith("s3a://"):
            creds = stack.layout.credentials
            data["lake"]["s3"] = {
                "endpoint": stack.object_store.endpoint,
                "region": "us-east-1",
                "access_key": creds.s3_access_key,
                "secret_key": creds.s3_secret_key,
            }
        path = self.work / name / "cdc-lake.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@contextmanager
def bench_database(engine: str, stack: LocalStack, rows: int, lake: str | None) -> Iterator[Bench]:
    """A database with the benchmark table of ``rows`` rows; dropped with its connectors afterwards."""
    unique = f"{random.getrandbits(32):08x}"
    work = Path(tempfile.mkdtemp(prefix="cdc-lake-bench-"))
    bench = Bench(
        engine,
        stack,
        f"bench_{unique}",
        f"bench_{unique}",
        work,
        lake or str(work / "lake"),
        rows,
        random.randint(100_000, 4_000_000_000),
    )
    _log(f"creating {bench.database} with {rows:,} rows on the {engine} primary")
    if engine == "postgres":
        with stack.postgres_primary.connect() as admin:
            admin.autocommit = True
            admin.execute(sql.SQL("create database {}").format(sql.Identifier(bench.database)))
        with stack.postgres_primary.connect(bench.database) as conn:
            conn.execute(
                f"create table public.{TABLE} (id bigint primary key, grp int not null, val text, "
                "amount numeric(12, 2), updated timestamp(6), flag boolean)"
            )
            conn.execute(
                f"insert into public.{TABLE} select g, g % 10, 'value-' || g, g / 7.0, "
                "timestamp '2024-01-01' + g * interval '1 second', g % 2 = 0 "
                f"from generate_series(1, {rows}) g"
            )
        with stack.postgres_primary.connect(bench.database) as conn:
            conn.autocommit = True
            conn.execute(f"vacuum analyze public.{TABLE}")
    else:
        with stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"create database `{bench.database}`")
            cur.execute(f"use `{bench.database}`")
            cur.execute(
                f"create table {TABLE} (id bigint primary key, grp int not null, val varchar(200), "
                "amount decimal(12, 2), updated datetime(6), flag boolean)"
            )
            cur.execute(
                f"insert into {TABLE} select seq, seq % 10, concat('value-', seq), seq / 7, "
                f"timestamp'2024-01-01 00:00:00' + interval seq second, seq % 2 = 0 from seq_1_to_{rows}"
            )
            conn.commit()
            cur.execute(f"analyze table {TABLE}")
    try:
        yield bench
    finally:
        _cleanup(bench)
        shutil.rmtree(work, ignore_errors=True)


def _cleanup(bench: Bench) -> None:
    url = bench.stack.connect.url
    for name in requests.get(f"{url}/connectors", timeout=10).json():
        if bench.source in name:
            requests.delete(f"{url}/connectors/{name}", timeout=30)
    if bench.engine == "postgres":
        with bench.stack.postgres_primary.connect() as admin:
            admin.autocommit = True
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                slots = admin.execute(
                    "select slot_name, active from pg_replication_slots where slot_name like %s",
                    (f"%{bench.source}%",),
                ).fetchall()
                for name, active in slots:
                    if not active:
                        admin.execute("select pg_drop_replication_slot(%s)", (name,))
                if all(not active for _, active in slots):
                    break
                time.sleep(1)
            admin.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(bench.database)))
    else:
        with bench.stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"drop database if exists `{bench.database}`")


def _cli(config: Path, *args: str) -> None:
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    if result.exit_code != 0:
        raise RuntimeError(f"cdc-lake {' '.join(args)} failed: {result.stderr or result.output}")


def _lake_rows(config: Config, base_path: str) -> int:
    return int(read_table(get_spark(config.spark, config.lake), base_path).count())


def differing_rows(spark: SparkSession, reference: str, base_path: str) -> int:
    """Rows of the ``reference`` lake table missing from ``base_path``'s plus the rows it has in excess,
    compared on the source columns (the metadata columns say how a row came, not what it holds)."""
    expected = read_table(spark, reference)
    columns = [f.name for f in row_columns(expected.schema).fields]
    expected = expected.select(*columns)
    actual = read_table(spark, base_path).select(*columns)
    return int(expected.exceptAll(actual).count() + actual.exceptAll(expected).count())


def partitioned_bootstrap(bench: Bench) -> Figure:
    """(a) ``cdc-lake bootstrap`` of the onboarded table."""
    config_path = bench.write_config("partitioned", {bench.source: bench.source_entry()})
    _cli(config_path, "onboard", bench.source)
    config = load_config(config_path)
    qualified = f"{bench.source}.{bench.schema_table}"
    get_spark(config.spark, config.lake)  # the JVM starts before the clock, as for (b)
    _log("(a) cdc-lake bootstrap")
    began = time.monotonic()
    [result] = bootstrap_tables(
        config, BootstrapRequest(tables=(qualified,)), LineView(_log), ApplyRunner.for_config
    )
    seconds = time.monotonic() - began
    base_path = config.lake.table_base_path(qualified)
    rows = _lake_rows(config, base_path)
    with StateStore.open(config.state_store.url) as store:
        commits = [r for r in store.list_runs(qualified) if r.command == COMMIT_RUN]
    copying = sum(float(r.detail["seconds"]) for r in commits)
    detail = (
        f"{result.partitions} partitions; reads and commits {copying:.1f}s = {rows / copying:,.0f} rows/s; "
        "the rest is watermark, replica wait, planning and the hand-off wait for Debezium"
    )
    return Figure("(a) cdc-lake bootstrap (partitioned)", rows, seconds, detail, base_path)


def warm_up(bench: Bench) -> None:
    """One small read and bulk_insert, so no method pays for the JVM's first JDBC and Hudi work."""
    _log("warming up the JVM (JDBC read and Hudi bulk_insert of 20,000 rows)")
    single_read(bench, "warm-up", "id <= 20000")


def single_read(bench: Bench, name: str = "single", predicate: str = "1 = 1") -> Figure:
    """(b) The same read and write with one JDBC partition (no predicates, one task)."""
    config_path = bench.write_config(name, {bench.source: bench.source_entry()})
    config = load_config(config_path)
    source, table = config.table(f"{bench.source}.{bench.schema_table}")
    engine = cast(SnapshotSource, engine_for(source))
    spark = get_spark(config.spark, config.lake)
    _log("(b) single unpartitioned JDBC read, bulk_insert")
    began = time.monotonic()
    shape = engine.table_shape(table.name, "replica")
    reads = column_reads(source.engine, shape, [c.name for c in shape.columns], engine.quote_identifier)
    query = SnapshotQuery(
        engine.quote_table(table.name),
        tuple(reads),
        tuple(engine.quote_identifier(r.name) for r in reads),
        shape.primary_key,
    )
    whole = [BootstrapPartition(0, predicate)]
    frame = snapshot_rows(
        spark, engine.jdbc_access("replica"), query, whole, config.bootstrap.fetch_size, "single", 0
    )
    target = target_for(config, source, table)
    with StateStore.open(config.state_store.url) as store:
        store.upsert_source(source.name, source.engine, [])
        store.upsert_table(target.qualified_name, source.name, 1, target.base_path)
        store.transition(target.qualified_name, TableState.BOOTSTRAPPING)
        watermark = store.save_watermark(
            target.qualified_name, topic=target.topic, offsets={}, ts_source_ms=0, source_position=None
        )
    write_group(HudiFormat(spark), target.spec(shape.primary_key), frame, watermark, [0], query.char_lengths)
    seconds = time.monotonic() - began
    rows = _lake_rows(config, target.base_path)
    return Figure("(b) single JDBC read (unpartitioned)", rows, seconds, "1 task", target.base_path)


class UntilApplied:
    """The ``run`` service's outcome callback: stops it when ``events`` offsets are applied or one fails."""

    def __init__(
        self, events: int, stop: Callable[[], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.events = events
        self.stop = stop
        self.clock = clock
        self.began = clock()
        self.applied = 0
        self.batches: list[tuple[int, float]] = []
        """Each committed batch's offsets and the seconds from the start to its commit."""
        self.error: str | None = None

    def __call__(self, outcome: TableOutcome) -> None:
        if outcome.error is not None:
            self.error = outcome.error
            self.stop()
            return
        if outcome.offsets:
            self.applied += outcome.offsets
            self.batches.append((outcome.offsets, self.clock() - self.began))
        if self.applied >= self.events:
            self.stop()


def debezium_snapshot(bench: Bench) -> Figure:
    """(c) A connector with ``snapshot.mode=initial`` on its own topic, applied by the ``run`` service while
    the snapshot is still producing, until every snapshot event is committed to the lake."""
    prefix = f"{bench.source}_snap"
    name = f"{bench.source}-debezium-snapshot"
    entry = bench.source_entry(topic_prefix=prefix)
    entry["tables"][0]["tier"] = 0  # applied continuously, as a tier-0 table under `run`
    config_path = bench.write_config("debezium", {prefix: entry})
    config = load_config(config_path)
    source, table = config.table(f"{prefix}.{bench.schema_table}")
    target = target_for(config, source, table)
    stack = bench.stack
    if bench.engine == "postgres":
        params = ConnectorParams(
            host="127.0.0.1",
            port=stack.layout.ports.postgres_primary,
            user="cdc",
            password_env=PASSWORD_ENV,
            topic_prefix=prefix,
            tables=[bench.schema_table],
            registry_url=stack.registry.base_url,
            database=bench.database,
            heartbeat_table="cdc_lake.heartbeat",
            engine_values={"slot_name": f"{prefix}_slot", "publication_name": f"{prefix}_pub"},
        )
        with stack.postgres_primary.connect(bench.database) as conn:
            conn.execute(f"create publication {prefix}_pub for table public.{TABLE}")  # type: ignore[arg-type]
    else:
        params = ConnectorParams(
            host="127.0.0.1",
            port=stack.layout.ports.mariadb_primary,
            user="cdc",
            password_env=PASSWORD_ENV,
            topic_prefix=prefix,
            tables=[bench.schema_table],
            registry_url=stack.registry.base_url,
            kafka_bootstrap=stack.kafka.address(),
            engine_values={"server_id": str(bench.server_id + 7)},
        )
    connector = {**render_connector(bench.engine, name, params), "snapshot.mode": "initial"}
    with StateStore.open(config.state_store.url) as store:
        store.upsert_source(source.name, source.engine, [name])
        store.upsert_table(target.qualified_name, source.name, 1, target.base_path)
        store.transition(target.qualified_name, TableState.BOOTSTRAPPING)
        store.transition(target.qualified_name, TableState.CATCHING_UP)
        get_spark(config.spark, config.lake)  # the JVM starts before the clock, as for (a) and (b)
        service = service_for(config, store, [target], workers=RUN_WORKERS)
        in_kafka: list[float] = []
        _log("(c) Debezium initial snapshot through Kafka, applied by the run service as it arrives")
        progress = UntilApplied(bench.rows, service.stop)
        began = progress.began
        KafkaConnectClient(stack.connect.url).create_or_update(name, connector)

        def snapshot_in_kafka() -> None:
            try:
                _wait(
                    lambda: sum(end_offsets(stack.kafka.address(), target.topic).values()) >= bench.rows,
                    SNAPSHOT_TIMEOUT,
                    "snapshot",
                )
            except RuntimeError as exc:
                progress.error = str(exc)
                service.stop()
                return
            in_kafka.append(time.monotonic() - began)
            _log(f"(c) {bench.rows:,} snapshot events in Kafka after {in_kafka[0]:.1f}s")

        watcher = threading.Thread(target=snapshot_in_kafka, name="snapshot-watch", daemon=True)
        watcher.start()
        service.run(progress)
        seconds = time.monotonic() - began
    if progress.error is not None:
        raise RuntimeError(f"(c) failed: {progress.error}")
    watcher.join()
    tail = seconds - in_kafka[0]
    detail = (
        f"snapshot into Kafka {in_kafka[0]:.1f}s, last row in the lake {tail:.1f}s later; "
        f"batches (offsets @ seconds): {', '.join(f'{n:,} @ {t:.0f}' for n, t in progress.batches)}"
    )
    rows = _lake_rows(config, target.base_path)
    return Figure("(c) Debezium snapshot, applied overlapped", rows, seconds, detail, target.base_path)


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not finish within {timeout:.0f}s")
        time.sleep(1)


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    """Run (a), (b) and (c) on one fresh table, print rows/s for each; 1 when a table differs from (a)'s."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--engine", choices=("postgres", "mariadb"), default="postgres")
    parser.add_argument("--lake", help="lake root (default: a local temporary directory)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    defaults = Config.default(Path.cwd())
    stack = LocalStack(defaults.stack)
    started, load_start = dt.datetime.now(tz=dt.UTC), _load()
    figures: list[Figure] = []
    with bench_database(args.engine, stack, args.rows, args.lake) as bench:
        warm_up(bench)
        for method in (partitioned_bootstrap, single_read, debezium_snapshot):
            figure = method(bench)
            rate = figure.rows_per_second
            _log(f"{figure.method}: {figure.rows:,} rows in {figure.seconds:.1f}s = {rate:,.0f} rows/s")
            if figures:
                spark = get_spark(defaults.spark, defaults.lake)
                figure.differing = differing_rows(spark, figures[0].base_path, figure.base_path)
                _log(f"{figure.method}: {figure.differing:,} rows differ from (a)'s table")
            figures.append(figure)
    load_end = _load()
    print(
        f"\n{args.engine}, {args.rows:,} rows, {os.cpu_count()} cores, started {started:%Y-%m-%d %H:%M} UTC, "
        f"load average {load_start} at the start, {load_end} at the end"
    )
    print(f"{'method':42} {'rows':>10} {'differ':>7} {'seconds':>9} {'rows/s':>10}  detail")
    for figure in figures:
        differ = "-" if figure.differing is None else f"{figure.differing:,}"
        numbers = f"{figure.rows:>10,} {differ:>7} {figure.seconds:>9.1f} {figure.rows_per_second:>10,.0f}"
        print(f"{figure.method:42} {numbers}  {figure.detail}")
    over_debezium = figures[0].rows_per_second / figures[2].rows_per_second
    over_single = figures[0].rows_per_second / figures[1].rows_per_second
    print(f"(a) is {over_debezium:.2f}x (c); (a) is {over_single:.2f}x (b)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "engine": args.engine,
                    "rows": args.rows,
                    "started": started.isoformat(timespec="seconds"),
                    "load_average": {"start": load_start, "end": load_end},
                    "figures": [asdict(f) | {"rows_per_second": f.rows_per_second} for f in figures],
                    "a_over_c": over_debezium,
                    "a_over_b": over_single,
                },
                indent=2,
            )
        )
    complete = all(f.rows == args.rows and not f.differing for f in figures)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
