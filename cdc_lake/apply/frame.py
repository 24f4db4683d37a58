"""From decoded changes to the DataFrame of one Hudi commit: last change per key, TOAST fill, metadata.

The steps, all in Spark:

1. :func:`change_frame`: every decoded change before the batch's cut-offs as a row of the merged lake
   columns plus its op, source time, ordering value, Kafka partition/offset and unavailable columns.
2. :func:`latest_changes`: per record key, the change with the highest source ordering value (Postgres
   LSN; MySQL/MariaDB Kafka offset, see :mod:`cdc_lake.decode.ordering`), ties broken by Kafka partition
   and offset.  Within one partition a key's changes arrive in source order, so this is the last change
   by offset.  A Postgres event Debezium re-sent after a restart carries its original (lower) LSN and
   never wins over newer changes; a re-sent binlog event has a new offset, but the re-sent suffix
   replays the same changes in the same order, so the last one is still the key's latest state (and
   re-sent events below the applied marks are skipped before).  Unavailable columns (unchanged
   Postgres TOAST values; with soft deletes, what a delete's before image lacks) take the value of the
   key's latest earlier change in the batch that had one.
3. :func:`fill_from_lake`: what is still unavailable comes from the stored row (a join on the key with a
   snapshot read of the table, only when some row needs it).  A key the lake does not hold gets null:
   the placeholder text is never written.
4. :func:`lake_frame`: the lake columns and metadata, with the delete flags.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark import RDD
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from cdc_lake.apply.decoding import Decoded, DecodedChange
from cdc_lake.lake.columns import (
    APPLIED_AT_COLUMN,
    DELETED_COLUMN,
    OP_COLUMN,
    ORDERING_COLUMN,
    SOFT_DELETED_COLUMN,
    SOURCE_TS_COLUMN,
    lake_struct,
    source_time,
)

KAFKA_PARTITION_COLUMN = "_cdc_kafka_partition"
KAFKA_OFFSET_COLUMN = "_cdc_kafka_offset"
UNAVAILABLE_COLUMN = "_cdc_unavailable"
MISSING_COLUMN = "_cdc_missing"
_FILL_PREFIX = "_cdc_fill_"
_STORED_PREFIX = "_cdc_stored_"


def col(name: str) -> Column:
    """A column by its exact name (dots and backticks in source column names are not paths)."""
    return F.col("`" + name.replace("`", "``") + "`")


def change_struct(columns: StructType) -> StructType:
    """Schema of :func:`change_frame`: the lake columns, then the change's metadata."""
    by_name = {f.name: f for f in lake_struct(columns).fields}
    return StructType([
        *columns.fields,
        by_name[OP_COLUMN],
        by_name[SOURCE_TS_COLUMN],
        by_name[ORDERING_COLUMN],
        StructField(KAFKA_PARTITION_COLUMN, IntegerType(), False),
        StructField(KAFKA_OFFSET_COLUMN, LongType(), False),
        StructField(UNAVAILABLE_COLUMN, ArrayType(StringType(), False), False),
    ])


def change_frame(
    spark: SparkSession,
    decoded: RDD[Decoded] | list[Decoded],
    columns: StructType,
    cutoffs: Mapping[int, int],
) -> DataFrame:
    """The decoded changes before ``cutoffs`` (first offset NOT to apply, per partition) as rows.

    ``decoded`` on the driver (a small batch) becomes one local DataFrame: its rows are converted in the
    JVM, and no Python worker runs when Spark reads them.
    """
    names = [f.name for f in columns.fields]
    stops = dict(cutoffs)

    def wanted(record: Decoded) -> bool:
        if not isinstance(record, DecodedChange):
            return False
        return record.offset < stops.get(record.partition, record.offset + 1)

    def as_tuple(record: Decoded) -> tuple[Any, ...]:
        assert isinstance(record, DecodedChange)
        row = record.row
        return (
            *(row.get(name) for name in names),
            record.op,
            source_time(record.source_ts_ms),
            record.ordering,
            record.partition,
            record.offset,
            list(record.unavailable),
        )

    if isinstance(decoded, list):
        local = [as_tuple(record) for record in decoded if wanted(record)]
        return spark.createDataFrame(local, change_struct(columns), verifySchema=False)
    rows = decoded.filter(wanted).map(as_tuple)
    return spark.createDataFrame(rows, change_struct(columns), verifySchema=False)


def latest_changes(changes: DataFrame, key_fields: Sequence[str], fill_columns: Sequence[str]) -> DataFrame:
    """The last change of each key, its unavailable columns filled from earlier changes in the batch.

    Adds ``_cdc_missing``: the columns still unavailable after that.
    """
    order = (col(ORDERING_COLUMN), col(KAFKA_PARTITION_COLUMN), col(KAFKA_OFFSET_COLUMN))
    window = Window.partitionBy(*[col(k) for k in key_fields]).orderBy(*order)
    unavailable = col(UNAVAILABLE_COLUMN)
    fills = [
        F.last(F.when(~F.array_contains(unavailable, name), F.struct(col(name).alias("v"))), ignorenulls=True)
        .over(window)
        .alias(_FILL_PREFIX + name)
        for name in fill_columns
    ]
    is_last = F.lead(col(KAFKA_OFFSET_COLUMN), 1).over(window).isNull().alias("_cdc_is_last")
    ranked = changes.select("*", *fills, is_last).where(F.col("_cdc_is_last"))
    filled = {
        name: F.when(F.array_contains(unavailable, name), col(_FILL_PREFIX + name).getField("v"))
        .otherwise(col(name))
        .alias(name)
        for name in fill_columns
    }
    missing = F.filter(unavailable, lambda name: _fill_missing(name, fill_columns))
    base = [filled.get(f, col(f)) for f in changes.columns if f != UNAVAILABLE_COLUMN]
    return ranked.select(*base, missing.alias(MISSING_COLUMN))


def _fill_missing(name: Column, fill_columns: Sequence[str]) -> Column:
    """True for an unavailable column the batch had no value for."""
    condition = F.lit(True)
    for candidate in fill_columns:
        condition = F.when(name == candidate, col(_FILL_PREFIX + candidate).isNull()).otherwise(condition)
    return condition


def fill_from_lake(
    latest: DataFrame, stored: DataFrame, key_fields: Sequence[str], fill_columns: Sequence[str]
) -> DataFrame:
    """Fill the ``_cdc_missing`` columns of ``latest`` from ``stored`` (the lake table) by record key.

    Only the keys that need it are looked up; a key absent from the lake, or a column the lake does not
    have yet, leaves the column null.
    """
    stored_names = set(stored.columns)
    fill = [name for name in fill_columns if name in stored_names and name not in key_fields]
    keys = [col(k) for k in key_fields]
    needing = latest.where(F.size(col(MISSING_COLUMN)) > 0).select(*keys).distinct()
    lookup = stored.select(*keys, *[col(name).alias(_STORED_PREFIX + name) for name in fill]).join(
        needing, list(key_fields), "left_semi"
    )
    joined = latest.join(lookup, list(key_fields), "left")
    missing = col(MISSING_COLUMN)
    filled = {
        name: F.when(F.array_contains(missing, name), col(_STORED_PREFIX + name))
        .otherwise(col(name))
        .alias(name)
        for name in fill
    }
    return joined.select(*[filled.get(name, col(name)) for name in latest.columns])


def lake_frame(
    latest: DataFrame, columns: StructType, applied_at: dt.datetime, soft_deletes: bool
) -> DataFrame:
    """The rows to write: the lake columns, then the metadata columns with the delete flags."""
    is_delete = col(OP_COLUMN) == F.lit("d")
    no = F.lit(False)
    return latest.select(
        *[col(f.name) for f in columns.fields],
        col(OP_COLUMN),
        col(SOURCE_TS_COLUMN),
        col(ORDERING_COLUMN),
        F.lit(applied_at).cast("timestamp").alias(APPLIED_AT_COLUMN),
        (is_delete if soft_deletes else no).alias(SOFT_DELETED_COLUMN),
        (no if soft_deletes else is_delete).alias(DELETED_COLUMN),
    )
