"""Step 4: reading plan partitions in parallel with Spark JDBC, as lake rows.

Each plan partition is one JDBC query ``SELECT <columns> FROM <table> WHERE <predicate>`` and one Spark
partition: the predicate sits inside the query, next to the table, so the source uses the key index
for it whatever the selected expressions are.  The partitions of a group are unioned into one
DataFrame and read by as many tasks at once as Spark has slots.  Every connection runs the engine's
session statements first (read-only, UTC, ISO formats; on a replica also the wait until its own server
has replayed the watermark's position, which fails the read when it has not: the ``access`` the caller
built with a :class:`~cdc_lake.sources.snapshot.SessionWait`) and fetches ``bootstrap.fetch_size`` rows
at a time.  Only the table's frozen columns (and its key) are selected when the config lists them.

The rows get the lake's metadata columns: ``_cdc_op = 'r'`` like a Debezium snapshot read, the
watermark time as source time, and the lowest ordering value, so any replayed change wins over them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE
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
from cdc_lake.sources.snapshot import JdbcAccess
from cdc_lake.state.records import BootstrapPartition
from cdc_lake_bootstrap.lake_types import ColumnRead, lake_columns, to_lake_types

SNAPSHOT_OP = "r"


@dataclass(frozen=True)
class SnapshotQuery:
    """The query shape shared by every partition: the table reference and the selected columns."""

    table_ref: str
    reads: tuple[ColumnRead, ...]
    quoted_names: tuple[str, ...]
    key: tuple[str, ...]
    """The record key's columns (a refused value's error names its row by them)."""
    char_lengths: Mapping[str, int] = field(default_factory=dict)
    """The registered character lengths of the columns, recorded in the copy's commits."""

    def sql(self, predicate: str) -> str:
        """The SELECT of one partition."""
        selected = ", ".join(
            f"{read.select} AS {quoted}" for read, quoted in zip(self.reads, self.quoted_names, strict=True)
        )
        return f"SELECT {selected} FROM {self.table_ref} WHERE {predicate}"


def partition_frame(
    spark: SparkSession,
    access: JdbcAccess,
    query: SnapshotQuery,
    partition: BootstrapPartition,
    fetch_size: int,
) -> DataFrame:
    """One plan partition as a single-partition JDBC DataFrame."""
    properties = {
        **access.properties,
        "fetchsize": str(fetch_size),
        "sessionInitStatement": access.session_init,
    }
    subquery = f"({query.sql(partition.predicate)}) AS cdc_lake_part_{partition.index}"
    return spark.read.jdbc(access.url, subquery, properties=properties)


def snapshot_rows(
    spark: SparkSession,
    access: JdbcAccess,
    query: SnapshotQuery,
    partitions: Sequence[BootstrapPartition],
    fetch_size: int,
    table: str,
    source_ts_ms: int,
) -> DataFrame:
    """The lake rows of ``partitions``: source columns in lake types, then the metadata columns."""
    frames = [partition_frame(spark, access, query, p, fetch_size) for p in partitions]
    union = reduce(DataFrame.unionByName, frames)
    converted = to_lake_types(union, query.reads, table, query.key)
    struct = lake_struct(lake_columns(query.reads))
    now = dt.datetime.now(tz=dt.UTC)
    metadata = {
        OP_COLUMN: F.lit(SNAPSHOT_OP),
        SOURCE_TS_COLUMN: F.lit(source_time(source_ts_ms)).cast("timestamp"),
        ORDERING_COLUMN: F.lit(SNAPSHOT_ORDERING_VALUE),
        APPLIED_AT_COLUMN: F.lit(now).cast("timestamp"),
        SOFT_DELETED_COLUMN: F.lit(False),
        DELETED_COLUMN: F.lit(False),
    }
    # The lake schema's nullability must match the applier's, or its first write changes the schema.
    columns = [
        (F.when(F.lit(True), metadata[f.name]) if f.nullable else metadata[f.name]).alias(f.name)
        for f in struct.fields
        if f.name in metadata
    ]
    return converted.select(*converted.columns, *columns)
