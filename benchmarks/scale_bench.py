"""Scale benchmark: the ``run`` service over many tables, and many tables bootstrapped in one command.

Run it with the stack up (``cdc-lake stack up``)::

    .venv/bin/python benchmarks/scale_bench.py many [--tables 200] [--busy 10] [--events 2000]
        [--seconds 120] [--json many.json]
    .venv/bin/python benchmarks/scale_bench.py bootstrap [--small 100] [--rows 1000000] [--parallel 4]
        [--json bootstrap.json]

``many``: ``--tables`` onboarded tables (Debezium-shaped Postgres topics written by the benchmark), of
which ``--busy`` are tier 0 and receive ``--events`` changes of a 2,000-row table up front and again at
the same rate for ``--seconds``; the idle ones are spread over tiers 0, 1 and 2 with empty topics.  The
``run`` service (``service_for``: 4 workers, 1 s poll, batched end offsets) applies them.  Figures: the
first cycle (service start until every busy table has applied its backlog), the later cycles (a wave of
changes to every busy table until all are applied), table steps and batched Kafka offset reads per
second, Spark jobs started by idle tables (must be 0), and the service's memory sampled every second
(driver Python RSS, JVM heap used).

``bootstrap``: one Postgres database with ``--small`` tables of 10 to 100 rows and one table of ``--rows``
rows, onboarded twice as two sources (two connectors and slots over the same tables); one is bootstrapped
with ``cdc-lake bootstrap --source`` (one table after another), the other with ``--parallel N``.  Figure:
the wall time of each command, Spark started before either.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests
import yaml
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from psycopg import sql
from pyspark.sql import SparkSession

from cdc_lake.apply.commands import service_for
from cdc_lake.apply.runner import TableOutcome
from cdc_lake.apply.table_applier import use_driver_python
from cdc_lake.cli.main import cli
from cdc_lake.config import Config, load_config
from cdc_lake.kafka.offsets import topic_watermarks
from cdc_lake.lake.target import select_targets
from cdc_lake.spark import get_spark
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.progress import COMMIT_RUN, RUN

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from apply_bench import produce_events
from support.apply import config_dict, record_catching_up
from support.common import write_and_load

KEYS = 2_000
PASSWORD_REF = "${CDC_LAKE_DB_PASSWORD:-cdc-lake-local}"


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class MemorySampler:
    """The service's memory once a second: driver Python RSS and JVM heap in use (maxima kept)."""

    def __init__(self, spark: SparkSession) -> None:
        self.runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()  # type: ignore[union-attr]
        self.python_rss_mb = 0.0
        self.jvm_heap_mb = 0.0
        self.jvm_heap_max_mb = float(self.runtime.maxMemory()) / 2**20
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            with open("/proc/self/statm") as statm:
                rss = int(statm.read().split()[1]) * resource.getpagesize() / 2**20
            heap = float(self.runtime.totalMemory() - self.runtime.freeMemory()) / 2**20
            self.python_rss_mb = max(self.python_rss_mb, rss)
            self.jvm_heap_mb = max(self.jvm_heap_mb, heap)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _applied(store: StateStore, table: str) -> int:
    return sum(store.get_applied_offsets(table).values())


def _wait_applied(store: StateStore, ends: dict[str, int], timeout: float) -> float:
    began = time.monotonic()
    while any(_applied(store, table) < end for table, end in ends.items()):
        if time.monotonic() - began > timeout:
            behind = {t: (_applied(store, t), e) for t, e in ends.items() if _applied(store, t) < e}
            raise RuntimeError(f"busy tables not applied within {timeout:.0f}s: {behind}")
        time.sleep(0.2)
    return time.monotonic() - began


def many(spark: SparkSession, stack: LocalStack, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The ``run`` service over ``--tables`` tables of which ``--busy`` receive changes."""
    stamp = int(time.time())
    prefixes = [f"many_{stamp}_{n:04d}" for n in range(args.tables)]
    busy, idle = prefixes[: args.busy], prefixes[args.busy :]
    admin = AdminClient({"bootstrap.servers": stack.kafka.address()})
    for future in admin.create_topics([NewTopic(f"{p}.s.t", 1, 1) for p in idle]).values():
        future.result()
    _log(f"producing {args.events} changes to each of {len(busy)} busy topics")
    for prefix in busy:
        produce_events(stack, f"{prefix}.s.t", KEYS, args.events, seed=hash(prefix) % 1000)
    base = config_dict(stack, [], str(work / "lake-many"), f"sqlite:///{work}/state-many.db")
    base["sources"] = {
        prefix: {
            "engine": "postgres",
            "topic_prefix": prefix,
            "primary": {"port": stack.layout.ports.postgres_primary, "database": "app", "user": "cdc"},
            "tables": [
                {"name": "s.t", "key": ["id"], "tier": 0 if prefix in busy else index % 3}
            ],
        }
        for index, prefix in enumerate(prefixes)
    }
    config = write_and_load(work / "many.yaml", base)
    record_catching_up(config)
    targets = select_targets(config)
    outcomes: list[TableOutcome] = []
    figures: dict[str, Any] = {"tables": args.tables, "busy": args.busy, "events_per_busy_table": args.events}
    with StateStore.open(config.state_store.url) as store, MemorySampler(spark) as memory:
        service = service_for(config, store, targets, workers=4, poll_seconds=1.0)
        thread = threading.Thread(target=service.run, args=(outcomes.append,), daemon=True)
        busy_tables = [f"{p}.s.t" for p in busy]
        ends = {t: sum(o for o in marks.values()) for t, marks in _ends(stack, busy_tables).items()}
        began = time.monotonic()
        thread.start()
        figures["first_cycle_seconds"] = round(_wait_applied(store, ends, 1800), 1)
        _log(f"first cycle (every busy table's backlog): {figures['first_cycle_seconds']}s")
        cycles = []
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            for prefix in busy:
                produce_events(stack, f"{prefix}.s.t", KEYS, args.events // 10, seed=random.randrange(1000))
            ends = {t: sum(marks.values()) for t, marks in _ends(stack, busy_tables).items()}
            cycles.append(_wait_applied(store, ends, 600))
            _log(f"cycle {len(cycles)}: {cycles[-1]:.1f}s")
        elapsed = time.monotonic() - began
        service.stop()
        thread.join()
    tracker = spark.sparkContext.statusTracker()
    figures.update({
        "later_cycles_seconds": [round(c, 1) for c in cycles],
        "later_cycle_max_seconds": round(max(cycles, default=0.0), 1),
        "table_steps": len(outcomes),
        "table_steps_per_second": round(len(outcomes) / elapsed, 1),
        "batched_offset_reads": service.board.requests if service.board else None,
        "failed": sum(1 for o in outcomes if o.failed),
        "idle_tables_with_spark_jobs": sum(1 for p in idle if tracker.getJobIdsForGroup(f"{p}.s.t")),
        "python_rss_max_mb": round(memory.python_rss_mb),
        "jvm_heap_used_max_mb": round(memory.jvm_heap_mb),
        "jvm_heap_max_mb": round(memory.jvm_heap_max_mb),
    })
    return figures


def _ends(stack: LocalStack, topics: list[str]) -> dict[str, dict[int, int]]:
    marks = topic_watermarks(stack.kafka.address(), topics)
    return {t: {p: high for p, (_, high) in m.items()} for t, m in marks.items()}


TABLE_SQL = """
create table public.{name} (id bigint primary key, grp int not null, val text, amount numeric(12, 2));
insert into public.{name} select g, g % 10, 'value-' || g, g / 7.0 from generate_series(1, {rows}) g;
"""


def _cli(config: Path, *args: str) -> float:
    began = time.monotonic()
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    if result.exit_code != 0:
        raise RuntimeError(f"cdc-lake {' '.join(args)} failed: {result.stderr or result.output}")
    return time.monotonic() - began


def bootstrap(stack: LocalStack, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``--small`` small tables and one ``--rows``-row table, sequential then ``--parallel``."""
    unique = f"{random.getrandbits(32):08x}"
    database = f"scale_{unique}"
    names = [f"small_{n:03d}" for n in range(args.small)] + ["big"]
    _log(f"creating {database}: {args.small} small tables and one of {args.rows:,} rows")
    with stack.postgres_primary.connect() as conn:
        conn.autocommit = True
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(database)))
    try:
        with stack.postgres_primary.connect(database) as conn:
            for index, name in enumerate(names):
                rows = args.rows if name == "big" else 10 + index % 91
                conn.execute(TABLE_SQL.format(name=name, rows=rows))  # type: ignore[arg-type]
        with stack.postgres_primary.connect(database) as conn:
            conn.autocommit = True
            conn.execute("vacuum analyze")
        ports = stack.layout.ports
        primary = {
            "port": ports.postgres_primary, "database": database, "user": "cdc", "password": PASSWORD_REF
        }
        figures: dict[str, Any] = {
            "small_tables": args.small, "big_rows": args.rows, "parallel": args.parallel
        }
        for mode, parallel in (("sequential", 1), ("concurrent", args.parallel)):
            source = f"{mode[:3]}_{unique}"
            data = {
                "state_store": {"url": f"sqlite:///{work / mode / 'state.db'}"},
                "lake": {"base_path": str(work / mode / "lake")},
                "kafka": {"bootstrap_servers": stack.kafka.address()},
                "schema_registry": {"url": stack.registry.confluent_url},
                "kafka_connect": {"url": stack.connect.url},
                "bootstrap": {"replica_delay_seconds": 5},
                "sources": {
                    source: {
                        "engine": "postgres",
                        "primary": primary,
                        "replica": {**primary, "port": ports.postgres_replica},
                        "tables": [{"name": f"public.{n}"} for n in names],
                    }
                },
            }
            path = work / mode / "cdc-lake.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
            _log(f"{mode}: onboarding {len(names)} tables")
            figures[f"{mode}_onboard_seconds"] = round(_cli(path, "onboard", source), 1)
            _log(f"{mode}: bootstrap --parallel {parallel}")
            seconds = _cli(path, "bootstrap", "--source", source, "--parallel", str(parallel), "--json")
            figures[f"{mode}_seconds"] = round(seconds, 1)
            figures[f"{mode}_small_table"] = _small_table_costs(path, source, names[:-1])
            _log(f"{mode}: {seconds:.1f}s; per small table {figures[f'{mode}_small_table']}")
        figures["speedup"] = round(figures["sequential_seconds"] / figures["concurrent_seconds"], 2)
        return figures
    finally:
        _drop(stack, database, unique)


def _small_table_costs(path: Path, source: str, names: list[str]) -> dict[str, float]:
    """Mean seconds per small table: its whole run, its Hudi commits, and the rest (the fixed work)."""
    config = load_config(path)
    runs, commits = [], []
    with StateStore.open(config.state_store.url) as store:
        for name in names:
            recorded = store.list_runs(f"{source}.public.{name}", limit=100)
            for run in recorded:
                if run.command == RUN and run.finished_at is not None:
                    runs.append((run.finished_at - run.started_at).total_seconds())
            commit_runs = [r for r in recorded if r.command == COMMIT_RUN]
            commits.append(sum(float(r.detail.get("seconds", 0)) for r in commit_runs))
    run_mean = statistics.fmean(runs) if runs else 0.0
    commit_mean = statistics.fmean(commits) if commits else 0.0
    return {
        "run_seconds": round(run_mean, 2),
        "commit_seconds": round(commit_mean, 2),
        "other_seconds": round(run_mean - commit_mean, 2),
    }


def _drop(stack: LocalStack, database: str, unique: str) -> None:
    url = stack.connect.url
    for name in requests.get(f"{url}/connectors", timeout=10).json():
        if unique in name:
            requests.delete(f"{url}/connectors/{name}", timeout=30)
    with stack.postgres_primary.connect() as admin:
        admin.autocommit = True
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            slots = admin.execute(
                "select slot_name, active from pg_replication_slots where slot_name like %s", (f"%{unique}%",)
            ).fetchall()
            for name, active in slots:
                if not active:
                    admin.execute("select pg_drop_replication_slot(%s)", (name,))
            if all(not active for _, active in slots):
                break
            time.sleep(1)
        admin.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(database)))


def main() -> None:
    """Run one part and print (and optionally save) its figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("many", "bootstrap"))
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--busy", type=int, default=10)
    parser.add_argument("--events", type=int, default=2_000)
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    stack = LocalStack(Config.default().stack)
    work = Path(tempfile.mkdtemp(prefix="cdc-lake-scale-bench-"))
    default = Config.default()
    spark = get_spark(default.spark.model_copy(update={"app_name": "cdc-lake-scale-bench"}), default.lake)
    use_driver_python(spark)
    try:
        figures = many(spark, stack, work, args) if args.part == "many" else bootstrap(stack, work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures["load_average_at_end"] = [round(v, 1) for v in os.getloadavg()]
    figures["cores"] = os.cpu_count()
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
