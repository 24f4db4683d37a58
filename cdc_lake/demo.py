"""The demo: the whole flow on the local stack, driven through the same commands an operator runs.

1. start the local stack;
2. create ``demo.orders`` on the Postgres primary and fill it;
3. ``cdc-lake onboard shop`` (checks, publication, Debezium connector);
4. ``cdc-lake bootstrap --source shop`` (parallel snapshot from the replica);
5. ``cdc-lake run`` in the background while a writer keeps inserting, updating and deleting,
   printing each table's freshness as ``status --json`` reports it;
6. stop the writer, let the applier catch up, stop it, compact the table (tier 0's layout is
   MERGE_ON_READ: Trino reads base files only) and compare the Hudi table with the source.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

from cdc_lake.config import Config, load_config
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.lake.format import format_facts, load_format
from cdc_lake.redaction import private_directory
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.service import DEMO_DATABASE, HOST

SOURCE = "shop"
TABLE = f"{SOURCE}.demo.orders"
STATUSES = ("new", "paid", "shipped", "returned")

CONFIG_TEMPLATE = """\
# Written by `cdc-lake demo`: the local stack's Postgres as source `shop`, a local lake registered in
# the stack's Hive Metastore (database `lake`; docs/operations.md queries it with Trino).
lake:
  base_path: {lake}
state_store:
  url: sqlite:///{state}
kafka:
  bootstrap_servers: {host}:{ports.kafka}
schema_registry:
  url: http://{host}:{ports.registry}/apis/ccompat/v7
kafka_connect:
  url: http://{host}:{ports.connect}
bootstrap:
  replica_delay_seconds: 2
catalog:
  hive:
    uri: thrift://{host}:{ports.hive_metastore}
    database: lake
stack:
  data_dir: {stack_dir}
sources:
  shop:
    engine: postgres
    primary:
      host: {host}
      port: {ports.postgres_primary}
      database: {database}
      user: cdc
      password: ${{CDC_LAKE_DB_PASSWORD:-cdc-lake-local}}
    replica:
      host: {host}
      port: {ports.postgres_replica}
      database: {database}
      user: cdc
      password: ${{CDC_LAKE_DB_PASSWORD:-cdc-lake-local}}
    tables:
      - name: demo.orders
        tier: 0
"""


class DemoError(CdcLakeError):
    """Raised when a demo step fails; names the step and the command's last output."""


@dataclass(frozen=True)
class DemoSettings:
    """How much the demo does."""

    seed_rows: int = 20_000
    stream_seconds: int = 60
    changes_per_second: int = 25


class DemoRun:
    """One run of the demo in ``work_dir`` (a fresh config, state store and lake every time)."""

    def __init__(self, stack_config: Config, work_dir: Path, say: Callable[[str], None]) -> None:
        self.stack = LocalStack(stack_config.stack)
        self.work_dir = work_dir.resolve()
        self.config_path = self.work_dir / "cdc-lake.yaml"
        self.say = say

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``cdc-lake --config <demo config> ARGS`` and echo the command."""
        argv = [sys.executable, "-m", "cdc_lake", "--config", str(self.config_path), *args]
        self.say(f"$ cdc-lake {' '.join(args)}")
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
            raise DemoError(f"`cdc-lake {' '.join(args)}` failed (exit {proc.returncode}):\n{tail}")
        return proc

    def connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        """A connection to the demo database on the primary."""
        return self.stack.postgres_primary.connect(DEMO_DATABASE)

    def reset(self) -> None:
        """Remove what an earlier demo left: its connector and slot, its table, its lake."""
        if self.config_path.exists():
            self.cli("offboard", SOURCE, "--drop-slot", check=False)
        with self.connect() as conn:
            conn.execute("drop schema if exists demo cascade")
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def write_config(self) -> None:
        """Make the work directory, private to its user (it holds the state store and the lake), and
        write the demo's config into it."""
        private_directory(self.work_dir)
        layout = self.stack.layout
        self.config_path.write_text(
            CONFIG_TEMPLATE.format(
                lake=self.work_dir / "lake",
                state=self.work_dir / "state.db",
                host=HOST,
                ports=layout.ports,
                database=DEMO_DATABASE,
                stack_dir=layout.data_dir,
            )
        )
        load_config(self.config_path)

    def prepare(self, settings: DemoSettings) -> None:
        """Write the config and create and fill the source table."""
        self.write_config()
        with self.connect() as conn:
            conn.execute("create schema demo")
            conn.execute(
                "create table demo.orders (id bigint primary key, customer text not null, "
                "amount numeric(10,2) not null, status text not null, updated_at timestamptz not null)"
            )
            conn.execute(
                "insert into demo.orders select g, 'customer-' || (g %% 997), (g %% 10000) / 100.0, "
                "(array['new','paid','shipped','returned'])[1 + g %% 4], now() "
                "from generate_series(1, %s) g",
                (settings.seed_rows,),
            )

    def write_changes(self, settings: DemoSettings, stop: threading.Event, counts: dict[str, int]) -> None:
        """Insert, update and delete at a steady rate until `stop` is set."""
        rng = random.Random(7)
        next_id = settings.seed_rows + 1
        with self.connect() as conn:
            while not stop.is_set():
                began = time.monotonic()
                for _ in range(settings.changes_per_second):
                    roll = rng.random()
                    if roll < 0.4:
                        conn.execute(
                            "insert into demo.orders values (%s, %s, %s, 'new', now())",
                            (
                                next_id,
                                f"customer-{rng.randrange(997)}",
                                Decimal(rng.randrange(100, 99999)) / 100,
                            ),
                        )
                        next_id += 1
                        counts["inserts"] += 1
                    elif roll < 0.9:
                        conn.execute(
                            "update demo.orders set status = %s, amount = amount + 1, updated_at = now() "
                            "where id = %s",
                            (rng.choice(STATUSES), rng.randrange(1, next_id)),
                        )
                        counts["updates"] += 1
                    else:
                        conn.execute("delete from demo.orders where id = %s", (rng.randrange(1, next_id),))
                        counts["deletes"] += 1
                stop.wait(max(0.0, 1.0 - (time.monotonic() - began)))

    def table_status(self) -> dict[str, Any]:
        """This table's entry of ``status --json``."""
        proc = self.cli("status", "--json")
        for entry in json.loads(proc.stdout):
            if entry["name"] == TABLE:
                return dict(entry)
        raise DemoError(f"status --json does not list {TABLE}")

    def source_summary(self) -> tuple[int, Decimal]:
        """Row count and amount total of the source table."""
        with self.connect() as conn:
            row = conn.execute("select count(*), coalesce(sum(amount), 0) from demo.orders").fetchone()
        assert row is not None
        return int(row[0]), Decimal(row[1])


def _format_freshness(entry: dict[str, Any]) -> str:
    seconds = entry.get("freshness_seconds")
    return "-" if seconds is None else f"{seconds:.1f}s"


def run_demo(
    stack_config: Config, work_dir: Path, settings: DemoSettings, say: Callable[[str], None]
) -> dict[str, Any]:
    """Run every step, printing what happens; raises DemoError at the first failing step.

    Returns what the last step compared (``demo --json`` prints it): the changes written, the source's
    and the lake's row counts and amount totals, the table's state and freshness, and where it all is.
    """
    demo = DemoRun(stack_config, work_dir, say)
    say("1. starting the local stack (first run installs everything; later runs take seconds)")
    began = time.monotonic()
    demo.stack.up(
        progress=lambda message: (
            None if message.startswith(("installing", "waiting")) else say(f"   {message}")
        )
    )
    say(f"   stack healthy after {time.monotonic() - began:.0f}s (see `cdc-lake stack status`)")
    say(f"2. creating demo.orders with {settings.seed_rows} rows on the Postgres primary")
    demo.reset()
    demo.prepare(settings)
    say("3. onboarding the source")
    demo.cli("onboard", SOURCE)
    say("4. bootstrapping from the read replica")
    demo.cli("bootstrap", "--source", SOURCE)
    say(f"5. streaming changes for {settings.stream_seconds}s while `cdc-lake run` applies them")
    counts = {"inserts": 0, "updates": 0, "deletes": 0}
    stop = threading.Event()
    writer = threading.Thread(target=demo.write_changes, args=(settings, stop, counts), daemon=True)
    run_log = (demo.work_dir / "run.log").open("w")
    runner = subprocess.Popen(
        [sys.executable, "-m", "cdc_lake", "--config", str(demo.config_path), "run"],
        stdout=run_log,
        stderr=subprocess.STDOUT,
        env={**os.environ},
    )
    writer.start()
    try:
        deadline = time.monotonic() + settings.stream_seconds
        while time.monotonic() < deadline:
            time.sleep(5)
            entry = demo.table_status()
            say(
                f"   {counts['inserts']} inserts, {counts['updates']} updates, "
                f"{counts['deletes']} deletes so far; "
                f"lake: state {entry['state']}, last commit {entry.get('last_commit') or '-'}, "
                f"freshness {_format_freshness(entry)}"
            )
            if runner.poll() is not None:
                raise DemoError(
                    f"`cdc-lake run` exited with {runner.returncode}; see {demo.work_dir / 'run.log'}"
                )
        stop.set()
        writer.join()
    finally:
        stop.set()
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=120)
        run_log.close()
    say("6. final catch-up and comparison")
    demo.cli("apply", "--once")
    say("   tier 0 is MERGE_ON_READ: compacting every change into base files,")
    say("   so that readers of base files only (Trino) see them too")
    demo.cli("compact", "--schedule")
    entry = demo.table_status()
    rows, total = demo.source_summary()
    lake_rows, lake_total = lake_summary(demo.config_path)
    lake_format = format_facts(load_config(demo.config_path).lake.format).name
    say(f"   source: {rows} rows, amount total {total}")
    where = f"{lake_format} table at {entry['lake_base_path']}"
    say(f"   lake:   {lake_rows} rows, amount total {lake_total} ({where})")
    say(f"   freshness {_format_freshness(entry)}, state {entry['state']}")
    if (rows, total) != (lake_rows, lake_total):
        raise DemoError(
            f"the lake differs from the source: {lake_rows} rows vs {rows}, {lake_total} vs {total}"
        )
    say(
        f"The lake equals the source. Query it: spark.read.format('{lake_format}')"
        f".load('{entry['lake_base_path']}')"
    )
    say(f"Config used: {demo.config_path}; try `cdc-lake --config {demo.config_path} status`.")
    return {
        "table": TABLE,
        "changes": dict(counts),
        "source": {"rows": rows, "amount_total": str(total)},
        "lake": {"rows": lake_rows, "amount_total": str(lake_total), "base_path": entry["lake_base_path"]},
        "state": entry["state"],
        "freshness_seconds": entry.get("freshness_seconds"),
        "config": str(demo.config_path),
    }


def lake_summary(config_path: Path) -> tuple[int, Decimal]:
    """Row count and amount total of the demo table in the lake, read with Spark and the lake format."""
    from cdc_lake.spark import get_spark

    config = load_config(config_path)
    spark = get_spark(config.spark, config.lake)
    df = load_format(spark, config.lake.format).read(config.lake.table_base_path(TABLE))
    df.createOrReplaceTempView("orders")
    row = spark.sql("select count(*) as n, coalesce(sum(amount), 0) as total from orders").collect()[0]
    return int(row["n"]), Decimal(row["total"])
