"""Applier benchmark: events/s into a 1M-row Hudi table (GLOBAL_BLOOM, record-level index), the two Kafka
readers, and per-event freshness of a tier-0 table.

Run it with the stack up (``cdc-lake stack up``)::

    .venv/bin/python benchmarks/apply_bench.py [--rows 1000000] [--events 100000] [--batch 50000]
        [--freshness-seconds 60] [--freshness-rate 1] [--tables 4] [--growth-sizes 1000000,2500000,5000000]
        [--growth-table-types MERGE_ON_READ,COPY_ON_WRITE] [--growth-changes 50000] [--growth-repeats 1]
        [--plots docs/] [--parts ...] [--driver-memory 2g] [--json results.json]

1. Throughput.  A Hudi table of ``--rows`` rows (8 region partitions) is written with ``bulk_insert`` as a
   bootstrap would, once per variant: COPY_ON_WRITE with GLOBAL_BLOOM (the default), COPY_ON_WRITE with
   the record-level index, MERGE_ON_READ with the record-level index (inline compaction every 5).  One
   topic receives ``--events`` Debezium-shaped Postgres change events (Confluent Avro, schemas in the
   stack's registry), the mix of ``change_plan.py``: 80% updates of random existing rows (5% of the
   changes draw a random region, so some rows move), 10% inserts, 10% deletes (each followed by its
   tombstone).  The applier
   (``apply --once`` semantics, batches of ``--batch``) catches each table up; the figure is Kafka
   messages per second of wall time, Spark already started.  The result is checked: row count, no
   duplicate key.
2. Readers.  Read + decode + summarise the whole topic (no write) with the librdkafka consumers on the
   executors and with Spark's Kafka source.
3. Freshness.  A real Postgres table captured by Debezium, applied by ``cdc-lake run``'s service at tier 0
   while one row is inserted per second (``--freshness-rate N``: N one-row transactions per second by
   ``pgbench --rate``); per event: completion time of the Hudi commit that made it visible minus its
   source commit time (``_cdc_source_ts``); p50/p95/p99, and with a rate a PNG over time (``--plots``).
4. Concurrency.  ``--tables`` small tables (2 000 rows, 2 000 changes each, two batches) applied one at a
   time (``--parallel 1``), then the same on fresh tables all at once in the one Spark application.

5. Limit.  For COPY_ON_WRITE and MERGE_ON_READ x GLOBAL_BLOOM and the record-level index: one
   ``--rows`` table bootstrapped and copied; the applier's full path (Kafka read, decode, last change per
   key, Hudi upsert: one batch, one commit) into one copy, then a plain DataFrame Hudi upsert of the very
   rows the applier wrote (saved as Parquet after its write, outside its time; read and cached before the
   timer) with the same table options into the other.  Figures: both times, their ratio, and where the
   applier's time goes (read + decode, materialising the rows in Spark, the Hudi write).
6. Growth.  For each of ``--growth-sizes`` and ``--growth-table-types``: one table of that many rows
   bootstrapped per global index (GLOBAL_BLOOM, the record-level index), and a batch made for that size:
   the last change per key of ``--growth-changes`` changes of ``change_plan.py``'s mix (seeded, so the
   same shape at every size), updates and deletes uniform over the whole key range, so every file of
   the table is touched, inserts above the largest key.  A fresh copy of each table gets one plain
   DataFrame Hudi upsert of it (the limit's write-only measure, so the figure is Hudi's alone), checked
   after (row count before + inserts - deletes, no key twice, the batch's value on every row it wrote),
   ``--growth-repeats`` times with the indexes interleaved.  Each table type starts with a throwaway
   point at 100,000 rows that takes the JVM's warm-up.  Seconds per upsert, with the driver JVM's CPU
   and GC seconds over it (reading and caching the 50,000-row batch included: under a second), and a
   PNG of the curve (``--plots``).

``--parts`` picks some of them (``readers,throughput,freshness,concurrency,limit,growth``; the default
is the first four).  Each part stands alone (``growth`` makes its own batches).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import astuple, replace
from decimal import Decimal
from functools import reduce
from pathlib import Path
from typing import Any

import requests
from confluent_kafka import Producer
from fastavro import parse_schema, schemaless_writer
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_lake.apply.commands import service_thread
from cdc_lake.apply.decoding import BatchSummary, DecodeSettings, decode_messages, summarize
from cdc_lake.apply.runner import ApplyRunner, applier_options, apply_once
from cdc_lake.apply.service import ApplyService
from cdc_lake.apply.table_applier import use_driver_python
from cdc_lake.config import Config
from cdc_lake.decode.framing import encode_frame
from cdc_lake.decode.ordering import ORDERING_WIDTH, SNAPSHOT_ORDERING_VALUE
from cdc_lake.decode.types import stash_logical_types
from cdc_lake.extras import optional_module
from cdc_lake.hudi import writer
from cdc_lake.hudi.format import hudi_spec
from cdc_lake.hudi.options import HudiTableSpec, write_options
from cdc_lake.hudi.writer import hudi_rows, read_table, write_batch
from cdc_lake.kafka.offsets import OffsetRange, end_offsets
from cdc_lake.kafka.reader import KafkaReader, read_ranges_in_spark, split_ranges
from cdc_lake.lake.checkpoint import Checkpoint, Origin
from cdc_lake.lake.columns import (
    APPLIED_AT_COLUMN,
    DELETED_COLUMN,
    OP_COLUMN,
    ORDERING_COLUMN,
    SOFT_DELETED_COLUMN,
    SOURCE_TS_COLUMN,
)
from cdc_lake.lake.format import UNREAD, Unread, WriteOperation, load_format
from cdc_lake.lake.layout import IndexType, TableType
from cdc_lake.lake.target import TableTarget, select_targets
from cdc_lake.spark import get_spark
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from change_plan import DELETE, INSERT, REGIONS, UPDATE, change_plan, last_per_key
from layouts import LAYOUTS
from support.apply import config_dict, debezium_postgres_schemas, record_catching_up, simple_capture
from support.common import write_and_load
from support.wire import unscaled

THROUGHPUT_LAYOUTS = "default,cow-ri,mor-ri"
APP_PRIMARY: dict[str, Any] = {
    "database": "app", "user": "cdc", "password": "${CDC_LAKE_DB_PASSWORD:-cdc-lake-local}"
}
"""The stack's ``app`` database as the benchmark sources' primary (the applier asks it before commits)."""
LIMIT_VARIANTS = tuple(
    (table_type, index)
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ")
    for index in ("GLOBAL_BLOOM", "RECORD_INDEX")
)
EPOCH = dt.datetime(1970, 1, 1)


def _schemas(topic: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Key and envelope schemas as Debezium writes them for (id bigint, region, amount numeric(12,2),
    note text, updated_at timestamp(6))."""
    decimal = {
        "type": "bytes",
        "scale": 2,
        "precision": 12,
        "connect.version": 1,
        "connect.parameters": {"scale": "2", "connect.decimal.precision": "12"},
        "connect.name": "org.apache.kafka.connect.data.Decimal",
        "logicalType": "decimal",
    }
    micro_ts = {"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTimestamp"}
    fields = [
        {"name": "id", "type": "long"},
        {"name": "region", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": ["null", decimal], "default": None},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "updated_at", "type": ["null", micro_ts], "default": None},
    ]
    schemas: tuple[dict[str, Any], dict[str, Any]] = debezium_postgres_schemas(topic, fields, "long")
    return schemas


def _register(registry_url: str, subject: str, schema: dict[str, Any]) -> int:
    response = requests.post(
        f"{registry_url}/subjects/{subject}/versions",
        json={"schema": json.dumps(schema)},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=10,
    )
    response.raise_for_status()
    schema_id: int = response.json()["id"]
    return schema_id


def produce_events(stack: LocalStack, topic: str, rows: int, events: int, seed: int) -> dict[str, int]:
    """Write ``events`` changes of the ``rows``-row table to ``topic``; returns counts per kind."""
    key_schema, value_schema = _schemas(topic)
    registry = stack.registry.confluent_url
    key_id = _register(registry, f"{topic}-key", key_schema)
    value_id = _register(registry, f"{topic}-value", value_schema)
    key_parsed = parse_schema(stash_logical_types(key_schema))
    value_parsed = parse_schema(stash_logical_types(value_schema))

    def frame(schema_id: int, parsed: Any, record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        schemaless_writer(out, parsed, record)
        return encode_frame(schema_id, out.getvalue())

    producer = Producer(
        {
            "bootstrap.servers": stack.kafka.address(),
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
        }
    )
    kinds = {UPDATE: "updates", INSERT: "inserts", DELETE: "deletes"}
    counts = {"updates": 0, "inserts": 0, "deletes": 0, "messages": 0}
    lsn = 10_000_000
    now_ms = int(time.time() * 1000)
    for index, op, key, region in (astuple(change) for change in change_plan(rows, events, seed)):
        lsn += 64
        counts[kinds[op]] += 1
        row = {
            "id": key,
            "region": f"r{region}",
            # The unscaled value in the fewest two's-complement bytes, as Debezium writes it (before
            # 2026-12-06 the benchmark wrote 8 bytes, which no Debezium sends).
            "amount": unscaled(Decimal(index % 10**9), 0),
            "note": f"e{index}",
            "updated_at": (now_ms + index) * 1000,
        }
        source = {
            "version": "3.5.0.Final",
            "connector": "postgresql",
            "name": "bench",
            "ts_ms": now_ms + index,
            "snapshot": "false",
            "db": "app",
            "sequence": f'["{lsn - 32}","{lsn}"]',
            "schema": "s",
            "table": "t",
            "txId": index,
            "lsn": lsn,
        }
        value = {
            "before": row if op == "d" else None,
            "after": None if op == "d" else row,
            "source": source,
            "op": op,
            "ts_ms": now_ms + index,
        }
        key_bytes = frame(key_id, key_parsed, {"id": key})
        producer.produce(topic, key=key_bytes, value=frame(value_id, value_parsed, value), partition=0)
        counts["messages"] += 1
        if op == "d":
            producer.produce(topic, key=key_bytes, value=None, partition=0)
            counts["messages"] += 1
        if index % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return counts


def _table_rows(frame: DataFrame) -> DataFrame:
    """The benchmark table's lake rows from ``frame``'s ``id``, ``region`` (a number), ``note`` and
    ``op``/``ordering`` (the Debezium op and the ordering value); a ``d`` row hard-deletes its key."""
    return frame.select(
        F.col("id"),
        F.concat(F.lit("r"), F.col("region").cast("string")).alias("region"),
        ((F.col("id") % 100_000) / 100).cast("decimal(12,2)").alias("amount"),
        F.col("note"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).cast("timestamp_ntz").alias("updated_at"),
        F.col("op").alias(OP_COLUMN),
        F.current_timestamp().alias(SOURCE_TS_COLUMN),
        F.col("ordering").alias(ORDERING_COLUMN),
        F.current_timestamp().alias(APPLIED_AT_COLUMN),
        F.lit(False).alias(SOFT_DELETED_COLUMN),
        (F.col("op") == F.lit(DELETE)).alias(DELETED_COLUMN),
    )


def bootstrap_table(spark: SparkSession, target: TableTarget | HudiTableSpec, rows: int) -> float:
    """Bulk-insert the table's ``rows`` snapshot rows as a bootstrap would; returns seconds."""
    frame = _table_rows(
        spark.range(rows).select(
            F.col("id"),
            (F.col("id") % REGIONS).alias("region"),
            F.concat(F.lit("n"), F.col("id").cast("string")).alias("note"),
            F.lit("r").alias("op"),
            F.lit(SNAPSHOT_ORDERING_VALUE).alias("ordering"),
        )
    )
    topic = "bench.s.t" if isinstance(target, HudiTableSpec) else target.topic
    checkpoint = Checkpoint(topic, {0: 0}, None, Origin.WATERMARK)
    began = time.monotonic()
    spec = target if isinstance(target, HudiTableSpec) else hudi_spec(target.spec(("id",)))
    write_batch(spark, spec, frame, WriteOperation.BULK_INSERT, checkpoint.metadata().to_dict())
    return time.monotonic() - began


def _partitioning(layout: str) -> dict[str, list[str]]:
    """The table's ``partition_by`` in ``layout``: by region, unless the layout's index is per partition
    (the bucket index), which the config refuses for a partitioned table (rows change region)."""
    return {} if LAYOUTS[layout]["index"] == "BUCKET" else {"partition_by": ["region"]}


def throughput(
    spark: SparkSession,
    stack: LocalStack,
    work: Path,
    topic: str,
    layout: str,
    rows: int,
    batch: int,
    counts: dict[str, int],
) -> dict[str, Any]:
    """Bootstrap a table in ``layout`` (:data:`layouts.LAYOUTS`) and apply the topic into it; returns figures.

    A layout that leaves compaction outside the writes gets ``run``'s table-service thread beside the
    applier, as in ``run``: its plans execute on the same cores while the batches commit."""
    name = layout.replace("-", "_")
    prefix, schema, table = topic.split(".")
    base = config_dict(
        stack,
        [],
        str(work / f"lake-{name}"),
        f"sqlite:///{work}/state-{name}.db",
        lake=LAYOUTS[layout],
        apply={"batch_max_events": batch},
    )
    base["sources"] = {
        f"bench_{name}": {
            "engine": "postgres",
            "topic_prefix": prefix,
            "primary": APP_PRIMARY | {"port": stack.layout.ports.postgres_primary},
            "tables": [{"name": f"{schema}.{table}", **_partitioning(layout), "key": ["id"]}],
        }
    }
    config = write_and_load(work / f"{name}.yaml", base)
    record_catching_up(config)
    (target,) = select_targets(config)
    bootstrap_seconds = bootstrap_table(spark, target, rows)
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config, slices=4)
        services = service_thread(config, spark, store, [target])  # run's, as run starts it
        began = time.monotonic()
        services.start()
        try:
            (outcome,) = apply_once(runner, [target], workers=1)
            seconds = time.monotonic() - began
        finally:
            services.stop()
        backlog = load_format(spark, config.lake.format).service_backlog(target.base_path)
    assert outcome.error is None, outcome.error
    lake = read_table(spark, target.base_path)
    stored = lake.count()
    distinct = lake.select("id").distinct().count()
    expected = rows + counts["inserts"] - counts["deletes"]
    assert stored == distinct == expected, (stored, distinct, expected)
    return {
        "layout": layout,
        "lake": LAYOUTS[layout],
        "rows": rows,
        "bootstrap_seconds": round(bootstrap_seconds, 1),
        "messages": outcome.offsets,
        "changes": outcome.changes,
        "commits": outcome.batches,
        "apply_seconds": round(seconds, 1),
        "messages_per_second": round(outcome.offsets / seconds),
        "changes_per_second": round(outcome.changes / seconds),
        "compaction_plans_pending_after": backlog.pending_plans,
    }


class WriteProbe:
    """Stands in for the applier's ``write_batch`` to time it: materialising the batch's rows (the Python
    rows of the decoded changes into Spark, last change per key) and Hudi's write of them.  With ``keep``
    it also saves the written rows as Parquet after the write, outside the applier's time, so the plain
    write upserts exactly those rows."""

    def __init__(self, keep: Path | None) -> None:
        self.keep = keep
        self.batches: list[dict[str, Any]] = []
        self.kept_seconds = 0.0

    def __call__(
        self,
        spark: SparkSession,
        spec: HudiTableSpec,
        df: DataFrame,
        operation: WriteOperation,
        commit_metadata: dict[str, str] | None = None,
        previous: str | Unread | None = UNREAD,
        *,
        unique_keys: bool = False,
    ) -> str:
        began = time.monotonic()
        rows = df.count()
        materialised = time.monotonic()
        instant = write_batch(
            spark, spec, df, operation, commit_metadata, previous, unique_keys=unique_keys
        )
        written = time.monotonic()
        self.batches.append(
            {
                "rows": rows,
                "materialise_seconds": materialised - began,
                "write_seconds": written - materialised,
            }
        )
        if self.keep is not None:
            df.write.mode("append").parquet(str(self.keep))
            self.kept_seconds += time.monotonic() - written
        return instant


def plain_upsert(spark: SparkSession, spec: HudiTableSpec, rows_path: Path) -> tuple[float, int]:
    """The limit: one plain DataFrame Hudi upsert of the saved rows (the lake's delete marker under Hudi's
    name, as the applier's write gives them to Hudi), same table options as the applier's target; the rows
    are read and cached first, so only Hudi's write is timed.  Returns (seconds, rows)."""
    frame = hudi_rows(spark.read.parquet(str(rows_path))).persist(StorageLevel.MEMORY_AND_DISK)
    rows = frame.count()
    began = time.monotonic()
    frame.write.format("hudi").options(**write_options(spec, WriteOperation.UPSERT)).mode("append").save(
        spec.base_path
    )
    seconds = time.monotonic() - began
    frame.unpersist()
    return seconds, rows


def limit(
    spark: SparkSession,
    stack: LocalStack,
    work: Path,
    topic: str,
    variant: tuple[str, str],
    rows: int,
    counts: dict[str, int],
    rows_path: Path,
) -> dict[str, Any]:
    """The applier's full path (Kafka read, decode, last change per key, write) against a plain DataFrame
    upsert of the same rows, into two copies of one bootstrapped ``variant`` table, one commit each."""
    table_type, index = variant
    name = f"limit_{table_type}_{index}".lower()
    prefix, schema, table = topic.split(".")
    base = config_dict(
        stack,
        [],
        str(work / f"lake-{name}"),
        f"sqlite:///{work}/state-{name}.db",
        # Version 9: _completions reads completion times from the version 8+ timeline's file names.
        lake={"index": index, "table_type": table_type, "table_version": 9},
        apply={"batch_max_events": 10 * counts["messages"]},
    )
    base["sources"] = {
        f"bench_{name}": {
            "engine": "postgres",
            "topic_prefix": prefix,
            "primary": APP_PRIMARY | {"port": stack.layout.ports.postgres_primary},
            "tables": [{"name": f"{schema}.{table}", "partition_by": ["region"], "key": ["id"]}],
        }
    }
    config = write_and_load(work / f"{name}.yaml", base)
    record_catching_up(config)
    (target,) = select_targets(config)
    bootstrap_seconds = bootstrap_table(spark, target, rows)
    plain_spec = replace(hudi_spec(target.spec(("id",))), base_path=f"{target.base_path}-plain")
    shutil.copytree(target.base_path, plain_spec.base_path)
    probe = WriteProbe(None if rows_path.exists() else rows_path)
    writer.write_batch = probe  # type: ignore[assignment]
    try:
        with StateStore.open(config.state_store.url) as store:
            runner = ApplyRunner.for_config(spark, store, config, slices=4)
            began = time.monotonic()
            (outcome,) = apply_once(runner, [target], workers=1)
            applier_seconds = time.monotonic() - began - probe.kept_seconds
    finally:
        writer.write_batch = write_batch
    assert outcome.error is None, outcome.error
    plain_seconds, plain_rows = plain_upsert(spark, plain_spec, rows_path)
    expected = rows + counts["inserts"] - counts["deletes"]
    for path in (target.base_path, plain_spec.base_path):
        lake = read_table(spark, path)
        stored, distinct = lake.count(), lake.select("id").distinct().count()
        assert stored == distinct == expected, (path, stored, distinct, expected)
    (batch,) = probe.batches
    return {
        "table_type": table_type,
        "index": index,
        "rows": rows,
        "messages": outcome.offsets,
        "changes": outcome.changes,
        "upserted_rows": plain_rows,
        "commits": outcome.batches,
        "bootstrap_seconds": round(bootstrap_seconds, 1),
        "applier_seconds": round(applier_seconds, 1),
        "applier_read_decode_seconds": round(
            applier_seconds - batch["materialise_seconds"] - batch["write_seconds"], 1
        ),
        "applier_materialise_seconds": round(batch["materialise_seconds"], 1),
        "applier_write_seconds": round(batch["write_seconds"], 1),
        "plain_seconds": round(plain_seconds, 1),
        "ratio": round(applier_seconds / plain_seconds, 2),
        "write_ratio": round(batch["write_seconds"] / plain_seconds, 2),
        "load_average": [round(load, 1) for load in os.getloadavg()],
    }


GROWTH_INDEXES = ("GLOBAL_BLOOM", "RECORD_INDEX")
GROWTH_SEED = 24
GROWTH_WARM_UP_ROWS = 100_000
"""Rows of the throwaway point each table type starts with: the JVM's warm-up (class loading, JIT of
Hudi's write path) goes to it, not to the first measured point."""


def growth_batch(spark: SparkSession, size: int, changes: int, path: Path) -> dict[str, int]:
    """Write one upsert's rows for a ``size``-row table to ``path`` (Parquet): the last change per key of
    ``changes`` planned changes (:func:`change_plan.change_plan`, seed :data:`GROWTH_SEED`), ordered
    after the snapshot; returns the counts per kind of those last changes."""
    latest = last_per_key(change_plan(size, changes, GROWTH_SEED))
    rows = [(c.key, c.region, f"e{c.seq}", c.op, f"{c.seq + 1:0{ORDERING_WIDTH}d}") for c in latest]
    frame = spark.createDataFrame(rows, "id bigint, region int, note string, op string, ordering string")
    _table_rows(frame).write.mode("overwrite").parquet(str(path))
    kinds = Counter(c.op for c in latest)
    return {
        "changes": changes,
        "rows": len(latest),
        "updates": kinds[UPDATE],
        "inserts": kinds[INSERT],
        "deletes": kinds[DELETE],
    }


def _check_growth(spark: SparkSession, path: str, size: int, batch: dict[str, int]) -> None:
    """The upserted table holds ``size + inserts - deletes`` rows, no key twice, and the batch's note on
    every row it updated or inserted."""
    lake = read_table(spark, path)
    stored, distinct, changed = lake.agg(
        F.count("*"), F.count_distinct("id"), F.sum(F.col("note").startswith("e").cast("int"))
    ).first() or (0, 0, 0)
    expected = size + batch["inserts"] - batch["deletes"]
    assert stored == distinct == expected, (path, stored, distinct, expected)
    assert changed == batch["updates"] + batch["inserts"], (path, changed, batch)


def _jvm_cpu_and_gc(spark: SparkSession) -> tuple[float, float]:
    """CPU seconds (user + system, from ``/proc``) and garbage-collection seconds the driver JVM has
    used so far: in ``local`` mode all of Spark's work, so a figure that other load on the machine
    stretches far less than wall time does."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    stat = Path(f"/proc/{jvm.java.lang.ProcessHandle.current().pid()}/stat").read_text()
    utime, stime = stat.rsplit(")", 1)[1].split()[11:13]
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    gc_ms = sum(bean.getCollectionTime() for bean in beans)
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK"), gc_ms / 1000


def growth_point(
    spark: SparkSession, work: Path, size: int, table_type: str, changes: int, repeats: int
) -> list[dict[str, Any]]:
    """One table size: a ``size``-row table bootstrapped per global index, then ``repeats`` times, the
    indexes interleaved, a fresh copy of it upserted with the size's batch (plain DataFrame write, so the
    figure is Hudi's alone) and checked."""
    batch_path = work / f"growth-batch-{size}"
    batch = growth_batch(spark, size, changes, batch_path)
    masters: dict[str, tuple[HudiTableSpec, float]] = {}
    for index in GROWTH_INDEXES:
        spec = HudiTableSpec(
            table_name=f"growth_{size}_{index}".lower(),
            base_path=str(work / f"lake-growth-{table_type}-{size}-{index}".lower()),
            record_key_fields=("id",),
            ordering_field=ORDERING_COLUMN,
            partition_fields=("region",),
            table_type=TableType(table_type),
            index=IndexType(index),
        )
        masters[index] = spec, bootstrap_table(spark, spec, size)
    figures = []
    for repeat in range(repeats):
        for index, (master, bootstrap_seconds) in masters.items():
            spec = replace(master, base_path=f"{master.base_path}-{repeat}")
            shutil.copytree(master.base_path, spec.base_path)
            cpu_before, gc_before = _jvm_cpu_and_gc(spark)
            seconds, upserted = plain_upsert(spark, spec, batch_path)
            cpu_after, gc_after = _jvm_cpu_and_gc(spark)
            load = [round(value, 1) for value in os.getloadavg()]
            _check_growth(spark, spec.base_path, size, batch)
            figures.append({
                "rows": size,
                "index": index,
                "table_type": table_type,
                "repeat": repeat,
                "batch": batch,
                "upserted_rows": upserted,
                "base_files": sum(1 for _ in Path(master.base_path).glob("region=*/*.parquet")),
                "bootstrap_seconds": round(bootstrap_seconds, 1),
                "upsert_seconds": round(seconds, 1),
                "upsert_cpu_seconds": round(cpu_after - cpu_before, 1),
                "upsert_gc_seconds": round(gc_after - gc_before, 1),
                "load_average": load,
            })
            print(json.dumps(figures[-1]), flush=True)
            shutil.rmtree(spec.base_path)
    for master, _ in masters.values():
        shutil.rmtree(master.base_path)
    shutil.rmtree(batch_path)
    return figures


def growth(
    spark: SparkSession, work: Path, sizes: list[int], table_types: list[str], changes: int, repeats: int
) -> dict[str, list[dict[str, Any]]]:
    """Upsert cost of a ``changes``-change batch spread over the whole key range, per table size, table
    type and global index; each table type starts with a throwaway warm-up point."""
    figures: dict[str, list[dict[str, Any]]] = {"warm_up": [], "points": []}
    for table_type in table_types:
        figures["warm_up"] += growth_point(spark, work, GROWTH_WARM_UP_ROWS, table_type, changes, 1)
        for size in sizes:
            figures["points"] += growth_point(spark, work, size, table_type, changes, repeats)
    return figures


def plotting() -> Any:
    """matplotlib's pyplot drawing PNGs (Agg), or one line naming the ``bench`` extra when it is missing."""
    matplotlib = optional_module("matplotlib", "bench", "the benchmarks' plots")
    matplotlib.use("Agg")
    return optional_module("matplotlib.pyplot", "bench", "the benchmarks' plots")


def plot_growth(figures: list[dict[str, Any]], path: Path) -> None:
    """PNG of upsert seconds against table rows, one line (the median of the repeats) per table type and
    index, every repeat a dot (needs the ``bench`` extra)."""
    pyplot = plotting()

    fig, ax = pyplot.subplots(figsize=(7, 4.5))
    for table_type in dict.fromkeys(f["table_type"] for f in figures):
        for index in GROWTH_INDEXES:
            mine = [f for f in figures if f["table_type"] == table_type and f["index"] == index]
            sizes = sorted({f["rows"] for f in mine})
            medians = [statistics.median(f["upsert_seconds"] for f in mine if f["rows"] == n) for n in sizes]
            style = "-" if table_type == "COPY_ON_WRITE" else "--"
            label = f"{table_type} {index}"
            (line,) = ax.plot([n / 1e6 for n in sizes], medians, style, marker="o", label=label)
            dots = ([f["rows"] / 1e6 for f in mine], [f["upsert_seconds"] for f in mine])
            ax.scatter(*dots, color=line.get_color(), s=12)
    ax.set_title(f"Upsert of {figures[0]['batch']['changes']:,} changes spread over the key range")
    ax.set_xlabel("table rows (millions)")
    ax.set_ylabel("seconds per upsert")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def readers(spark: SparkSession, stack: LocalStack, topic: str, registry_url: str) -> dict[str, Any]:
    """Read + decode + summarise the topic with each reader; events per second."""
    from cdc_lake.decode.registry import SchemaRegistry

    ends = end_offsets(stack.kafka.address(), topic)
    ranges = [OffsetRange(topic, p, 0, end) for p, end in ends.items()]
    settings = DecodeSettings(topic, SchemaRegistry(registry_url), ("id",), False)
    options = applier_options(Config.default())
    figures = {}
    for reader in (KafkaReader.CONSUMER, KafkaReader.SPARK):
        began = time.monotonic()
        raw = read_ranges_in_spark(spark, options.kafka, split_ranges(ranges, 4), reader)
        decoded = raw.mapPartitions(lambda messages: decode_messages(settings, messages))
        summary = reduce(BatchSummary.merge, decoded.mapPartitions(summarize).collect(), BatchSummary())
        seconds = time.monotonic() - began
        figures[reader.value] = {
            "changes": summary.changes,
            "seconds": round(seconds, 1),
            "messages_per_second": round(sum(ends.values()) / seconds),
        }
    return figures


def _completions(spark: SparkSession, base_path: Path) -> dict[str, dt.datetime]:
    """Commit instant -> completion time (UTC): the active timeline's file names, and the archived
    timeline (``timeline/history``, Parquet), where Hudi archives older commits."""
    timeline = base_path / ".hoodie" / "timeline"
    stamps = {}
    for path in timeline.glob("*_*.*commit"):
        instant, completion = path.name.split(".")[0].split("_")
        stamps[instant] = completion
    history = sorted(str(path) for path in (timeline / "history").glob("*.parquet"))
    if history:
        archived = spark.read.parquet(*history).where(F.col("action").endswith("commit"))
        for row in archived.select("instantTime", "completionTime").collect():
            stamps.setdefault(row["instantTime"], row["completionTime"])
    return {
        instant: dt.datetime.strptime(completion, "%Y%m%d%H%M%S%f").replace(tzinfo=dt.UTC)
        for instant, completion in stamps.items()
    }


def run_pgbench(
    stack: LocalStack, database: str, scripts: list[tuple[str, int]], rate: int, seconds: int
) -> list[str]:
    """Run ``scripts`` (SQL text, weight: pgbench picks one per transaction by weight) against
    ``database`` on the primary at ``rate`` transactions per second for ``seconds`` (fixed-rate mode:
    transactions are scheduled on a Poisson clock, and pgbench reports how far it fell behind); returns
    pgbench's summary lines."""
    directory = Path(tempfile.mkdtemp(prefix="cdc-lake-pgbench-"))
    files = []
    for number, (text, weight) in enumerate(scripts):
        path = directory / f"script{number}.sql"
        path.write_text(text)
        files += ["-f", f"{path}@{weight}"]
    creds = stack.layout.credentials
    command = [
        "pgbench", "-n", *files, "--rate", str(rate), "-T", str(seconds), "-c", "4", "-j", "2",
        "-h", "127.0.0.1", "-p", str(stack.layout.ports.postgres_primary), "-U", creds.db_user, database,
    ]
    done = subprocess.run(
        command, env={**os.environ, "PGPASSWORD": creds.db_password}, capture_output=True, text=True,
        timeout=seconds + 120, check=False,
    )
    shutil.rmtree(directory, ignore_errors=True)
    wanted = ("number of", "latency", "rate", "tps")
    report = [line for line in done.stdout.splitlines() if line.startswith(wanted)]
    print("\n".join(report), flush=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return report


def freshness(
    spark: SparkSession, stack: LocalStack, work: Path, seconds: int, rate: int = 1
) -> dict[str, Any]:
    """Per-event freshness of a tier-0 Postgres table applied by the run service, ``rate`` inserts/s."""
    with simple_capture(stack, "postgres") as capture:
        config = write_and_load(
            work / "fresh.yaml",
            config_dict(
                stack,
                [capture],
                str(work / "lake-fresh"),
                f"sqlite:///{work}/state-fresh.db",
                tables={capture.qualified_name: {"tier": 0}},
            ),
        )
        record_catching_up(config)
        base_path = Path(config.lake.table_base_path(capture.qualified_name))
        table = f'"{capture.schema}"."{capture.table}"'
        capture.execute(
            f'create sequence "{capture.schema}"."fresh_ids" start 1',
            f"insert into {table} (id, region, note) values (0, 'eu', 'warm-up')",
        )
        with StateStore.open(config.state_store.url) as store:
            runner = ApplyRunner.for_config(spark, store, config)
            service = ApplyService(
                runner, select_targets(config), lambda tier: 0.0, workers=1, poll_seconds=0.2
            )
            thread = threading.Thread(target=service.run)
            thread.start()
            time.sleep(30)
            if rate > 1:
                insert = (
                    f"insert into {table} (id, region, note) "
                    f"""values (nextval('"{capture.schema}"."fresh_ids"'), 'eu', 'e');\n"""
                )
                run_pgbench(stack, "app", [(insert, 1)], rate, seconds)
            else:
                for key in range(1, seconds + 1):
                    capture.execute((f"insert into {table} (id, region, note) values (%s, 'eu', 'e')", [key]))
                    time.sleep(1.0)
            time.sleep(5)
            end = capture.end_offset()
            deadline = time.monotonic() + 300
            while store.get_applied_offsets(capture.qualified_name).get(0, 0) < end:
                assert time.monotonic() < deadline, "the service did not catch up"
                time.sleep(0.5)
            service.stop()
            thread.join()
    return freshness_figures(spark, base_path, rate, seconds)


def freshness_figures(spark: SparkSession, base_path: Path, rate: int, seconds: int) -> dict[str, Any]:
    """Per event of the freshness table at ``base_path`` (rows with id > 0): completion time of the commit
    that made it visible minus its source commit time; percentiles, and per 10 s with a rate."""
    completions = _completions(spark, base_path)
    rows = (
        read_table(spark, str(base_path), meta_columns=True)
        .where("id > 0")
        .select("_hoodie_commit_time", F.unix_millis(F.col(SOURCE_TS_COLUMN)).alias("source_ms"))
        .collect()
    )
    visible_ms = {instant: at.timestamp() * 1000 for instant, at in completions.items()}
    timeline = sorted(
        (r["source_ms"] / 1000, (visible_ms[r["_hoodie_commit_time"]] - r["source_ms"]) / 1000) for r in rows
    )
    figures = {
        "rate": rate,
        "seconds": seconds,
        **lag_percentiles([lag for _, lag in timeline]),
        "commits": len({r["_hoodie_commit_time"] for r in rows}),
        "load_average": [round(load, 1) for load in os.getloadavg()],
    }
    if rate > 1:
        figures["timeline"] = per_interval(timeline, 10)
    return figures


def lag_percentiles(lags: list[float]) -> dict[str, float]:
    """Events, min, p50, p95, p99 and max of ``lags`` (seconds; nearest rank below, as ``per_interval``)."""
    ordered = sorted(lags)
    return {
        "events": len(ordered),
        "min_seconds": round(ordered[0], 1),
        "p50_seconds": round(statistics.median(ordered), 1),
        "p95_seconds": round(ordered[int(0.95 * (len(ordered) - 1))], 1),
        "p99_seconds": round(ordered[int(0.99 * (len(ordered) - 1))], 1),
        "max_seconds": round(ordered[-1], 1),
    }


def per_interval(timeline: list[tuple[float, float]], width: int) -> list[dict[str, float]]:
    """Freshness per ``width``-second interval of source commit time: events, p50, p99, max."""
    start = timeline[0][0]
    buckets: dict[int, list[float]] = {}
    for at, lag in timeline:
        buckets.setdefault(int((at - start) // width), []).append(lag)
    out = []
    for bucket, lags in sorted(buckets.items()):
        lags.sort()
        out.append({
            "second": bucket * width,
            "events": len(lags),
            "p50": round(statistics.median(lags), 2),
            "p99": round(lags[int(0.99 * (len(lags) - 1))], 2),
            "max": round(lags[-1], 2),
        })
    return out


def plot_freshness(figures: dict[str, Any], path: Path) -> None:
    """PNG of freshness over time, per 10 s of source commit time (needs the ``bench`` extra)."""
    pyplot = plotting()

    points = figures["timeline"]
    at = [p["second"] for p in points]
    fig, ax = pyplot.subplots(figsize=(7, 4))
    for key in ("p50", "p99", "max"):
        ax.plot(at, [p[key] for p in points], label=key)
    ax.axhline(30, color="grey", linestyle="--", linewidth=1, label="target p99 30 s")
    ax.set_title(f"Tier-0 freshness at {figures['rate']} inserts/s (per 10 s)")
    ax.set_xlabel("seconds since the load started (source commit time)")
    ax.set_ylabel("source commit to visible in the lake (s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def concurrency(spark: SparkSession, stack: LocalStack, work: Path, tables: int, keys: int) -> dict[str, Any]:
    """Wall time to apply ``tables`` fresh tables one at a time, then (other tables, same events) at once."""
    figures: dict[str, Any] = {"tables": tables, "messages_per_table": 0}
    for workers in (1, tables):
        stamp = int(time.time() * 1000)
        topics = [f"conc_{stamp}_{n}.s.t" for n in range(tables)]
        for topic in topics:
            figures["messages_per_table"] = produce_events(stack, topic, keys, keys, seed=7)["messages"]
        base = config_dict(
            stack,
            [],
            str(work / f"lake-conc-{workers}"),
            f"sqlite:///{work}/state-conc-{workers}.db",
            apply={"batch_max_events": max(1, keys // 2)},
        )
        base["sources"] = {
            topic.split(".")[0]: {
                "engine": "postgres",
                "topic_prefix": topic.split(".")[0],
                "primary": APP_PRIMARY | {"port": stack.layout.ports.postgres_primary},
                "tables": [{"name": "s.t", "partition_by": ["region"], "key": ["id"]}],
            }
            for topic in topics
        }
        config = write_and_load(work / f"conc-{workers}.yaml", base)
        record_catching_up(config)
        targets = select_targets(config)
        for target in targets:
            bootstrap_table(spark, target, keys)
        with StateStore.open(config.state_store.url) as store:
            runner = ApplyRunner.for_config(spark, store, config, slices=2)
            began = time.monotonic()
            outcomes = apply_once(runner, targets, workers=workers)
            seconds = time.monotonic() - began
        assert all(o.error is None for o in outcomes), [o.error for o in outcomes]
        figures[f"workers_{workers}_seconds"] = round(seconds, 1)
    figures["speedup"] = round(figures["workers_1_seconds"] / figures[f"workers_{tables}_seconds"], 2)
    return figures


def main() -> None:
    """Run the chosen parts and print (and optionally save) the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--freshness-seconds", type=int, default=60)
    parser.add_argument("--tables", type=int, default=4, help="tables of the concurrency part")
    parser.add_argument("--freshness-rate", type=int, default=1, help="inserts/s of the freshness part")
    parser.add_argument(
        "--freshness-table", type=Path, help="figures of a table an earlier freshness run wrote, no new run"
    )
    parser.add_argument("--growth-sizes", default="1000000,2500000,5000000", help="table rows, comma list")
    parser.add_argument(
        "--growth-table-types", default="MERGE_ON_READ,COPY_ON_WRITE", help="growth part, comma list"
    )
    parser.add_argument("--growth-changes", type=int, default=50_000, help="changes per growth batch")
    parser.add_argument("--growth-repeats", type=int, default=1, help="upserts per growth point")
    parser.add_argument("--plots", type=Path, help="directory for PNG plots (needs the bench extra)")
    parser.add_argument("--parts", default="readers,throughput,freshness,concurrency")
    parser.add_argument(
        "--layouts", default=THROUGHPUT_LAYOUTS, help=f"throughput part, comma list of {', '.join(LAYOUTS)}"
    )
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    parts = set(args.parts.split(","))

    stack = LocalStack(Config.default().stack)
    work = Path(tempfile.mkdtemp(prefix="cdc-lake-apply-bench-"))
    default = Config.default()
    spark = get_spark(
        default.spark.model_copy(
            update={"driver_memory": args.driver_memory, "app_name": "cdc-lake-apply-bench"}
        ),
        default.lake,
    )
    use_driver_python(spark)
    results: dict[str, Any] = {"batch_max_events": args.batch, "driver_memory": args.driver_memory}
    if parts & {"readers", "throughput", "limit"}:
        topic = f"bench_{int(time.time())}.s.t"
        began = time.monotonic()
        counts = produce_events(stack, topic, args.rows, args.events, seed=42)
        results.update({"events": counts, "produce_seconds": round(time.monotonic() - began, 1)})
        print(json.dumps(results), flush=True)
    if "readers" in parts:
        results["readers"] = readers(spark, stack, topic, stack.registry.confluent_url)
        print(json.dumps(results["readers"]), flush=True)
    if "throughput" in parts:
        results["throughput"] = []
        for layout in args.layouts.split(","):
            results["throughput"].append(
                throughput(spark, stack, work, topic, layout, args.rows, args.batch, counts)
            )
            print(json.dumps(results["throughput"][-1]), flush=True)
    if "limit" in parts:
        results["limit"] = []
        for variant in LIMIT_VARIANTS:
            results["limit"].append(
                limit(spark, stack, work, topic, variant, args.rows, counts, work / "batch-rows")
            )
            print(json.dumps(results["limit"][-1]), flush=True)
    if "growth" in parts:
        sizes = [int(size) for size in args.growth_sizes.split(",")]
        table_types = args.growth_table_types.split(",")
        results["growth"] = growth(spark, work, sizes, table_types, args.growth_changes, args.growth_repeats)
        if args.plots:
            plot_growth(results["growth"]["points"], args.plots / "index-growth.png")
    if "freshness" in parts:
        if args.freshness_table:
            results["freshness"] = freshness_figures(
                spark, args.freshness_table, args.freshness_rate, args.freshness_seconds
            )
        else:
            results["freshness"] = freshness(spark, stack, work, args.freshness_seconds, args.freshness_rate)
        print(json.dumps({k: v for k, v in results["freshness"].items() if k != "timeline"}), flush=True)
        if args.plots and args.freshness_rate > 1:
            plot_freshness(results["freshness"], args.plots / "freshness-tier0.png")
    if "concurrency" in parts:
        results["concurrency"] = concurrency(spark, stack, work, args.tables, keys=2_000)
        print(json.dumps(results["concurrency"]), flush=True)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
