"""Hudi's commit of a small random-key upsert into a large table, or the compaction after it, under the
product's writer options and under other option sets, interleaved.

The question it answers: what a Hudi option costs a tier-0 commit (or a compaction), apart from the
applier.  No stack is needed: a local-mode SparkSession bulk-inserts a ``--rows``-row table (``id, qty,
note`` and the lake contract's columns, unpartitioned) in the layout asked (default: the tier-0 layout,
MERGE_ON_READ + the bucket index, ``--buckets`` 4, tier 0's compaction settings: planned by the writer,
executed by none), copies it once per arm, then runs ``--rounds`` rounds after a warm-up round that is
not counted.  A round draws ``--changes`` random existing keys once and upserts them into every arm's
copy (the order reversed every other round), timing each arm's ``DataFrame.write`` alone (the rows are
cached and counted before).  Every arm writes :func:`cdc_lake.hudi.options.write_options` for an upsert
of unique keys, then its own overrides::

    .venv/bin/python benchmarks/commit_options_bench.py [--rows 1000000] [--changes 2000] [--rounds 8]
        [--arm with-metadata-table:hoodie.metadata.enable=true] [--arm NAME:KEY=VALUE,KEY=VALUE]
        [--table-version 9] [--buckets 4] [--compaction] [--json results.json]

With ``--compaction`` a round times, after each arm's upsert, the compaction of every file group that
has logs (:func:`cdc_lake.hudi.services.execute_compactions`, as ``run``'s table services execute a
plan); an arm's options are then the table's passed-through ``format_options`` (a protected option is
refused), which the compaction's client takes too.  ``--rows 2500000 --buckets 1`` is one file group of
a 10M-row tier-0 table.

``product`` (no overrides) is always an arm; with no ``--arm`` the other is ``with-metadata-table``
(``hudi-defaults`` with ``--compaction``: gzip and key bloom filters, Hudi 1.1's own encoding).
Printed and written: per arm min / median / max seconds and the median's ratio to ``product``'s; each
round's seconds.  The copies are read back equal at the end (Spark, every column).
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
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.spark import shared_spark  # noqa: E402

from cdc_lake.config.lake import TIER0_LAYOUT  # noqa: E402
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE  # noqa: E402
from cdc_lake.hudi.format import hudi_spec  # noqa: E402
from cdc_lake.hudi.options import (  # noqa: E402
    DELETE_MARKER_COLUMN,
    HudiTableSpec,
    passthrough_option_problem,
    write_options,
)
from cdc_lake.hudi.services import execute_compactions  # noqa: E402
from cdc_lake.hudi.writer import read_table  # noqa: E402
from cdc_lake.lake.columns import (  # noqa: E402
    APPLIED_AT_COLUMN,
    OP_COLUMN,
    ORDERING_COLUMN,
    SOFT_DELETED_COLUMN,
    SOURCE_TS_COLUMN,
)
from cdc_lake.lake.format import PlanNow, WriteOperation  # noqa: E402
from cdc_lake.lake.layout import IndexType, TableSpec, TableType  # noqa: E402
from cdc_lake.lake.target import compaction_spec  # noqa: E402

PRODUCT = "product"
DEFAULT_ARM = ("with-metadata-table", {"hoodie.metadata.enable": "true"})
COMPACTION_ARM = (
    "hudi-defaults",
    {"hoodie.parquet.compression.codec": "gzip", "hoodie.parquet.bloom.filter.enabled": "true"},
)
"""The arm ``--compaction`` compares by default: base files as Hudi 1.1 writes them unless told."""


def parse_arm(text: str) -> tuple[str, dict[str, str]]:
    """``NAME:KEY=VALUE,KEY=VALUE`` as (name, overrides); ValueError naming the arm when malformed."""
    name, _, settings = text.partition(":")
    overrides = dict(item.split("=", 1) for item in settings.split(",") if "=" in item)
    if not name or name == PRODUCT or not overrides or len(overrides) != len(settings.split(",")):
        raise ValueError(f"--arm {text!r}: give NAME:KEY=VALUE[,KEY=VALUE], NAME not {PRODUCT!r}")
    return name, overrides


def rows_frame(keys: DataFrame, ordering: str) -> DataFrame:
    """The rows of ``keys`` (a frame of ``id``) as the applier writes them, with ``ordering``."""
    return keys.select(
        F.col("id").cast("int").alias("id"),
        (F.col("id") % 1000).cast("int").alias("qty"),
        F.concat(F.lit("n"), F.col("id").cast("string"), F.lit(f"-{int(ordering)}")).alias("note"),
        F.lit("u").alias(OP_COLUMN),
        F.current_timestamp().alias(SOURCE_TS_COLUMN),
        F.lit(ordering).alias(ORDERING_COLUMN),
        F.current_timestamp().alias(APPLIED_AT_COLUMN),
        F.lit(False).alias(SOFT_DELETED_COLUMN),
        F.lit(False).alias(DELETE_MARKER_COLUMN),
    )


def table_spec(args: argparse.Namespace, base_path: str) -> HudiTableSpec:
    """The benchmark table's spec in the layout asked, with tier 0's compaction settings."""
    return hudi_spec(TableSpec(
        name="bench.commit.options", base_path=base_path, key_fields=("id",),
        table_type=TableType(args.table_type), index=IndexType(args.index),
        compaction=compaction_spec(TIER0_LAYOUT.compaction),
        table_version=args.table_version, buckets=args.buckets,
    ))


def arm_spec(spec: HudiTableSpec, path: Path, overrides: dict[str, str], compaction: bool) -> HudiTableSpec:
    """An arm's copy of ``spec`` at ``path``; timing compactions, its ``overrides`` as the table's
    passed-through options, which a table service's client takes too (ValueError naming a protected one)."""
    if not compaction:
        return replace(spec, base_path=str(path))
    for key in overrides:
        problem = passthrough_option_problem(key)
        if problem is not None:
            raise ValueError(f"--arm with --compaction: {problem}")
    return replace(spec, base_path=str(path), extra_options=tuple(overrides.items()))


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Bulk-insert, copy per arm, the warm-up round and ``--rounds`` rounds; the figures."""
    spark = shared_spark(work / "spark")
    arms = dict([(PRODUCT, {}), *(args.arm or [COMPACTION_ARM if args.compaction else DEFAULT_ARM])])
    spec = table_spec(args, str(work / "bootstrap"))
    began = time.perf_counter()
    rows_frame(spark.range(args.rows), SNAPSHOT_ORDERING_VALUE).write.format("hudi").options(
        **write_options(spec, WriteOperation.BULK_INSERT)
    ).mode("overwrite").save(spec.base_path)
    bootstrap_seconds = time.perf_counter() - began
    specs = {name: arm_spec(spec, work / f"arm-{number}", arms[name], args.compaction)
             for number, name in enumerate(arms)}
    options = {}
    for name, each in specs.items():
        shutil.copytree(spec.base_path, each.base_path)
        options[name] = {**write_options(each, WriteOperation.UPSERT, unique_keys=True), **arms[name]}
    draw = random.Random(args.seed)
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    for round_number in range(args.rounds + 1):
        drawn = draw.sample(range(args.rows), args.changes)
        keys = spark.createDataFrame([(key,) for key in drawn], "id long")
        ordering = str(round_number + 1).zfill(len(SNAPSHOT_ORDERING_VALUE))
        frame = rows_frame(keys, ordering).persist(StorageLevel.MEMORY_ONLY)
        frame.count()
        order = list(arms) if round_number % 2 == 0 else list(reversed(arms))
        for name in order:
            began = time.perf_counter()
            frame.write.format("hudi").options(**options[name]).mode("append").save(specs[name].base_path)
            if args.compaction:
                began = time.perf_counter()
                if not execute_compactions(spark, specs[name], plan=PlanNow.EVERY_FILE_GROUP):
                    raise RuntimeError(f"arm {name}: round {round_number} compacted nothing")
            if round_number:
                seconds[name].append(time.perf_counter() - began)
        frame.unpersist()
        if round_number:
            print(f"round {round_number}: " + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items()),
                  flush=True)
    reference = read_table(spark, specs[PRODUCT].base_path).drop(APPLIED_AT_COLUMN, SOURCE_TS_COLUMN)
    for name, each in specs.items():
        lake = read_table(spark, each.base_path).drop(APPLIED_AT_COLUMN, SOURCE_TS_COLUMN)
        assert lake.exceptAll(reference).count() == 0 and reference.exceptAll(lake).count() == 0, name
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    return {
        "date": dt.datetime.now(tz=dt.UTC).isoformat(timespec="seconds"),
        "rows": args.rows, "changes": args.changes, "rounds": args.rounds,
        "timed": "compaction" if args.compaction else "upsert", "buckets": args.buckets,
        "layout": {"table_type": args.table_type, "index": args.index, "table_version": args.table_version},
        "bootstrap_seconds": round(bootstrap_seconds, 1),
        "arms": {name: dict(overrides) for name, overrides in arms.items()},
        "figures": {
            name: {
                "min": round(min(values), 3), "median": round(medians[name], 3), "max": round(max(values), 3),
                "median_ratio_to_product": round(medians[name] / medians[PRODUCT], 2),
            }
            for name, values in seconds.items()
        },
        "rounds_seconds": {name: [round(value, 3) for value in values] for name, values in seconds.items()},
        "load_average": [round(load, 2) for load in os.getloadavg()],
    }


def show(result: dict[str, Any]) -> None:
    """The figures as a table: arm, min, median, max (seconds), median / product's."""
    layout = result["layout"]
    print(f"{result['timed']}: {result['rows']} rows in {result['buckets']} bucket(s), "
          f"{result['changes']} changes a round, {result['rounds']} rounds, "
          f"{layout['table_type']} + {layout['index']} (version {layout['table_version']}), "
          f"load {result['load_average']}")
    for name, figure in result["figures"].items():
        print(f"  {name:<24} {figure['min']:7.3f} {figure['median']:7.3f} {figure['max']:7.3f}"
              f"  x{figure['median_ratio_to_product']:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the table (1,000,000)")
    parser.add_argument("--changes", type=int, default=2_000, help="keys a round (about 4 s at 500/s)")
    parser.add_argument("--rounds", type=int, default=8, help="counted rounds after a warm-up round")
    parser.add_argument("--arm", type=parse_arm, action="append",
                        help="NAME:KEY=VALUE[,KEY=VALUE]: options over the product's (repeatable)")
    parser.add_argument("--table-type", choices=[t.value for t in TableType], default="MERGE_ON_READ")
    parser.add_argument("--index", choices=[i.value for i in IndexType], default="BUCKET")
    parser.add_argument("--table-version", type=int, default=9, help="9: as the freshness benchmark writes")
    parser.add_argument("--buckets", type=int, default=4, help="file groups of a bucket-index table (4)")
    parser.add_argument("--compaction", action="store_true",
                        help="time the compaction after each upsert (arms: passed-through options)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    for _, overrides in args.arm or []:  # refused before the bulk insert, in one line
        try:
            arm_spec(table_spec(args, "unused"), Path("unused"), overrides, args.compaction)
        except ValueError as exc:
            parser.error(str(exc))
    with tempfile.TemporaryDirectory(prefix="commit-options-") as scratch:
        result = run(args, Path(scratch))
    show(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
