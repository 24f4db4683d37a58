"""Writing DataFrames into Hudi tables, reading them back, and removing a table's path.

One :func:`write_batch` call is one Hudi commit.  Upserts and hard deletes go
together in one commit: rows whose lake delete marker
(:data:`~cdc_lake.lake.columns.DELETED_COLUMN`) is true are deleted, the others
upserted, all under event-time ordering.  The marker is written under Hudi's
name for it (:data:`~cdc_lake.hudi.options.DELETE_MARKER_COLUMN`), so the files
hold the column Hudi reads.  The caller's commit metadata (e.g. Kafka offsets)
is stored in that same commit, so data and offsets become visible atomically.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.hudi.facts import FACTS
from cdc_lake.hudi.keys import (
    refuse_ambiguous_keys,
    refuse_empty_keys,
    refuse_long_record_keys,
    row_writer_keys_agree,
)
from cdc_lake.hudi.options import DELETE_MARKER_COLUMN, HudiTableSpec, write_options
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.lake.columns import DELETED_COLUMN
from cdc_lake.lake.format import UNREAD, Unread, WriteOperation
from cdc_lake.lake.layout import IndexType
from cdc_lake.spark.errors import JVM_ERRORS, root_cause


def write_batch(
    spark: SparkSession,
    spec: HudiTableSpec,
    df: DataFrame,
    operation: WriteOperation,
    commit_metadata: dict[str, str] | None = None,
    previous: str | Unread | None = UNREAD,
    *,
    unique_keys: bool = False,
) -> str:
    """Write ``df`` into the table as one commit and return that commit's instant time.

    The table is created on first write; ``df``'s lake delete marker, if it has one, becomes
    Hudi's.  ``commit_metadata`` entries are stored
    in the commit and come back from :func:`latest_commit`.  ``previous`` is the
    latest data commit's instant (None: none) when the caller has just read it
    (the applier, under its lock): the timeline is then read once, after the
    write, instead of around it.  ``unique_keys``: ``df`` holds each record key once
    (:func:`~cdc_lake.hudi.options.write_options`).  A composite key value Hudi's record key cannot tell
    apart from another, or too long for the record index to read back, fails the write
    (:mod:`cdc_lake.hudi.keys`).  A bulk insert leaves Hudi's row writer
    only when it builds the same record keys as the upsert for the table's key types.
    """
    where = f"table '{spec.table_name}' at {spec.base_path}"
    row_writer = row_writer_keys_agree(df.schema, spec.record_key_fields)
    options = write_options(spec, operation, commit_metadata, unique_keys=unique_keys, row_writer=row_writer)
    try:
        if previous is UNREAD:
            before = latest_commit(spark, spec.base_path)
            previous = None if before is None else before.instant
        bucketed = spec.index is IndexType.BUCKET
        if operation is WriteOperation.BULK_INSERT and bucketed and previous is not None:
            # Hudi's bulk insert creates a new file group for each bucket it writes, and the bucket index
            # takes one file group per bucket (a second fails every later write: "Find multiple files ...
            # that belong to the same bucket id"); an insert writes into the buckets' own file groups.
            options["hoodie.datasource.write.operation"] = "insert"
        rows = refuse_ambiguous_keys(hudi_rows(df), spec.table_name, spec.record_key_fields)
        rows = refuse_empty_keys(rows, spec.table_name, spec.record_key_fields)
        rows = refuse_long_record_keys(rows, spec)
        rows.write.format("hudi").options(**options).mode("append").save(spec.base_path)
        after = latest_commit(spark, spec.base_path)
    except JVM_ERRORS as exc:
        raise LakeWriteError(f"Hudi {operation.value} into {where} failed: {root_cause(exc)}") from exc
    if after is None or after.instant == previous:
        raise LakeWriteError(f"Hudi {operation.value} into {where} completed no commit")
    return after.instant


def hudi_rows(df: DataFrame) -> DataFrame:
    """``df`` with the lake's delete marker, if it has one, under Hudi's name for it: the rows a Hudi write
    of the table takes (:func:`write_batch`'s, and a benchmark's plain upsert of the applier's rows)."""
    return df.withColumnsRenamed({DELETED_COLUMN: DELETE_MARKER_COLUMN})


def read_table(spark: SparkSession, base_path: str, *, meta_columns: bool = False) -> DataFrame:
    """Snapshot query of the table at ``base_path`` (for MERGE_ON_READ: base files merged with logs).

    Hudi's ``_hoodie_*`` columns are dropped unless ``meta_columns`` is true.
    """
    try:
        df = spark.read.format("hudi").load(base_path)
    except JVM_ERRORS as exc:
        raise LakeWriteError(f"reading Hudi table at {base_path} failed: {root_cause(exc)}") from exc
    if meta_columns:
        return df
    return df.drop(*[c for c in df.columns if FACTS.is_meta_column(c)])


def remove_table(spark: SparkSession, base_path: str) -> None:
    """Delete the table at ``base_path`` recursively through Hadoop's file system (local, s3a)."""
    jvm: Any = spark._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(base_path)
    fs = hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration())
    if fs.exists(hadoop_path):
        fs.delete(hadoop_path, True)
