"""``cdc-lake validate``: reconcile a table's source (read replica) with its lake copy, down to keys.

It reads the source as a bootstrap does (:mod:`cdc_lake_bootstrap.lake_types`: the same queries and lake
types, so equal rows hash equal) and the lake with Spark, so tables larger than one process fit.  The
lake side is the table's current copy (:meth:`cdc_lake.state.store.StateStore.current_copy`): after a
re-bootstrap, the versioned path the table was switched to, not the configured one.

1. **A common point.**  The primary's position now is taken, the replica is waited for past it,
   and the lake is waited for until its applied offsets reach the topic's end offsets seen after
   that (``--catch-up-timeout``); both waits stop at once, naming the cause and its runbook, when the
   replica stops replicating, a connector capturing the table FAILED or the applier stopped the table
   (:mod:`cdc_lake_bootstrap.replica_wait`, :mod:`cdc_lake_bootstrap.watch`).  A change the connector has not
   published yet at that point (a paused connector) is, correctly, a difference.  With
   ``--older-than SECONDS`` and ``--updated-column COLUMN``, only rows untouched for that long are
   compared, for tables that never quiesce.
2. **Counts and range checksums.**  Every row gets a 64-bit hash of its non-key columns and a
   position: its integral first key column's offset from the lowest value, else a 62-bit hash of
   the key.  Rows are grouped in ``--buckets`` equal-width ranges of positions and each range's row
   count and hash sum are compared.
3. **Bisection.**  While the ranges that differ hold more than ``--leaf-rows`` rows (and are few
   enough to list, and wider than one position), only their rows are grouped again in ranges
   ``--buckets`` times narrower and compared again (both sides keep exactly the same rows, so a
   narrower range that straddles a matching one compares only the rows of the differing one): each
   level narrows the rows to join down to those near a difference, so a few changed rows among a
   billion are found without joining the billion.
4. **Down to keys.**  Only the rows of the last level's differing ranges are joined by key: a key
   only in the source is *missing*, only in the lake *extra*, in both with different hashes
   *different*; a key the lake holds more than once is a *duplicate* (named with its lake row count).

The source side is read over JDBC from the replica in key-range partitions, as many as the table's
estimated size needs (one for a small table), at most ``--partitions`` (:func:`read_partitions`).
Each side is read once and kept in Spark for the bounds, every level and the key join; only the
differing keys (up to ``--max-keys`` of each kind) reach the driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType

from cdc_lake.capture.plan import table_topic, topic_prefix
from cdc_lake.config import Config
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.exceptions import BootstrapError
from cdc_lake.kafka.offsets import end_offsets
from cdc_lake.lake.checkpoint import resume_checkpoint
from cdc_lake.lake.columns import DELETED_COLUMN, SOFT_DELETED_COLUMN
from cdc_lake.lake.format import load_format
from cdc_lake.sources import engine_for
from cdc_lake.sources.snapshot import SnapshotSource, TableShape
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore
from cdc_lake.validation import ValidateResult
from cdc_lake_bootstrap.keys import record_key, selected_columns
from cdc_lake_bootstrap.lake_types import column_reads, to_lake_types
from cdc_lake_bootstrap.partitions import partition_count
from cdc_lake_bootstrap.replica_wait import wait_replica_past
from cdc_lake_bootstrap.watch import CatchUpWatch

_LOG = logging.getLogger(__name__)

HASH = "_cdc_validate_hash"
_POS = "_cdc_validate_pos"
_RANGE = "_cdc_validate_range"
_LAKE_ROWS = "lake_rows"
_HASH_SPAN = 1 << 62
# Bisection stops when more ranges than this differ: the differences are everywhere, and listing
# the ranges would cost more than the rows it spares.
_MAX_DIFFERING_RANGES = 4096
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
    leaf_rows: int = 10_000
    key_range: KeyRange | None = None
    """Only the rows whose first key column (an integral one) is in this range (continuous validation's
    slices, :mod:`cdc_lake_bootstrap.continuous`), on both sides, in one query of the source."""


@dataclass(frozen=True)
class KeyRange:
    """``lo <= key < hi`` on an integral first key column; None leaves that end open."""

    lo: int | None = None
    hi: int | None = None

    def sql(self, column: str) -> str:
        """The range as a SQL predicate on the quoted ``column`` (``1 = 1`` when both ends are open)."""
        parts = [f"{column} >= {int(self.lo)}"] if self.lo is not None else []
        parts += [f"{column} < {int(self.hi)}"] if self.hi is not None else []
        return " AND ".join(parts) or "1 = 1"

    def describe(self) -> str:
        """The range for people: ``keys from 201 below 301``, ``keys below 201``, ``every key``."""
        parts = [f"from {self.lo}"] if self.lo is not None else []
        parts += [f"below {self.hi}"] if self.hi is not None else []
        return f"keys {' '.join(parts)}" if parts else "every key"

    def column(self, column: Column) -> Column:
        """The range as a Spark predicate on ``column``."""
        predicate = F.lit(True)
        if self.lo is not None:
            predicate = predicate & (column >= F.lit(self.lo))
        if self.hi is not None:
            predicate = predicate & (column < F.lit(self.hi))
        return predicate


def _col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def wait_lake_caught_up(
    ends: Mapping[int, int], watch: CatchUpWatch, timeout: float, committed: Mapping[int, int]
) -> bool:
    """Wait until the watched table's offsets reach ``ends`` (False after ``timeout``): those the applier
    recorded, or ``committed``, where the lake's commits say it resumes when the wait began (its latest
    commit's offsets, else its bootstrap watermark: a table handed off at its watermark with nothing
    streamed since has no applied offsets, and waiting for those made ``validate`` wait out its timeout
    and report the lake behind).

    Raises BootstrapError as soon as the catch-up cannot happen (:class:`bootstrap.watch.CatchUpWatch`).
    """
    deadline = time.monotonic() + timeout
    while True:
        applied = {**committed}
        for partition, offset in watch.store.get_applied_offsets(watch.name).items():
            applied[partition] = max(offset, applied.get(partition, 0))
        if all(applied.get(partition, 0) >= end for partition, end in ends.items()):
            return True
        failure = watch.failure()
        if failure is not None:
            raise BootstrapError(f"table {watch.name}: the lake cannot catch up: {failure}")
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_SECONDS)


def lake_caught_up(
    spark: SparkSession,
    config: Config,
    store: StateStore,
    table_name: str,
    topic: str,
    ends: Mapping[int, int],
    timeout: float,
) -> bool:
    """Wait until the table's lake copy applied its topic up to ``ends`` (:func:`wait_lake_caught_up`, from
    where the lake's latest cdc-lake commit says it resumes); False after ``timeout``."""
    source_config, table = config.table(table_name)
    with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
        watch = CatchUpWatch(table_name, store, connect, topic_prefix(source_config), table.name)
        path = store.current_copy(table_name).path
        commit = load_format(spark, config.lake.format).latest_commit(path, ours=True)
        committed = resume_checkpoint(path, topic, table_name, store, commit).offsets
        return wait_lake_caught_up(ends, watch, timeout, committed)


def hashed(frame: DataFrame, key: Sequence[str], values: Sequence[str]) -> DataFrame:
    """``frame``'s ``key`` and a 64-bit hash of its ``values`` (:data:`HASH`), as both sides are compared."""
    digest = F.xxhash64(*[_col(v) for v in values]) if values else F.lit(0).cast("long")
    return frame.select(*[_col(k) for k in key], digest.alias(HASH))


def _positions(frames: Sequence[DataFrame], key: Sequence[str]) -> tuple[Column, int]:
    """Each row's position in ``[0, span)``, and the span.

    The offset of an integral first key column from its lowest value (ranges are then key ranges),
    else a 62-bit hash of the whole key.
    """
    first = frames[0].schema[key[0]].dataType
    if isinstance(first, IntegralType):
        # One aggregate over both sides' keys: one job (and one shuffle) for the bounds, not one per side.
        column = _col(key[0])
        keys = reduce(DataFrame.unionAll, [f.select(column) for f in frames])
        bounds = keys.agg(F.min(column), F.max(column)).first()
        if bounds is not None and bounds[0] is not None and bounds[1] - bounds[0] < _HASH_SPAN:
            low = int(bounds[0])
            return _col(key[0]).cast("long") - F.lit(low), int(bounds[1]) - low + 1
    return F.pmod(F.xxhash64(*[_col(k) for k in key]), F.lit(_HASH_SPAN)), _HASH_SPAN


def _narrower(width: int, buckets: int) -> int:
    """The width of the ranges ``buckets`` of which cover one range of ``width``."""
    return max(1, -(-width // buckets))


def _range(width: int) -> Column:
    return F.expr(f"`{_POS}` div {width}")


def _in_ranges(spark: SparkSession, side: DataFrame, width: int, ranges: Sequence[int]) -> DataFrame:
    """The rows of ``side`` in one of ``ranges`` (of ``width``)."""
    wanted = spark.createDataFrame([(r,) for r in ranges], f"{_RANGE} long")
    with_range = side.withColumn(_RANGE, _range(width))
    return with_range.join(F.broadcast(wanted), _RANGE, "left_semi").drop(_RANGE)


@dataclass(frozen=True)
class _Level:
    """One level's comparison: rows and ranges seen, the ranges that differ and their rows.

    ``differing`` lists the differing ranges only when there are at most ``_MAX_DIFFERING_RANGES``.
    """

    source_rows: int
    lake_rows: int
    ranges: int
    differing_count: int
    differing_rows: int
    differing: list[int]


_SIDE = "_cdc_validate_side"
_COLLECT_RANGES = 4096
"""A level with at most this many ranges brings their counts and checksums to the driver in one job."""


def level_of(ranges: Iterable[tuple[int, int | None, Any, int | None, Any]]) -> _Level:
    """A level from each range's ``(range, source count, source sum, lake count, lake sum)`` (None: the
    side has no row in the range): a range differs unless both counts and both sums are equal."""
    source_rows = lake_rows = seen = differing_rows = 0
    differing = []
    for number, source_count, source_sum, lake_count, lake_sum in ranges:
        seen += 1
        source_rows += source_count or 0
        lake_rows += lake_count or 0
        if source_count != lake_count or source_sum != lake_sum:
            differing.append(number)
            differing_rows += max(source_count or 0, lake_count or 0)
    listed = sorted(differing) if len(differing) <= _MAX_DIFFERING_RANGES else []
    return _Level(source_rows, lake_rows, seen, len(differing), differing_rows, listed)


def _compare_level(sides: Sequence[DataFrame], width: int, most_ranges: int) -> _Level:
    """Count and checksum every range of ``width`` on both sides; find the ranges that differ.

    Both sides are aggregated in one shuffle (their rows tagged by side, each side's count and sum
    taken apart: NULL where the side has no row in the range, as a full outer join of the two
    aggregates would leave it).  A level of at most :data:`_COLLECT_RANGES` ranges (``most_ranges``
    bounds them) is judged on the driver from the collected sums: one job; a larger one in Spark.
    """
    tagged = reduce(
        DataFrame.unionAll,
        [
            side.select(_range(width).alias(_RANGE), F.col(HASH), F.lit(number).alias(_SIDE))
            for number, side in enumerate(sides)
        ],
    )

    def of_side(number: int, value: Column) -> Column:
        return F.sum(F.when(F.col(_SIDE) == number, value))

    hashed = F.col(HASH).cast("decimal(38,0)")
    sums = tagged.groupBy(_RANGE).agg(
        of_side(0, F.lit(1)).alias("an"), of_side(0, hashed).alias("as"),
        of_side(1, F.lit(1)).alias("bn"), of_side(1, hashed).alias("bs"),
    )
    if most_ranges <= _COLLECT_RANGES:
        return level_of(
            (int(row[0]), row[1], row[2], row[3], row[4])
            for row in sums.select(_RANGE, "an", "as", "bn", "bs").collect()
        )
    kept = sums.cache()
    try:
        same = F.col("an").eqNullSafe(F.col("bn")) & F.col("as").eqNullSafe(F.col("bs"))
        rows = F.greatest(F.coalesce(F.col("an"), F.lit(0)), F.coalesce(F.col("bn"), F.lit(0)))
        totals = kept.agg(
            F.coalesce(F.sum("an"), F.lit(0)),
            F.coalesce(F.sum("bn"), F.lit(0)),
            F.count(F.lit(1)),
            F.sum(F.when(same, 0).otherwise(1)),
            F.coalesce(F.sum(F.when(same, 0).otherwise(rows)), F.lit(0)),
        ).first()
        assert totals is not None
        count = int(totals[3] or 0)
        differing = []
        if 0 < count <= _MAX_DIFFERING_RANGES:
            differing = sorted(int(row[_RANGE]) for row in kept.where(~same).select(_RANGE).collect())
        return _Level(int(totals[0]), int(totals[1]), int(totals[2]), count, int(totals[4]), differing)
    finally:
        kept.unpersist()


def compare_rows(
    spark: SparkSession,
    source: DataFrame,
    lake: DataFrame,
    key: Sequence[str],
    values: Sequence[str],
    options: ValidateOptions,
    result: ValidateResult,
) -> None:
    """Compare ``source`` with ``lake`` (same columns, same types) into ``result``.

    Counts and range checksums, bisected while the differing ranges hold more than
    ``options.leaf_rows`` rows, then the keys of the rows left (see the module docstring).
    """
    # Each side is read once (the source's JDBC queries, the lake's files) and kept: the key's bounds,
    # every level and the key join all read the kept rows, so they are also the same rows.
    kept = [hashed(source, key, values).cache(), hashed(lake, key, values).cache()]
    try:
        position, span = _positions(kept, key)
        _LOG.debug("positions over a span of %d", span)
        sides = [side.withColumn(_POS, position) for side in kept]
        width = _narrower(span, options.buckets)
        level = _compare_level(sides, width, options.buckets)
        _LOG.debug("level 1: %d of %d ranges differ", level.differing_count, level.ranges)
        result.source_rows, result.lake_rows = level.source_rows, level.lake_rows
        result.ranges, result.differing_ranges, result.levels = level.ranges, level.differing_count, 1
        narrowed = sides
        bisect = options.buckets > 1
        while bisect and level.differing and level.differing_rows > options.leaf_rows and width > 1:
            narrowed = [_in_ranges(spark, side, width, level.differing) for side in narrowed]
            # Each differing range splits into at most buckets + 1 narrower ones (their edges need not meet).
            most = len(level.differing) * (options.buckets + 1)
            width = _narrower(width, options.buckets)
            level = _compare_level(narrowed, width, most)
            result.levels += 1
        if level.differing_count:
            if level.differing:
                narrowed = [_in_ranges(spark, side, width, level.differing) for side in narrowed]
            result.compared_rows = level.differing_rows
            _name_keys(narrowed, key, options, result)
    finally:
        for side in kept:
            side.unpersist()


def _name_keys(
    sides: Sequence[DataFrame], key: Sequence[str], options: ValidateOptions, result: ValidateResult
) -> None:
    """Join the rows of ``sides`` by key into missing, extra, different and duplicate keys (and counts).

    A key the lake holds more than once (two record keys for one source key) is a *duplicate*, named with
    its lake row count and left out of the other kinds: a reader keeping one row per key would hide it.
    """
    held = sides[1].groupBy(*[_col(k) for k in key]).agg(F.count(F.lit(1)).alias(_LAKE_ROWS))
    doubled = held.where(F.col(_LAKE_ROWS) > 1).cache()
    left = sides[0].join(doubled, list(key), "left_anti").alias("s")
    right = sides[1].join(doubled, list(key), "left_anti").alias("l")
    on = [F.col(f"s.`{k}`").eqNullSafe(F.col(f"l.`{k}`")) for k in key]
    pairs = (
        left.join(right, on, "full_outer")
        .select(
            *[F.coalesce(F.col(f"s.`{k}`"), F.col(f"l.`{k}`")).alias(k) for k in key],
            F.col(f"s.{HASH}").alias("sh"),
            F.col(f"l.{HASH}").alias("lh"),
        )
        .cache()
    )
    try:
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
        result.duplicate_count = doubled.count()
        result.duplicate = _keys(doubled, key, options.max_keys, _LAKE_ROWS)
    finally:
        pairs.unpersist()
        doubled.unpersist()


def _keys(frame: DataFrame, key: Sequence[str], limit: int, *also: str) -> list[dict[str, Any]]:
    names = [*key, *also]
    rows = frame.select(*[_col(n) for n in names]).orderBy(*[_col(k) for k in key]).limit(limit).collect()
    return [{n: row[n] for n in names} for row in rows]


def source_frame(
    spark: SparkSession,
    config: Config,
    table_name: str,
    options: ValidateOptions,
    keys: Sequence[Sequence[Any]] | None = None,
) -> tuple[DataFrame, tuple[str, ...], list[str], str | None, str]:
    """The table's rows on its read replica (the primary when allowed and there is none) in lake types,
    read once the replica passed the primary's position now: the frame, the key, the columns, that
    position and the table's topic (``repair`` reads its keys' rows so too).

    With ``keys`` (values in the key's column order) and a key of integral columns only, the query
    asks for those keys alone (``WHERE (k1, k2) IN ((1, 2), ...)``, the server's index finds them): a
    repair of 100 keys read a 1M-row table whole before.  Other keys' rows are read whole, and the
    caller picks its keys from them."""
    source, table = config.table(table_name)
    engine = engine_for(source)
    role = "replica" if source.replica is not None else "primary"
    if role == "primary" and not config.bootstrap.allow_primary_reads:
        raise BootstrapError(
            f"table {table_name}: source {source.name} has no replica to read; validate reads the "
            "primary only when bootstrap.allow_primary_reads is true"
        )
    position = engine.current_position()
    if role == "replica":
        _LOG.info("%s: %s", table_name, wait_replica_past(
            table_name, engine, position, config.bootstrap.replica_wait_timeout_seconds
        ))
    shape = engine.table_shape(table.name, role)
    key = record_key(table_name, table, shape)
    names = selected_columns(table_name, table, shape, key)
    reads = column_reads(
        source.engine,
        shape,
        names,
        engine.quote_identifier,
        table.column_types,
        interval_handling=source.interval_mode(),
    )
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
    partitions = read_partitions(shape, options.partitions, spark.sparkContext.defaultParallelism)
    wanted = _key_predicate(shape, key, keys, engine.quote_identifier) if keys is not None else None
    if options.key_range is not None:
        if not integral:
            raise BootstrapError(
                f"table {table_name}: a key range needs an integral first key column, {key[0]} is not"
            )
        wanted = " AND ".join(filter(None, [wanted, options.key_range.sql(engine.quote_identifier(key[0]))]))
    if wanted is not None:
        query = (
            f"(SELECT {selected} FROM {engine.quote_table(table.name)} WHERE {where} AND {wanted}) "
            "AS cdc_lake_validate"
        )
        partitions = 1
    _LOG.info(
        "%s: reading the source in %d JDBC partition(s) (%d rows estimated)",
        table_name, partitions if integral else 1, shape.estimated_rows,
    )
    bounds = _key_bounds(spark, engine, table.name, key[0], access.url, properties) if (
        integral and partitions > 1
    ) else None
    if bounds is not None:
        lower, upper = stride_bounds(*bounds)
        frame = spark.read.jdbc(
            access.url,
            query,
            column=key[0],
            lowerBound=lower,
            upperBound=upper,
            numPartitions=partitions,
            properties=properties,
        )
    else:
        frame = spark.read.jdbc(access.url, query, properties=properties)
    _LOG.debug("%s: the source's read planned", table_name)
    return to_lake_types(frame, reads, table_name, key), key, names, position, table_topic(source, table)


def _key_bounds(
    spark: SparkSession,
    engine: SnapshotSource,
    table: str,
    column: str,
    url: str,
    properties: Mapping[str, str],
) -> tuple[int, int] | None:
    """The lowest and highest value of the integral key ``column`` (one query, the index answers it); None
    for an empty table."""
    quoted = engine.quote_identifier(column)
    query = (
        f"(SELECT MIN({quoted}) AS lo, MAX({quoted}) AS hi FROM {engine.quote_table(table)}) "
        "AS cdc_lake_bounds"
    )
    bounds = spark.read.jdbc(url, query, properties=dict(properties)).first()
    if bounds is None or bounds["lo"] is None:
        return None
    return int(bounds["lo"]), int(bounds["hi"])


def estimated_rows(config: Config, table_name: str) -> int:
    """The table's estimated rows on its replica (the primary's without one): the catalog's statistic."""
    source, table = config.table(table_name)
    role = "replica" if source.replica is not None else "primary"
    return engine_for(source).table_shape(table.name, role).estimated_rows


def key_facts(spark: SparkSession, config: Config, table_name: str) -> tuple[int, tuple[int, int] | None]:
    """The table's estimated rows and, when its first key column is integral, that column's bounds (None
    otherwise, or when the table is empty), read on its replica (continuous validation's slices)."""
    source, table = config.table(table_name)
    engine = engine_for(source)
    role = "replica" if source.replica is not None else "primary"
    shape = engine.table_shape(table.name, role)
    key = record_key(table_name, table, shape)
    first = shape.column(key[0])
    if first is None or first.type_name not in _INTEGRAL_TYPES:
        return shape.estimated_rows, None
    access = engine.jdbc_access(role)
    properties = {**access.properties, "sessionInitStatement": access.session_init}
    return shape.estimated_rows, _key_bounds(spark, engine, table.name, key[0], access.url, properties)


def _key_predicate(
    shape: TableShape, key: Sequence[str], keys: Sequence[Sequence[Any]], quote: Callable[[str], str]
) -> str | None:
    """``(k1, k2) IN ((1, 2), ...)`` for ``keys`` when every key column is integral, else None.

    The values are rendered as integers (``int()`` of each: a value that is not one raises), never as
    text, so nothing of a key reaches the query but digits.  No keys at all asks for no row."""
    columns = [shape.column(k) for k in key]
    if any(c is None or c.type_name not in _INTEGRAL_TYPES for c in columns):
        return None
    if not keys:
        return "1 = 0"
    names = ", ".join(quote(k) for k in key)
    values = ", ".join("(" + ", ".join(str(int(v)) for v in value) + ")" for value in keys)
    return f"({names}) IN ({values})"


def read_partitions(shape: TableShape, most: int, executors: int) -> int:
    """How many key-range queries read the source: the bootstrap's count for the table's estimated size
    (:func:`~cdc_lake_bootstrap.partitions.partition_count`: one for a table of up to
    :data:`~cdc_lake_bootstrap.partitions.SINGLE_PARTITION_ROWS` rows, else one per executor slot or per
    250,000 rows), at most ``most`` (``--partitions``).

    A small table read in one query needs no Spark job for its key's bounds, and no task per partition:
    8 of them took 2 of the ~18 s ``validate`` of a 20-row table spent past its session start.
    """
    return max(1, min(most, partition_count(shape.estimated_rows, shape.estimated_bytes, executors, most)))


_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def stride_bounds(lo: int, hi: int) -> tuple[int, int]:
    """Spark's ``lowerBound``/``upperBound`` for a key column holding ``lo`` to ``hi``: Java longs.

    They only set the stride: Spark's first partition reads every value below its upper edge (and
    NULL), its last every value from its lower edge on, so bounds clamped into the long range still read
    every row.  Unclamped, a signed ``bigint`` key holding its maximum (``hi + 1``) or an unsigned
    ``bigint`` key above it failed the read in py4j (``NumberFormatException: 9223372036854775808``)."""
    lower = min(max(lo, _LONG_MIN), _LONG_MAX)
    upper = min(max(hi, _LONG_MIN), _LONG_MAX - 1) + 1
    return lower, max(lower, upper)


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
    spark: SparkSession,
    config: Config,
    store: StateStore,
    table_name: str,
    options: ValidateOptions,
    keep_lake: Callable[[DataFrame], DataFrame] | None = None,
    turn: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> ValidateResult:
    """Compare ``table_name``'s source rows with its lake rows; see the module docstring.

    ``keep_lake``, if given, is applied to the lake's rows of the key range (soft-deleted ones too, every
    column) as read once the lake caught up, before the comparison reads them: ``run``'s validator caches
    them there and takes its first look at its candidates from the same rows, not from a second read of
    the table (:mod:`cdc_lake_bootstrap.continuous_looks`).  ``turn`` is held from the lake read's
    planning (the listing of its files) to the comparison's end, after the wait for the lake to catch up
    (``run``'s background turn, :mod:`cdc_lake.spark.background`)."""
    started = time.monotonic()
    result = ValidateResult(table_name)
    info = store.require_table(table_name)
    if info.state not in (TableState.LIVE, TableState.CATCHING_UP, TableState.PAUSED, TableState.FAILED):
        raise BootstrapError(f"table {table_name} is {info.state.value}: it has no lake copy to validate yet")
    source, key, names, position, topic = source_frame(spark, config, table_name, options)
    result.position = position
    if info.state in (TableState.LIVE, TableState.CATCHING_UP):
        ends = end_offsets(config.kafka.bootstrap_servers, topic, extra=dict(config.kafka.consumer))
        timeout = options.catch_up_timeout
        result.caught_up = lake_caught_up(spark, config, store, table_name, topic, ends, timeout)
        _LOG.debug("%s: the lake caught up: %s", table_name, result.caught_up)
    with turn():  # from the listing of the lake's files on: a compaction then cannot replace one read
        lake = load_format(spark, config.lake.format).read(store.current_copy(table_name).path)
        _LOG.debug("%s: the lake's read planned", table_name)
        if options.key_range is not None:
            lake = lake.where(options.key_range.column(_col(key[0])))
        if keep_lake is not None:
            lake = keep_lake(lake)
        for flag in (DELETED_COLUMN, SOFT_DELETED_COLUMN):
            if flag in lake.columns:
                lake = lake.where(~F.coalesce(_col(flag), F.lit(False)))
        if options.older_than_seconds is not None and options.updated_column is not None:
            cutoff = time.time() - options.older_than_seconds
            lake = lake.where(_col(options.updated_column) < F.lit(cutoff).cast("timestamp"))
        missing_columns = [n for n in names if n not in lake.columns]
        if missing_columns:
            lacking = ", ".join(missing_columns)
            raise BootstrapError(f"table {table_name}: the lake table lacks columns {lacking}")
        # Compare in the lake's types: the registry may have widened a type the bootstrap read narrower.
        lake_types = {f.name: f.dataType for f in lake.schema.fields}
        source = source.select(*[_col(n).cast(lake_types[n]).alias(n) for n in names])
        values = [n for n in names if n not in key]
        compare_rows(spark, source, lake.select(*[_col(n) for n in names]), key, values, options, result)
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
