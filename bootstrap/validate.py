"""``cdc-lake validate``: reconcile a table's source (read replica) with its lake copy, down to keys.

It reads the source as a bootstrap does (:mod:`bootstrap.lake_types`: the same queries and lake
types, so equal rows hash equal) and the lake with Spark, so tables larger than one process fit:

1. **A common point.**  The primary's position now is taken, the replica is waited for past it,
   and the lake is waited for until its applied offsets reach the topic's end offsets seen after
   that (``--catch-up-timeout``).  A change the connector has not published yet at that point (a
   paused connector) is, correctly, a difference.  With ``--older-than SECONDS`` and
   ``--updated-column COLUMN``, only rows untouched for that long are compared, for tables that
   never quiesce.
2. **Counts and range checksums.**  Every row gets a 64-bit hash of its non-key columns; rows are
   grouped in key ranges (equal-width ranges of an integral first key column, hash buckets of the
   key otherwise) and each range's row count and hash sum are compared.
3. **Down to keys.**  Only the rows of ranges that differ are joined by key: a key only in the
   source is *missing*, only in the lake *extra*, in both with different hashes *different*.

The source side is read over JDBC from the replica in key-range partitions (``--partitions``);
both sides stay in Spark, and only the differing keys (up to ``--max-keys`` of each kind) reach
the driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType

from bootstrap.keys import record_key, selected_columns
from bootstrap.lake_types import column_reads, to_lake_types
from bootstrap.run import _snapshot_engine
from cdc_lake.apply.changes import DELETED_COLUMN, SOFT_DELETED_COLUMN
from cdc_lake.config import Config
from cdc_lake.exceptions import BootstrapError
from cdc_lake.hudi.writer import read_table
from cdc_lake.kafka.offsets import end_offsets
from cdc_lake.onboard.plan import table_topic
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)

_HASH = "_cdc_validate_hash"
_BUCKET = "_cdc_validate_bucket"
_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class ValidateOptions:
    """How to validate: ranges, partitions, waits, how many keys to list, and the age filter."""

    buckets: int = 256
    partitions: int = 8
    catch_up_timeout: float = 300.0
    max_keys: int = 20
    older_than_seconds: int | None = None
    updated_column: str | None = None


@dataclass
class ValidateResult:
    """What one table's validation found."""

    table: str
    source_rows: int = 0
    lake_rows: int = 0
    ranges: int = 0
    differing_ranges: int = 0
    missing: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)
    different: list[dict[str, Any]] = field(default_factory=list)
    missing_count: int = 0
    extra_count: int = 0
    different_count: int = 0
    position: str | None = None
    caught_up: bool = True
    seconds: float = 0.0

    @property
    def matches(self) -> bool:
        """True when the source and the lake hold the same rows."""
        return self.missing_count == self.extra_count == self.different_count == 0 and (
            self.source_rows == self.lake_rows
        )

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "table": self.table,
            "matches": self.matches,
            "source_rows": self.source_rows,
            "lake_rows": self.lake_rows,
            "ranges": self.ranges,
            "differing_ranges": self.differing_ranges,
            "missing_count": self.missing_count,
            "extra_count": self.extra_count,
            "different_count": self.different_count,
            "missing": self.missing,
            "extra": self.extra,
            "different": self.different,
            "position": self.position,
            "caught_up": self.caught_up,
            "seconds": round(self.seconds, 3),
        }


def _col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _wait_lake_caught_up(config: Config, store: StateStore, name: str, topic: str, timeout: float) -> bool:
    """Wait until the applied offsets of ``name`` reach the topic's end offsets seen now."""
    ends = end_offsets(config.kafka.bootstrap_servers, topic, extra=dict(config.kafka.consumer))
    deadline = time.monotonic() + timeout
    while True:
        applied = store.get_applied_offsets(name)
        if all(applied.get(partition, 0) >= end for partition, end in ends.items()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_SECONDS)


def _buckets(frame: DataFrame, key: Sequence[str], bucket_of: Column) -> DataFrame:
    return frame.select(*[_col(k) for k in key], bucket_of.alias(_BUCKET), _col(_HASH))


def _hashed(frame: DataFrame, key: Sequence[str], values: Sequence[str]) -> DataFrame:
    hashed = F.xxhash64(*[_col(v) for v in values]) if values else F.lit(0).cast("long")
    return frame.select(*[_col(k) for k in key], hashed.alias(_HASH))


def _range_of(spark: SparkSession, frames: Sequence[DataFrame], key: Sequence[str], buckets: int) -> Column:
    """Equal-width ranges of an integral first key column, else hash buckets of the whole key."""
    first = frames[0].schema[key[0]].dataType
    if isinstance(first, IntegralType):
        bounds = [f.agg(F.min(_col(key[0])), F.max(_col(key[0]))).first() for f in frames]
        lows = [b[0] for b in bounds if b is not None and b[0] is not None]
        highs = [b[1] for b in bounds if b is not None and b[1] is not None]
        if lows:
            low, high = min(lows), max(highs)
            width = max(1, -(-(high - low + 1) // buckets))
            return F.floor((_col(key[0]) - F.lit(low)) / F.lit(width)).cast("long")
    return F.pmod(F.xxhash64(*[_col(k) for k in key]), F.lit(buckets))


def _keys(frame: DataFrame, key: Sequence[str], limit: int) -> list[dict[str, Any]]:
    rows = frame.select(*[_col(k) for k in key]).orderBy(*[_col(k) for k in key]).limit(limit).collect()
    return [{k: row[k] for k in key} for row in rows]


def _source_frame(
    spark: SparkSession, config: Config, table_name: str, options: ValidateOptions
) -> tuple[DataFrame, tuple[str, ...], list[str], str | None, str]:
    source, table = config.table(table_name)
    engine = _snapshot_engine(source)
    role = "replica" if source.replica is not None else "primary"
    if role == "primary" and not config.bootstrap.allow_primary_reads:
        raise BootstrapError(
            f"table {table_name}: source {source.name} has no replica to read; validate reads the "
            "primary only when bootstrap.allow_primary_reads is true"
        )
    position = engine.current_position()
    if role == "replica":
        engine.wait_replica_past(position, config.bootstrap.replica_wait_timeout_seconds)
    shape = engine.table_shape(table.name, role)
    key = record_key(table_name, table, shape)
    names = selected_columns(table_name, table, shape, key)
    reads = column_reads(source.engine, shape, names, engine.quote_identifier, table.column_types)
    selected = ", ".join(f"{r.select} AS {engine.quote_identifier(r.name)}" for r in reads)
    where = "1 = 1"
    if options.older_than_seconds is not None and options.updated_column is not None:
        if shape.column(options.updated_column) is None:
            raise BootstrapError(
                f"table {table_name}: --updated-column {options.updated_column} does not exist"
            )
        cutoff_ms = engine.primary_clock_ms() - options.older_than_seconds * 1000
        where = f"{engine.quote_identifier(options.updated_column)} < {_timestamp_literal(cutoff_ms)}"
    access = engine.jdbc_access(role)
    properties = {
        **access.properties,
        "fetchsize": str(config.bootstrap.fetch_size),
        "sessionInitStatement": access.session_init,
    }
    query = f"(SELECT {selected} FROM {engine.quote_table(table.name)} WHERE {where}) AS cdc_lake_validate"
    first = shape.column(key[0])
    integral = first is not None and first.type_name in _INTEGRAL_TYPES
    if integral and options.partitions > 1:
        bounds_query = (
            f"(SELECT MIN({engine.quote_identifier(key[0])}) AS lo, MAX({engine.quote_identifier(key[0])}) "
            f"AS hi FROM {engine.quote_table(table.name)}) AS cdc_lake_bounds"
        )
        bounds = spark.read.jdbc(access.url, bounds_query, properties=properties).first()
        if bounds is not None and bounds["lo"] is not None:
            frame = spark.read.jdbc(
                access.url,
                query,
                column=key[0],
                lowerBound=int(bounds["lo"]),
                upperBound=int(bounds["hi"]) + 1,
                numPartitions=options.partitions,
                properties=properties,
            )
        else:
            frame = spark.read.jdbc(access.url, query, properties=properties)
    else:
        frame = spark.read.jdbc(access.url, query, properties=properties)
    return to_lake_types(frame, reads, table_name), key, names, position, table_topic(source, table)


_INTEGRAL_TYPES = frozenset(
    {
        "int2",
        "int4",
        "int8",
        "tinyint",
        "smallint",
        "mediumint",
        "int",
        "integer",
        "bigint",
    }
)


def _timestamp_literal(epoch_ms: int) -> str:
    seconds = epoch_ms / 1000
    return "'" + time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{epoch_ms % 1000:03d}'"


def validate_table(
    spark: SparkSession, config: Config, store: StateStore, table_name: str, options: ValidateOptions
) -> ValidateResult:
    """Compare ``table_name``'s source rows with its lake rows; see the module docstring."""
    started = time.monotonic()
    result = ValidateResult(table_name)
    info = store.require_table(table_name)
    if info.state not in (TableState.LIVE, TableState.CATCHING_UP, TableState.PAUSED, TableState.FAILED):
        raise BootstrapError(f"table {table_name} is {info.state.value}: it has no lake copy to validate yet")
    source, key, names, position, topic = _source_frame(spark, config, table_name, options)
    result.position = position
    if info.state in (TableState.LIVE, TableState.CATCHING_UP):
        result.caught_up = _wait_lake_caught_up(config, store, table_name, topic, options.catch_up_timeout)
    lake = read_table(spark, config.lake.table_base_path(table_name))
    for flag in (DELETED_COLUMN, SOFT_DELETED_COLUMN):
        if flag in lake.columns:
            lake = lake.where(~F.coalesce(_col(flag), F.lit(False)))
    if options.older_than_seconds is not None and options.updated_column is not None:
        cutoff = time.time() - options.older_than_seconds
        lake = lake.where(_col(options.updated_column) < F.lit(cutoff).cast("timestamp"))
    missing_columns = [n for n in names if n not in lake.columns]
    if missing_columns:
        raise BootstrapError(f"table {table_name}: the lake table lacks columns {', '.join(missing_columns)}")
    # Compare in the lake's types: the registry may have widened a type the bootstrap read narrower.
    lake_types = {f.name: f.dataType for f in lake.schema.fields}
    source = source.select(*[_col(n).cast(lake_types[n]).alias(n) for n in names])
    values = [n for n in names if n not in key]
    source_hashed = _hashed(source, key, values)
    lake_hashed = _hashed(lake.select(*[_col(n) for n in names]), key, values)
    bucket_of = _range_of(spark, [source_hashed, lake_hashed], key, options.buckets)
    sides = [_buckets(source_hashed, key, bucket_of).cache(), _buckets(lake_hashed, key, bucket_of).cache()]
    try:
        sums = [
            side.groupBy(_BUCKET).agg(
                F.count(F.lit(1)).alias("n"), F.sum(F.col(_HASH).cast("decimal(38,0)")).alias("s")
            )
            for side in sides
        ]
        joined = sums[0].alias("a").join(sums[1].alias("b"), _BUCKET, "full_outer")
        differing = joined.where(
            ~(F.col("a.n").eqNullSafe(F.col("b.n")) & F.col("a.s").eqNullSafe(F.col("b.s")))
        ).select(_BUCKET)
        totals = joined.agg(
            F.coalesce(F.sum("a.n"), F.lit(0)), F.coalesce(F.sum("b.n"), F.lit(0)), F.count(F.lit(1))
        ).first()
        assert totals is not None
        result.source_rows, result.lake_rows, result.ranges = int(totals[0]), int(totals[1]), int(totals[2])
        bad = [row[_BUCKET] for row in differing.collect()]
        result.differing_ranges = len(bad)
        if bad:
            in_bad = F.col(_BUCKET).isin(bad)
            left = sides[0].where(in_bad).alias("s")
            right = sides[1].where(in_bad).alias("l")
            on = [F.col(f"s.`{k}`").eqNullSafe(F.col(f"l.`{k}`")) for k in key]
            pairs = (
                left.join(right, on, "full_outer")
                .select(
                    *[F.coalesce(F.col(f"s.`{k}`"), F.col(f"l.`{k}`")).alias(k) for k in key],
                    F.col(f"s.{_HASH}").alias("sh"),
                    F.col(f"l.{_HASH}").alias("lh"),
                )
                .cache()
            )
            kinds = {
                "missing": pairs.where(F.col("lh").isNull()),
                "extra": pairs.where(F.col("sh").isNull()),
                "different": pairs.where(
                    F.col("sh").isNotNull() & F.col("lh").isNotNull() & (F.col("sh") != F.col("lh"))
                ),
            }
            for kind, frame in kinds.items():
                setattr(result, f"{kind}_count", frame.count())
                setattr(result, kind, _keys(frame, key, options.max_keys))
            pairs.unpersist()
    finally:
        for side in sides:
            side.unpersist()
    result.seconds = time.monotonic() - started
    _LOG.info(
        "%s: validated at %s: %d source rows, %d lake rows, %d of %d ranges differ",
        table_name,
        position,
        result.source_rows,
        result.lake_rows,
        result.differing_ranges,
        result.ranges,
    )
    return result
