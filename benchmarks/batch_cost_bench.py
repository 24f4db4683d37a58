"""Fixed cost per batch: one batch of 10 changes into an N-row Hudi table, step by step, against Hudi's
own commit of the same upsert.

No stack is needed: a local-mode SparkSession writes a local-filesystem Hudi table, and the Kafka topic
is in-process.  The messages are Debezium Postgres change events as the property suite builds them
(``tests/support/change_model.py``: Confluent-framed Avro, ``source.sequence`` LSNs, the schemas
in an in-memory registry); the applier's Kafka calls (end offsets, the read on the executors, the
consumer-group commit) are replaced by that log, everything else is production code::

    .venv/bin/python benchmarks/batch_cost_bench.py [--rows 100000] [--changes 10] [--pairs 5]
        [--toasted 0] [--table-type COPY_ON_WRITE] [--index GLOBAL_BLOOM] [--json results.json]

The table (``id int, qty int, note string``, unpartitioned) is bulk-inserted with ``--rows`` rows as a
bootstrap would and copied.  Then ``--pairs`` pairs, interleaved (A B A B, after one warm-up pair that is
not counted): A, the applier applies a batch of ``--changes`` updates of random existing keys
(``--toasted`` of them leave the TOASTed ``note`` unchanged, so the batch reads the stored row) into the
first copy; B, a plain DataFrame Hudi upsert of the very rows A wrote (collected after A's write,
cached and counted before the timer), with the same options and commit metadata, into the second copy.
Per pair: the applier's steps (``BatchResult.steps``: plan, decode, schema, frame, write, offsets), the
write split into the timeline reads around it, building the rows (the persisted frame counted before
Hudi's write: the driver's per-key merge as local rows, the TOAST fill from the lake), and Hudi's write
and commit; B's seconds; A/B.  Figures are min/median/max over the pairs.  Both copies are checked
equal at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark import RDD, StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

ROOT = Path(__file__).resolve().parent.parent
# The Python workers decode with the in-memory registry of the test support: they must import it too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH")) if p
)
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.change_model import PG_TOPIC, SCHEMAS, Change, Emitter  # noqa: E402
from support.spark import shared_spark  # noqa: E402

from cdc_lake.apply import table_applier  # noqa: E402
from cdc_lake.apply.table_applier import ApplierOptions, BatchResult, TableApplier  # noqa: E402
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE  # noqa: E402
from cdc_lake.decode.registry import SchemaRegistry  # noqa: E402
from cdc_lake.hudi import timeline, writer  # noqa: E402
from cdc_lake.hudi.format import hudi_spec  # noqa: E402
from cdc_lake.hudi.options import HudiTableSpec, write_options  # noqa: E402
from cdc_lake.hudi.writer import hudi_rows, read_table, write_batch  # noqa: E402
from cdc_lake.kafka.offsets import OffsetRange, TopicState  # noqa: E402
from cdc_lake.kafka.reader import KafkaReader, KafkaReadSettings, RawMessage  # noqa: E402
from cdc_lake.lake.checkpoint import Checkpoint, Origin  # noqa: E402
from cdc_lake.lake.columns import (  # noqa: E402
    APPLIED_AT_COLUMN,
    DELETED_COLUMN,
    OP_COLUMN,
    ORDERING_COLUMN,
    SOFT_DELETED_COLUMN,
    SOURCE_TS_COLUMN,
)
from cdc_lake.lake.format import UNREAD, Unread, WriteOperation  # noqa: E402
from cdc_lake.lake.layout import CompactionSpec, IndexType, TableType  # noqa: E402
from cdc_lake.lake.schema_change import SourceDefaults  # noqa: E402
from cdc_lake.lake.target import TableTarget  # noqa: E402

STEPS = ("plan", "decode", "schema", "frame", "write", "offsets")
WRITE_PARTS = ("timeline", "rows", "hudi")


class Topic:
    """The in-process Kafka topic: the emitter's log, and the source rows the next updates start from."""

    def __init__(self, rows: int, seed: int) -> None:
        self.emitter = Emitter("postgres")
        self.random = random.Random(seed)
        self.rows = rows
        self.source: dict[int, dict[str, Any]] = {}

    def row(self, key: int) -> dict[str, Any]:
        """The current source row of ``key`` (bootstrap rows are ``qty = id % 1000, note = n<id>``)."""
        return self.source.get(key, {"id": key, "qty": key % 1000, "note": f"n{key}"})

    def update(self, changes: int, toasted: int) -> None:
        """One transaction updating ``changes`` distinct random keys; ``toasted`` leave ``note`` alone."""
        keys = self.random.sample(range(self.rows), changes)
        before = {key: self.row(key) for key in keys}
        batch = []
        for number, key in enumerate(keys):
            keep_note = number < toasted
            after = {**before[key], "qty": self.random.randrange(1_000_000)}
            if not keep_note:
                after["note"] = f"u{self.random.randrange(1_000_000)}"
            batch.append(Change("u", key, after, toast_unchanged=keep_note))
            self.source[key] = after
        self.emitter.emit(batch, before)

    def state(self, bootstrap_servers: str, topic: str, **_: Any) -> TopicState:
        """Stands in for :func:`cdc_lake.kafka.offsets.topic_state`."""
        return TopicState("bench", {p: (0, len(log)) for p, log in self.emitter.log.items()})

    def read(
        self, spark: SparkSession, settings: KafkaReadSettings, ranges: list[OffsetRange], reader: KafkaReader
    ) -> RDD[RawMessage]:
        """Stands in for :func:`cdc_lake.kafka.reader.read_ranges_in_spark`: one slice per range."""
        slices = [[m.raw for m in self.emitter.log[r.partition][r.start : r.end]] for r in ranges]
        return spark.sparkContext.parallelize(slices, len(slices)).flatMap(lambda messages: messages)


class WriteProbe:
    """Stands in for the applier's ``write_batch``: splits it into building the rows and Hudi's write, and
    keeps the rows it wrote (collected after the write) for the plain upsert."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}
        self.rows: list[Any] = []
        self.schema: Any = None
        self.metadata: dict[str, str] = {}

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
        began = time.perf_counter()
        df.persist(StorageLevel.MEMORY_AND_DISK)
        df.count()
        built = time.perf_counter()
        instant = write_batch(
            spark, spec, df, operation, commit_metadata, previous, unique_keys=unique_keys
        )
        self.parts = {"rows": built - began, "write": time.perf_counter() - built}
        self.rows, self.schema, self.metadata = df.collect(), df.schema, dict(commit_metadata or {})
        return instant


@contextmanager
def timed_timeline() -> Iterator[list[float]]:
    """Sum the seconds spent in :func:`latest_commit` (every caller's) into the yielded one-item list."""
    spent = [0.0]
    original = timeline.latest_commit

    def latest_commit(spark: SparkSession, base_path: str) -> Any:
        began = time.perf_counter()
        try:
            return original(spark, base_path)
        finally:
            spent[0] += time.perf_counter() - began

    timeline.latest_commit = writer.latest_commit = latest_commit  # type: ignore[assignment,attr-defined]
    try:
        yield spent
    finally:
        timeline.latest_commit = writer.latest_commit = original  # type: ignore[attr-defined]


def bootstrap(spark: SparkSession, spec: HudiTableSpec, rows: int) -> float:
    """Bulk-insert ``rows`` snapshot rows with the topic's start as the resume point; returns seconds."""
    frame = spark.range(rows).select(
        F.col("id").cast("int").alias("id"),
        (F.col("id") % 1000).cast("int").alias("qty"),
        F.concat(F.lit("n"), F.col("id").cast("string")).alias("note"),
        F.lit("r").alias(OP_COLUMN),
        F.current_timestamp().alias(SOURCE_TS_COLUMN),
        F.lit(SNAPSHOT_ORDERING_VALUE).alias(ORDERING_COLUMN),
        F.current_timestamp().alias(APPLIED_AT_COLUMN),
        F.lit(False).alias(SOFT_DELETED_COLUMN),
        F.lit(False).alias(DELETED_COLUMN),
    )
    began = time.perf_counter()
    checkpoint = Checkpoint(PG_TOPIC, {0: 0, 1: 0}, None, Origin.WATERMARK)
    write_batch(spark, spec, frame, WriteOperation.BULK_INSERT, checkpoint.metadata().to_dict())
    return time.perf_counter() - began


def plain_upsert(spark: SparkSession, spec: HudiTableSpec, probe: WriteProbe) -> float:
    """Hudi's own commit: the rows the applier wrote (delete marker under Hudi's name), cached and counted
    first, same options; seconds."""
    frame = hudi_rows(spark.createDataFrame(probe.rows, probe.schema)).persist(StorageLevel.MEMORY_AND_DISK)
    frame.count()
    began = time.perf_counter()
    options = write_options(spec, WriteOperation.UPSERT, probe.metadata)
    frame.write.format("hudi").options(**options).mode("append").save(spec.base_path)
    seconds = time.perf_counter() - began
    frame.unpersist()
    return seconds


def no_source(table: str, columns: Sequence[str]) -> SourceDefaults:
    """The benchmark's changes add no column; one that did would stop the table (no catalog to ask)."""
    return SourceDefaults({}, error=f"{table}: the benchmark has no source catalog to ask")


def one_pair(
    applier: TableApplier, topic: Topic, plain: HudiTableSpec, probe: WriteProbe, args: argparse.Namespace
) -> dict[str, float]:
    """A: the applier's batch; B: the plain upsert of its rows.  Seconds per step, A, B and A/B."""
    topic.update(args.changes, args.toasted)
    with timed_timeline() as spent:
        began = time.perf_counter()
        result: BatchResult = applier.apply_batch()
        applier_seconds = time.perf_counter() - began
    assert result.bad is None and result.changes == args.changes, result
    plain_seconds = plain_upsert(applier.spark, plain, probe)
    figures = {name: result.steps.get(name, 0.0) for name in STEPS}
    figures.update(
        timeline=spent[0], rows=probe.parts["rows"], hudi=probe.parts["write"],
        applier=applier_seconds, plain=plain_seconds, ratio=applier_seconds / plain_seconds,
        above_plain=applier_seconds - plain_seconds,
    )
    return figures


def spread(values: list[float]) -> dict[str, float]:
    """min/median/max, rounded to milliseconds."""
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3),
            "max": round(max(values), 3)}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Bootstrap the two copies, run the warm-up pair and ``--pairs`` pairs; the figures."""
    spark = shared_spark(work / "spark")
    target = TableTarget(
        qualified_name="bench.acc.d", engine="postgres", topic=PG_TOPIC, tier=0,
        base_path=str(work / "lake" / "applier"), key_fields=("id",), partition_fields=(), columns=None,
        table_type=TableType(args.table_type), index=IndexType(args.index),
        compaction=CompactionSpec(True, 5), soft_deletes=False,
    )
    spec = hudi_spec(target.spec(("id",)))
    bootstrap_seconds = bootstrap(spark, spec, args.rows)
    plain = replace(spec, base_path=str(work / "lake" / "plain"))
    shutil.copytree(spec.base_path, plain.base_path)
    topic = Topic(args.rows, args.seed)
    probe = WriteProbe()
    replaced: list[tuple[str, Callable[..., Any]]] = [
        ("topic_state", topic.state), ("read_ranges_in_spark", topic.read),
        ("commit_group_offsets", lambda *_: True),
    ]
    originals = {name: getattr(table_applier, name) for name, _ in replaced}
    for name, stand_in in replaced:
        setattr(table_applier, name, stand_in)
    writer.write_batch = probe  # type: ignore[assignment]
    try:
        options = ApplierOptions(
            KafkaReadSettings("in-process"), max_events=10_000, source_defaults=no_source
        )
        registry: SchemaRegistry = SCHEMAS  # type: ignore[assignment]
        applier = TableApplier(spark, target, options, registry)
        warm_up = one_pair(applier, topic, plain, probe, args)
        pairs = [one_pair(applier, topic, plain, probe, args) for _ in range(args.pairs)]
    finally:
        for name, original in originals.items():
            setattr(table_applier, name, original)
        writer.write_batch = write_batch
    lake = read_table(spark, spec.base_path).drop(APPLIED_AT_COLUMN).orderBy("id")
    reference = read_table(spark, plain.base_path).drop(APPLIED_AT_COLUMN).orderBy("id")
    assert lake.exceptAll(reference).count() == 0 and reference.exceptAll(lake).count() == 0
    return {
        "date": dt.datetime.now(tz=dt.UTC).isoformat(timespec="seconds"),
        "rows": args.rows, "changes": args.changes, "toasted": args.toasted, "pairs": args.pairs,
        "table_type": args.table_type, "index": args.index,
        "bootstrap_seconds": round(bootstrap_seconds, 1),
        "warm_up": {name: round(value, 3) for name, value in warm_up.items()},
        "figures": {name: spread([p[name] for p in pairs]) for name in pairs[0]},
        "load_average": [round(load, 2) for load in os.getloadavg()],
    }


def show(result: dict[str, Any]) -> None:
    """The figures as a table: step, min, median, max (seconds)."""
    print(
        f"{result['rows']} rows, {result['changes']} changes ({result['toasted']} TOASTed), "
        f"{result['table_type']} {result['index']}, {result['pairs']} pairs, load {result['load_average']}"
    )
    for name, figure in result["figures"].items():
        indent = "  of which " if name in WRITE_PARTS else ""
        print(f"  {indent}{name:<12} {figure['min']:8.3f} {figure['median']:8.3f} {figure['max']:8.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the table (1000000: the goal)")
    parser.add_argument("--changes", type=int, default=10, help="updates per batch")
    parser.add_argument("--toasted", type=int, default=0, help="of which leave the TOASTed note unchanged")
    parser.add_argument("--pairs", type=int, default=5, help="applier/plain pairs after a warm-up")
    parser.add_argument("--table-type", default="COPY_ON_WRITE", choices=[t.value for t in TableType])
    parser.add_argument("--index", default="GLOBAL_BLOOM", choices=[i.value for i in IndexType])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one, removed)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        result = run(args, args.work)
    else:
        with tempfile.TemporaryDirectory(prefix="batch-cost-") as work:
            result = run(args, Path(work))
    show(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
