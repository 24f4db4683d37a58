"""Applier benchmark: events/s into a 1M-row Hudi table (GLOBAL_BLOOM, record-level index), the two Kafka
readers, and per-event freshness of a tier-0 table.

Run it with the stack up (``cdc-lake stack up``)::

    .venv/bin/python benchmarks/apply_bench.py [--rows 1000000] [--events 100000] [--batch 50000]
        [--freshness-seconds 60] [--tables 4] [--parts ...] [--driver-memory 2g] [--json results.json]

1. Throughput.  A Hudi table of ``--rows`` rows (8 region partitions) is written with ``bulk_insert`` as a
   bootstrap would, once per variant: COPY_ON_WRITE with GLOBAL_BLOOM (the default), COPY_ON_WRITE with
   the record-level index, MERGE_ON_READ with the record-level index (inline compaction every 5).  One
   topic receives ``--events`` Debezium-shaped Postgres change events (Confluent Avro, schemas in the
   stack's registry): 80% updates of random existing rows (5% of them move to another region), 10%
   inserts, 10% deletes (each followed by its tombstone).  The applier
   (``apply --once`` semantics, batches of ``--batch``) catches each table up; the figure is Kafka
   messages per second of wall time, Spark already started.  The result is checked: row count, no
   duplicate key.
2. Readers.  Read + decode + summarise the whole topic (no write) with the librdkafka consumers on the
   executors and with Spark's Kafka source.
3. Freshness.  A real Postgres table captured by Debezium, applied by ``cdc-lake run``'s service at tier 0
   while one row is inserted per second; per event: completion time of the Hudi commit that made it
   visible minus its source commit time (``_cdc_source_ts``).
4. Concurrency.  ``--tables`` small tables (2 000 rows, 2 000 changes each, two batches) applied one at a
   time (``--parallel 1``), then the same on fresh tables all at once in the one Spark application.

``--parts`` picks some of them (``readers,throughput,freshness,concurrency``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from functools import reduce
from pathlib import Path
from typing import Any

import requests
from confluent_kafka import Producer
from fastavro import parse_schema, schemaless_writer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_lake.apply.changes import (
    APPLIED_AT_COLUMN,
    DELETED_COLUMN,
    OP_COLUMN,
    ORDERING_COLUMN,
    SOFT_DELETED_COLUMN,
    SOURCE_TS_COLUMN,
)
from cdc_lake.apply.checkpoint import Checkpoint, Origin
from cdc_lake.apply.decoding import BatchSummary, DecodeSettings, decode_messages, summarize
from cdc_lake.apply.runner import ApplyRunner, applier_options, apply_once
from cdc_lake.apply.service import ApplyService
from cdc_lake.apply.table_applier import use_driver_python
from cdc_lake.apply.target import ApplyTarget, select_targets
from cdc_lake.config import Config
from cdc_lake.decode.framing import encode_frame
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE
from cdc_lake.decode.types import stash_logical_types
from cdc_lake.hudi.options import WriteOperation
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.kafka.offsets import OffsetRange, end_offsets
from cdc_lake.kafka.reader import KafkaReader, read_ranges_in_spark, split_ranges
from cdc_lake.spark import get_spark
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
from apply_support import config_dict, onboard, simple_capture, write_config

REGIONS = 8
VARIANTS = (
    ("COPY_ON_WRITE", "GLOBAL_BLOOM"),
    ("COPY_ON_WRITE", "RECORD_INDEX"),
    ("MERGE_ON_READ", "RECORD_INDEX"),
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
    value = {
        "type": "record",
        "name": "Value",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "region", "type": ["null", "string"], "default": None},
            {"name": "amount", "type": ["null", decimal], "default": None},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "updated_at", "type": ["null", micro_ts], "default": None},
        ],
    }
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
    key = {"type": "record", "name": "Key", "namespace": topic, "fields": [{"name": "id", "type": "long"}]}
    return key, envelope


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

    rng = random.Random(seed)
    producer = Producer(
        {
            "bootstrap.servers": stack.kafka.address(),
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
        }
    )
    live = rows
    deleted: set[int] = set()
    counts = {"updates": 0, "inserts": 0, "deletes": 0, "messages": 0}
    lsn = 10_000_000
    now_ms = int(time.time() * 1000)
    for index in range(events):
        lsn += 64
        roll = rng.random()
        if roll < 0.8:
            key = rng.randrange(rows)
            while key in deleted:
                key = rng.randrange(rows)
            op, counts["updates"] = "u", counts["updates"] + 1
        elif roll < 0.9:
            key, live, op = live, live + 1, "c"
            counts["inserts"] += 1
        else:
            key = rng.randrange(rows)
            while key in deleted:
                key = rng.randrange(rows)
            deleted.add(key)
            op, counts["deletes"] = "d", counts["deletes"] + 1
        region = key % REGIONS if rng.random() > 0.05 else rng.randrange(REGIONS)
        row = {
            "id": key,
            "region": f"r{region}",
            "amount": (index % 10**9).to_bytes(8, "big", signed=True),
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


def bootstrap_table(spark: SparkSession, target: ApplyTarget, rows: int) -> float:
    """Bulk-insert the table's ``rows`` snapshot rows as a bootstrap would; returns seconds."""
    ids = spark.range(rows)
    frame = ids.select(
        F.col("id"),
        F.concat(F.lit("r"), (F.col("id") % REGIONS).cast("string")).alias("region"),
        ((F.col("id") % 100_000) / 100).cast("decimal(12,2)").alias("amount"),
        F.concat(F.lit("n"), F.col("id").cast("string")).alias("note"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).cast("timestamp_ntz").alias("updated_at"),
        F.lit("r").alias(OP_COLUMN),
        F.current_timestamp().alias(SOURCE_TS_COLUMN),
        F.lit(SNAPSHOT_ORDERING_VALUE).alias(ORDERING_COLUMN),
        F.current_timestamp().alias(APPLIED_AT_COLUMN),
        F.lit(False).alias(SOFT_DELETED_COLUMN),
        F.lit(False).alias(DELETED_COLUMN),
    )
    checkpoint = Checkpoint(target.topic, {0: 0}, None, Origin.WATERMARK)
    began = time.monotonic()
    write_batch(spark, target.spec(("id",)), frame, WriteOperation.BULK_INSERT, checkpoint.commit_metadata())
    return time.monotonic() - began


def throughput(
    spark: SparkSession,
    stack: LocalStack,
    work: Path,
    topic: str,
    variant: tuple[str, str],
    rows: int,
    batch: int,
    counts: dict[str, int],
) -> dict[str, Any]:
    """Bootstrap a ``variant`` (table type, index) table and apply the topic into it; returns figures."""
    table_type, index = variant
    name = f"{table_type}_{index}".lower()
    prefix, schema, table = topic.split(".")
    base = config_dict(
        stack,
        [],
        str(work / f"lake-{name}"),
        f"sqlite:///{work}/state-{name}.db",
        lake={"index": index, "table_type": table_type},
        apply={"batch_max_events": batch},
    )
    base["sources"] = {
        f"bench_{name}": {
            "engine": "postgres",
            "topic_prefix": prefix,
            "primary": {"port": stack.layout.ports.postgres_primary, "database": "app", "user": "cdc"},
            "tables": [{"name": f"{schema}.{table}", "partition_by": ["region"], "key": ["id"]}],
        }
    }
    config = write_config(work / f"{name}.yaml", base)
    onboard(config)
    (target,) = select_targets(config)
    bootstrap_seconds = bootstrap_table(spark, target, rows)
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config, slices=4)
        began = time.monotonic()
        (outcome,) = apply_once(runner, [target], workers=1)
        seconds = time.monotonic() - began
    assert outcome.error is None, outcome.error
    lake = read_table(spark, target.base_path)
    stored = lake.count()
    distinct = lake.select("id").distinct().count()
    expected = rows + counts["inserts"] - counts["deletes"]
    assert stored == distinct == expected, (stored, distinct, expected)
    return {
        "table_type": table_type,
        "index": index,
        "rows": rows,
        "bootstrap_seconds": round(bootstrap_seconds, 1),
        "messages": outcome.offsets,
        "changes": outcome.changes,
        "commits": outcome.batches,
        "apply_seconds": round(seconds, 1),
        "messages_per_second": round(outcome.offsets / seconds),
    }


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


def _completions(base_path: Path) -> dict[str, dt.datetime]:
    """Commit instant -> completion time, from the local timeline's file names (UTC)."""
    found = {}
    for path in (base_path / ".hoodie" / "timeline").glob("*_*.*commit"):
        instant, completion = path.name.split(".")[0].split("_")
        found[instant] = dt.datetime.strptime(completion, "%Y%m%d%H%M%S%f").replace(tzinfo=dt.UTC)
    return found


def freshness(spark: SparkSession, stack: LocalStack, work: Path, seconds: int) -> dict[str, Any]:
    """Per-event freshness of a tier-0 Postgres table applied by the run service."""
    with simple_capture(stack, "postgres") as capture:
        config = write_config(
            work / "fresh.yaml",
            config_dict(
                stack,
                [capture],
                str(work / "lake-fresh"),
                f"sqlite:///{work}/state-fresh.db",
                tables={capture.qualified_name: {"tier": 0}},
            ),
        )
        onboard(config)
        base_path = Path(config.lake.table_base_path(capture.qualified_name))
        table = f'"{capture.schema}"."{capture.table}"'
        capture.execute(f"insert into {table} (id, region, note) values (0, 'eu', 'warm-up')")
        with StateStore.open(config.state_store.url) as store:
            runner = ApplyRunner.for_config(spark, store, config)
            service = ApplyService(
                runner, select_targets(config), lambda tier: 0.0, workers=1, poll_seconds=0.2
            )
            thread = threading.Thread(target=service.run)
            thread.start()
            time.sleep(30)
            for key in range(1, seconds + 1):
                capture.execute((f"insert into {table} (id, region, note) values (%s, 'eu', 'e')", [key]))
                time.sleep(1.0)
            deadline = time.monotonic() + 120
            while store.get_applied_offsets(capture.qualified_name).get(0, 0) < seconds + 1:
                assert time.monotonic() < deadline, "the service did not catch up"
                time.sleep(0.5)
            service.stop()
            thread.join()
        completions = _completions(base_path)
        rows = (
            read_table(spark, str(base_path), meta_columns=True)
            .where("id > 0")
            .select("_hoodie_commit_time", F.unix_millis(F.col(SOURCE_TS_COLUMN)).alias("source_ms"))
            .collect()
        )
    lags = sorted(
        (completions[r["_hoodie_commit_time"]].timestamp() * 1000 - r["source_ms"]) / 1000 for r in rows
    )
    return {
        "events": len(lags),
        "p50_seconds": round(statistics.median(lags), 1),
        "p95_seconds": round(lags[int(0.95 * (len(lags) - 1))], 1),
        "max_seconds": round(lags[-1], 1),
        "min_seconds": round(lags[0], 1),
        "commits": len({r["_hoodie_commit_time"] for r in rows}),
    }


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
                "primary": {"port": stack.layout.ports.postgres_primary, "database": "app", "user": "cdc"},
                "tables": [{"name": "s.t", "partition_by": ["region"], "key": ["id"]}],
            }
            for topic in topics
        }
        config = write_config(work / f"conc-{workers}.yaml", base)
        onboard(config)
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
    parser.add_argument("--parts", default="readers,throughput,freshness,concurrency")
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
    if parts & {"readers", "throughput"}:
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
        for variant in VARIANTS:
            results["throughput"].append(
                throughput(spark, stack, work, topic, variant, args.rows, args.batch, counts)
            )
            print(json.dumps(results["throughput"][-1]), flush=True)
    if "freshness" in parts:
        results["freshness"] = freshness(spark, stack, work, args.freshness_seconds)
        print(json.dumps(results["freshness"]), flush=True)
    if "concurrency" in parts:
        results["concurrency"] = concurrency(spark, stack, work, args.tables, keys=2_000)
        print(json.dumps(results["concurrency"]), flush=True)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
