"""The applier against two limit arms, in interleaved pairs (issue 24, goal 2).

Run it with the stack up (``cdc-lake stack up``)::

    .venv/bin/python benchmarks/limit_bench.py [--rows 1000000] [--events 100000] [--pairs 5]
        [--warmup 1] [--variants COPY_ON_WRITE:GLOBAL_BLOOM,MERGE_ON_READ:RECORD_INDEX,MERGE_ON_READ:BUCKET]
        [--driver-memory 2g] [--json results.json]

One topic receives ``--events`` Debezium-shaped Postgres change events (``apply_bench.produce_events``:
Confluent Avro, schemas in the stack's registry; 80% updates, 10% inserts, 10% deletes, each delete
followed by its tombstone).  Per variant (table type : index) a table of ``--rows`` rows is bootstrapped
once (``apply_bench.bootstrap_table``) as the master copy; then each pair runs three arms in a fixed
order, A B C A B C ..., each into its own fresh copy (``copytree``) of the master:

A. The applier: the production path on one batch (``ApplyRunner.for_config`` + ``apply_once``, a fresh
   state store per pair): Kafka read, decode, last change per key, Hudi upsert, one commit.  Its written
   rows are saved as Parquet once (``apply_bench.WriteProbe``, outside its time).
B. Write-only: a plain Hudi upsert of those saved rows (``apply_bench.plain_upsert``: read and cached
   before the timer), ``write_options(spec, UPSERT)``.
C. A stock pipeline, :func:`stock_pipeline`: Spark's own Kafka source and ``from_avro``, one dedup, the
   same Hudi options.  **Its code is frozen here as the baseline**: it is written against Spark, Avro
   and Hudi only (from cdc-lake it takes nothing but ``write_options`` and the column names of the lake
   contract), so later changes to the product do not move it.  Do not "improve" it along with the
   product; a change to it is a change of the baseline and must be stated with the figures.  One such
   change (2026-12-05): its delete flag is named Hudi's ``_hoodie_is_deleted`` in its code, as its
   docstring always said; it was the lake contract's marker name, which became ``_cdc_remove`` on
   2026-12-02, so from then both limit arms upserted deletes as a plain column (a MERGE_ON_READ + BUCKET
   run failed on it; the figures recorded before 2026-12-02 are unaffected).

After each pair both limit arms' tables are asserted equal in content to the applier's (every business
column, row count, no duplicate key), and the applier's row count to what the events imply.  Figures:
per pair the seconds of each arm and the ratios applier/write-only and applier/stock; per variant their
min/median/max.  ``--warmup`` pairs run (and are checked) first and are not counted.

Spark's Kafka source (``spark-sql-kafka-0-10``) and ``spark-avro`` at pyspark's own version are part of
the product's Spark jar set (:func:`cdc_lake.jvm.spark_jars`); the benchmark resolves that set through
:func:`cdc_lake.jvm.resolve`, checks both coordinates are in it, and starts its session with those jars
(the Hudi bundle among them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyspark
import requests
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from cdc_lake import jvm
from cdc_lake.apply.runner import ApplyRunner, apply_once
from cdc_lake.apply.table_applier import use_driver_python
from cdc_lake.config import Config
from cdc_lake.hudi import writer
from cdc_lake.hudi.format import hudi_spec
from cdc_lake.hudi.options import DELETE_MARKER_COLUMN, HudiTableSpec, write_options
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.columns import (
    APPLIED_AT_COLUMN,
    OP_COLUMN,
    ORDERING_COLUMN,
    SOFT_DELETED_COLUMN,
    SOURCE_TS_COLUMN,
)
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.target import TableTarget, select_targets
from cdc_lake.spark import get_spark
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apply_bench import WriteProbe, bootstrap_table, plain_upsert, produce_events
from support.apply import config_dict, record_catching_up
from support.common import write_and_load

BUSINESS_COLUMNS = ("id", "region", "amount", "note", "updated_at")
"""The benchmark table's source columns (``apply_bench._schemas``), compared between the arms."""

DEFAULT_VARIANTS = "COPY_ON_WRITE:GLOBAL_BLOOM,MERGE_ON_READ:RECORD_INDEX"

STOCK_JARS = (
    f"org.apache.spark:spark-sql-kafka-0-10_{jvm.SCALA_BINARY_VERSION}:{pyspark.__version__}:jar",
    f"org.apache.spark:spark-avro_{jvm.SCALA_BINARY_VERSION}:{pyspark.__version__}:jar",
)
"""The stock pipeline's Spark modules: Spark's Kafka source and ``from_avro``, at pyspark's version."""


def stock_pipeline(
    spark: SparkSession, bootstrap_servers: str, registry_url: str, topic: str, spec: HudiTableSpec
) -> float:
    """FROZEN BASELINE (see the module docstring).  The whole topic, earliest to latest, through Spark's
    Kafka source (batch) and ``from_avro`` into ``spec``'s table with one upsert; returns its seconds.

    Tombstones (null values) are dropped and the 5-byte Confluent header (magic byte, schema id) cut;
    the value is decoded with the registered writer schema; the Debezium envelope is flattened (``after``,
    ``before`` for a delete); ONE dedup keeps each key's last change by source position (the change's
    LSN, then the Kafka partition and offset); a delete becomes a row flagged ``_hoodie_is_deleted``
    (Hudi's hard delete inside an upsert), as the table's options expect.  The lake's bookkeeping columns
    get equivalent values: the op, the source commit time, the LSN as the 40-digit ordering value, the
    write time, not soft-deleted.
    """
    began = time.monotonic()
    subject = requests.get(f"{registry_url}/subjects/{topic}-value/versions/latest", timeout=10)
    subject.raise_for_status()
    writer_schema = subject.json()["schema"]
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    payload = F.expr("substring(value, 6, length(value) - 5)")
    events = raw.where(F.col("value").isNotNull()).select(
        from_avro(payload, writer_schema).alias("e"), F.col("partition"), F.col("offset")
    )
    is_delete = F.col("e.op") == F.lit("d")
    image = F.when(is_delete, F.col("e.before")).otherwise(F.col("e.after"))
    flat = events.select(
        image.getField("id").alias("id"),
        image.getField("region").alias("region"),
        image.getField("amount").alias("amount"),
        image.getField("note").alias("note"),
        F.timestamp_micros(image.getField("updated_at")).cast("timestamp_ntz").alias("updated_at"),
        F.col("e.op").alias(OP_COLUMN),
        F.timestamp_millis(F.col("e.source.ts_ms")).alias(SOURCE_TS_COLUMN),
        F.lpad(F.col("e.source.lsn").cast("string"), 40, "0").alias(ORDERING_COLUMN),
        F.current_timestamp().alias(APPLIED_AT_COLUMN),
        F.lit(False).alias(SOFT_DELETED_COLUMN),
        is_delete.alias(DELETE_MARKER_COLUMN),
        F.col("e.source.lsn").alias("_lsn"),
        F.col("partition"),
        F.col("offset"),
    )
    last = Window.partitionBy("id").orderBy(F.desc("_lsn"), F.desc("partition"), F.desc("offset"))
    latest = (
        flat.withColumn("_rank", F.row_number().over(last))
        .where(F.col("_rank") == 1)
        .drop("_rank", "_lsn", "partition", "offset")
    )
    latest.write.format("hudi").options(**write_options(spec, WriteOperation.UPSERT)).mode("append").save(
        spec.base_path
    )
    return time.monotonic() - began


def partitioning(index: str) -> dict[str, Any]:
    """The table's ``partition_by`` for ``index``: by region, unless the index is per partition (the
    bucket index, tier 0's layout, whose tables are unpartitioned)."""
    return {} if index == "BUCKET" else {"partition_by": ["region"]}


def variant_config(
    stack: LocalStack, root: Path, topic: str, variant: tuple[str, str], messages: int
) -> Config:
    """A config of one table (the topic's) with its lake and state store under ``root``, recorded
    CATCHING_UP, whose batch holds the whole topic: every pair's applier and the master use the same
    source and table names, so their Hudi tables have the same name."""
    table_type, index = variant
    prefix, schema, table = topic.split(".")
    base = config_dict(
        stack,
        [],
        str(root / "lake"),
        f"sqlite:///{root}/state.db",
        lake={"index": index, "table_type": table_type},
        apply={"batch_max_events": 10 * messages},
    )
    base["sources"] = {
        f"limit_{table_type}_{index}".lower(): {
            "engine": "postgres",
            "topic_prefix": prefix,
            "primary": {"port": stack.layout.ports.postgres_primary, "database": "app", "user": "cdc"},
            "tables": [{"name": f"{schema}.{table}", "key": ["id"], **partitioning(index)}],
        }
    }
    root.mkdir(parents=True, exist_ok=True)
    config: Config = write_and_load(root / "cdc-lake.yaml", base)
    record_catching_up(config)
    return config


def applier_arm(
    spark: SparkSession, config: Config, target: TableTarget, rows_path: Path
) -> tuple[float, dict[str, Any]]:
    """The applier's full path on one batch into ``target`` (already a copy of the master); the first
    call saves the written rows at ``rows_path`` (outside the timed figure).  Returns (seconds, figures)."""
    probe = WriteProbe(None if rows_path.exists() else rows_path)
    writer.write_batch = probe  # type: ignore[assignment]
    try:
        with StateStore.open(config.state_store.url) as store:
            runner = ApplyRunner.for_config(spark, store, config, slices=4)
            began = time.monotonic()
            (outcome,) = apply_once(runner, [target], workers=1)
            seconds = time.monotonic() - began - probe.kept_seconds
    finally:
        writer.write_batch = write_batch
    if outcome.error is not None:
        raise RuntimeError(f"the applier failed on {target.qualified_name}: {outcome.error}")
    (batch,) = probe.batches
    return seconds, {
        "messages": outcome.offsets,
        "changes": outcome.changes,
        "commits": outcome.batches,
        "written_rows": batch["rows"],
        "materialise_seconds": round(batch["materialise_seconds"], 2),
        "write_seconds": round(batch["write_seconds"], 2),
    }


def business(spark: SparkSession, base_path: str) -> DataFrame:
    """The table's business columns (snapshot query)."""
    return read_table(spark, base_path).select(*BUSINESS_COLUMNS)


def check_rows(spark: SparkSession, path: str, expected: int) -> DataFrame:
    """``path``'s table holds ``expected`` rows, keys unique; returns its business columns."""
    rows = business(spark, path)
    stored, distinct = rows.count(), rows.select("id").distinct().count()
    if not stored == distinct == expected:
        raise AssertionError(f"{path}: {stored} rows, {distinct} distinct keys, expected {expected}")
    return rows


def check_equal(spark: SparkSession, reference: DataFrame, path: str, expected: int) -> None:
    """``path``'s table holds exactly the ``reference`` business rows, ``expected`` of them."""
    rows = check_rows(spark, path, expected)
    missing, extra = reference.exceptAll(rows).count(), rows.exceptAll(reference).count()
    if missing or extra:
        raise AssertionError(
            f"{path}: {missing} of the applier's rows missing, {extra} rows the applier does not have"
        )


def spread(values: list[float]) -> dict[str, float]:
    """min/median/max, rounded."""
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def run_variant(
    spark: SparkSession,
    stack: LocalStack,
    work: Path,
    topic: str,
    variant: tuple[str, str],
    rows: int,
    counts: dict[str, int],
    pairs: int,
    warmup: int,
) -> dict[str, Any]:
    """Bootstrap the master copy of ``variant`` and run ``warmup + pairs`` interleaved pairs."""
    table_type, index = variant
    home = work / f"{table_type}_{index}".lower()
    master_config = variant_config(stack, home / "master", topic, variant, counts["messages"])
    (master,) = select_targets(master_config)
    bootstrap_seconds = bootstrap_table(spark, master, rows)
    rows_path = home / "batch-rows"
    expected = rows + counts["inserts"] - counts["deletes"]
    measured: list[dict[str, Any]] = []
    for number in range(warmup + pairs):
        pair_root = home / f"pair-{number}"
        config = variant_config(stack, pair_root / "applier", topic, variant, counts["messages"])
        (target,) = select_targets(config)
        shutil.copytree(master.base_path, target.base_path)
        applier_seconds, applier_figures = applier_arm(spark, config, target, rows_path)

        spec = hudi_spec(target.spec(("id",)))
        write_spec = replace(spec, base_path=str(pair_root / "write-only"))
        shutil.copytree(master.base_path, write_spec.base_path)
        write_seconds, upserted = plain_upsert(spark, write_spec, rows_path)

        stock_spec = replace(spec, base_path=str(pair_root / "stock"))
        shutil.copytree(master.base_path, stock_spec.base_path)
        stock_seconds = stock_pipeline(
            spark, stack.kafka.address(), stack.registry.confluent_url, topic, stock_spec
        )

        reference = check_rows(spark, target.base_path, expected).persist()
        check_equal(spark, reference, write_spec.base_path, expected)
        check_equal(spark, reference, stock_spec.base_path, expected)
        reference.unpersist()
        figures = {
            "pair": number - warmup + 1 if number >= warmup else f"warmup-{number + 1}",
            "applier_seconds": round(applier_seconds, 2),
            "write_only_seconds": round(write_seconds, 2),
            "stock_seconds": round(stock_seconds, 2),
            "applier_over_write_only": round(applier_seconds / write_seconds, 3),
            "applier_over_stock": round(applier_seconds / stock_seconds, 3),
            "upserted_rows": upserted,
            "applier": applier_figures,
            "load_average": [round(load, 1) for load in os.getloadavg()],
        }
        print(json.dumps({"variant": f"{table_type}:{index}", **figures}), flush=True)
        measured.append(figures)
        shutil.rmtree(pair_root)
    counted = [f for f in measured if isinstance(f["pair"], int)]
    return {
        "table_type": table_type,
        "index": index,
        "rows": rows,
        "bootstrap_seconds": round(bootstrap_seconds, 1),
        "pairs": measured,
        "applier_over_write_only": spread([f["applier_over_write_only"] for f in counted]),
        "applier_over_stock": spread([f["applier_over_stock"] for f in counted]),
        "applier_seconds": spread([f["applier_seconds"] for f in counted]),
        "write_only_seconds": spread([f["write_only_seconds"] for f in counted]),
        "stock_seconds": spread([f["stock_seconds"] for f in counted]),
    }


def table(results: list[dict[str, Any]]) -> str:
    """The figures as a text table (80 columns)."""
    lines = [
        f"{'variant':<28}{'figure':<22}{'min':>10}{'median':>10}{'max':>10}",
        "-" * 80,
    ]
    figures = (
        ("applier_over_write_only", "applier / write-only"),
        ("applier_over_stock", "applier / stock"),
        ("applier_seconds", "applier s"),
        ("write_only_seconds", "write-only s"),
        ("stock_seconds", "stock s"),
    )
    for result in results:
        name = f"{result['table_type']}:{result['index']}"
        for key, label in figures:
            s = result[key]
            lines.append(f"{name:<28}{label:<22}{s['min']:>10.2f}{s['median']:>10.2f}{s['max']:>10.2f}")
            name = ""
    return "\n".join(lines)


def spark_session(driver_memory: str) -> SparkSession:
    """The benchmark's session: the product's Spark jar set (Hudi bundle, Kafka source, spark-avro)."""
    default = Config.default()
    jar_set = jvm.spark_jars(pyspark.__version__, default.lake.format)
    coordinates = {artifact.coordinate for artifact in jar_set.artifacts}
    absent = [c for c in STOCK_JARS if c not in coordinates]
    if absent:
        raise RuntimeError(f"the Spark jar set lacks {', '.join(absent)}")
    jars = [str(path) for path in jvm.resolve(jar_set)]
    spark = get_spark(
        default.spark.model_copy(
            update={"driver_memory": driver_memory, "app_name": "cdc-lake-limit-bench", "jars": jars}
        ),
        default.lake,
    )
    use_driver_python(spark)
    return spark


def main() -> None:
    """Produce the events, run the pairs per variant, print the table and optionally save JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1, help="pairs run first and not counted")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help="TABLE_TYPE:INDEX, comma list")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    variants = [tuple(v.split(":", 1)) for v in args.variants.split(",")]
    if any(len(v) != 2 for v in variants):
        parser.error(f"--variants: '{args.variants}' is not a comma list of TABLE_TYPE:INDEX")

    started = dt.datetime.now(dt.UTC)
    load_start = [round(load, 2) for load in os.getloadavg()]
    stack = LocalStack(Config.default().stack)
    work = Path(tempfile.mkdtemp(prefix="cdc-lake-limit-bench-"))
    spark = spark_session(args.driver_memory)
    topic = f"limit_{int(time.time())}.s.t"
    began = time.monotonic()
    counts = produce_events(stack, topic, args.rows, args.events, seed=42)
    print(json.dumps({"events": counts, "produce_seconds": round(time.monotonic() - began, 1)}), flush=True)
    results = [
        run_variant(spark, stack, work, topic, (v[0], v[1]), args.rows, counts, args.pairs, args.warmup)
        for v in variants
    ]
    summary = {
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_average_start": load_start,
        "load_average_end": [round(load, 2) for load in os.getloadavg()],
        "rows": args.rows,
        "events": counts,
        "pairs": args.pairs,
        "warmup": args.warmup,
        "variants": results,
    }
    print(table(results))
    print(json.dumps({k: v for k, v in summary.items() if k != "variants"}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
