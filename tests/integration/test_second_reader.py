"""The second reader reads every column of every table, or the check that uses it fails (no stack).

A COPY_ON_WRITE and a MERGE_ON_READ table are written with the product's writer (local Spark) in three
commits: inserts; updates, hard deletes and new keys; a delete undone by a re-insert and more updates.
Their columns are the representations the lake holds that readers hand over differently:
``timestamp_ntz`` (hudi-rs 0.5 panics on it), ``timestamp`` (year 1000 too), ``date``, decimals, a double
with NaN, a float, arrays with NULL elements, binary, JSON text.  Both tables keep replaced base files
in their folder, so a reader of "every Parquet file" would read rows twice.  The second reader must
read what Spark reads, value for value; a check built on it (:func:`support.apply.lake_rows`) must fail
when the second reader reads something else, also for a table with a ``timestamp_ntz`` column.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from support import apply
from support.compare import assert_rows_equal
from support.second_reader import second_reader_rows
from support.trino_reader import WRITER_TESTS_DATABASE, catalog_rows, register

from cdc_lake.hudi.options import HudiTableSpec
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.layout import TableType
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

SCHEMA = StructType(
    [
        StructField("id", LongType(), False),
        StructField("ntz", TimestampNTZType()),
        StructField("ts", TimestampType()),
        StructField("d", DateType()),
        StructField("amount", DecimalType(12, 2)),
        StructField("wide", DecimalType(38, 18)),
        StructField("dbl", DoubleType()),
        StructField("r", FloatType()),
        StructField("tags", ArrayType(StringType())),
        StructField("nums", ArrayType(IntegerType())),
        StructField("data", BinaryType()),
        StructField("doc", StringType()),
        StructField("_cdc_ordering", StringType(), False),
        StructField("_hoodie_is_deleted", BooleanType(), False),
    ]
)
COLUMNS = [f.name for f in SCHEMA.fields if f.name != "_hoodie_is_deleted"]


def _row(key: int, version: int, deleted: bool = False) -> tuple[Any, ...]:
    """Row ``key`` as written by commit ``version``; every fifth row is NULL but key and ordering."""
    ordering = f"{version:08d}"
    if key % 5 == 0:
        return (key, *([None] * 11), ordering, deleted)
    instant = dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC) + dt.timedelta(days=key, microseconds=version)
    return (
        key,
        dt.datetime(2024, 3, 1, 12, 34, 56, 654321) + dt.timedelta(hours=key + version),
        dt.datetime(1000, 1, 1, tzinfo=dt.UTC) if key == 1 else instant,
        dt.date(1900, 2, 28) + dt.timedelta(days=key),
        Decimal(key * 100 + version) / 100,
        Decimal(f"{key}.{version:018d}"),
        float("nan") if key % 7 == 3 else key / 7 + version,
        1.5 + version,
        ["a", None, f"b{key}-{version}"],
        [key, None, -version],
        bytes([key % 256, 0, 255]),
        f'{{"k": {key}, "v": {version}}}',
        ordering,
        deleted,
    )


COMMITS = (
    [_row(k, 0) for k in range(1, 41)],
    [_row(k, 1) for k in range(1, 41, 3) if k % 4 != 2]
    + [_row(k, 1, deleted=True) for k in range(2, 41, 4)]
    + [_row(k, 1) for k in range(41, 46)],
    [_row(6, 2), _row(7, 2), _row(8, 2)],
)
"""Inserts 1..40; updates, deletes of 2, 6, 10, ... and inserts 41..45; 6 re-inserted, 7 and 8 updated."""
LIVE = 45 - 10 + 1


@pytest.fixture(scope="module", params=[TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ], ids=str)
def table(
    request: pytest.FixtureRequest, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The base path of a table of :data:`SCHEMA` after the :data:`COMMITS`."""
    table_type: TableType = request.param
    base_path = str(tmp_path_factory.mktemp("second-reader") / table_type.value)
    spec = HudiTableSpec(
        table_name=f"second_reader_{table_type.value}",
        base_path=base_path,
        record_key_fields=("id",),
        ordering_field="_cdc_ordering",
        table_type=table_type,
        parallelism=2,
    )
    for rows in COMMITS:
        write_batch(spark, spec, spark.createDataFrame(rows, SCHEMA), WriteOperation.UPSERT)
    return base_path


def test_the_table_keeps_replaced_base_files(table: str) -> None:
    """More Parquet files than file groups: reading every file in the folder would read rows twice."""
    parquet = list(Path(table).glob("*.parquet"))
    groups = {p.name.split("_")[0] for p in parquet}
    assert len(parquet) > len(groups), parquet


def test_the_second_reader_reads_every_column_as_spark_does(spark: SparkSession, table: str) -> None:
    frame = read_table(spark, table)
    types = {f.name: f.dataType for f in frame.schema.fields}
    spark_rows = [row.asDict(recursive=True) for row in frame.collect()]
    second = second_reader_rows(table, COLUMNS)

    assert len(second) == len(spark_rows) == LIVE
    assert_rows_equal(
        table, spark_rows, second, types, ("id",), reader="second reader", expected_from_source=False
    )
    row = next(r for r in second if r["id"] == 1)
    assert row["ts"] == dt.datetime(1000, 1, 1, tzinfo=dt.UTC) and row["tags"] == ["a", None, "b1-1"]


@pytest.mark.parametrize(
    ("column", "value"),
    [("ntz", dt.datetime(2000, 1, 1)), ("dbl", 0.5), ("tags", ["a", "b"]), ("data", b"\x00")],
)
def test_lake_rows_fails_when_the_second_reader_reads_another_value(
    spark: SparkSession, table: str, monkeypatch: pytest.MonkeyPatch, column: str, value: Any
) -> None:
    """No early return: a table with a ``timestamp_ntz`` column is compared, every column of it."""

    def altered(base_path: str, columns: list[str]) -> list[dict[str, Any]]:
        rows = second_reader_rows(base_path, columns)
        next(r for r in rows if r["id"] == 3)[column] = value
        return rows

    monkeypatch.setattr(apply, "second_reader_rows", altered)
    with pytest.raises(AssertionError, match=f"second reader, .*key \\[3\\] column {column}:"):
        apply.lake_rows(spark, table)


def test_lake_rows_fails_when_the_second_reader_misses_a_row(
    spark: SparkSession, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apply, "second_reader_rows", lambda *args: second_reader_rows(*args)[1:])
    with pytest.raises(AssertionError, match="keys missing"):
        apply.lake_rows(spark, table)


@pytest.mark.integration
def test_trino_reads_through_the_catalog_what_spark_reads(
    spark: SparkSession, table: str, local_stack: LocalStack
) -> None:
    """Issue 36: a table written without a product verb, registered as ``catalog.hive`` registers one, is
    read by Trino through the catalog, every column: a COPY_ON_WRITE table equal to Spark's snapshot, a
    MERGE_ON_READ one to Spark's read-optimized view (Trino 476 reads base files only: docs/hudi.md)."""
    table_type = TableType(Path(table).name)
    query_type = "snapshot" if table_type is TableType.COPY_ON_WRITE else "read_optimized"
    frame = read_table(spark, table)
    expected_frame = spark.read.format("hudi").option("hoodie.datasource.query.type", query_type).load(table)
    columns = [c for c in COLUMNS if c != "_cdc_ordering"]
    types = {f.name: f.dataType for f in frame.schema.fields}
    expected = [row.asDict(recursive=True) for row in expected_frame.select(*columns).collect()]
    name = f"writer_tests.second_reader.{table_type.value.lower()}"
    register(local_stack, name, table, frame.select(*columns).schema)

    trino = catalog_rows(local_stack, WRITER_TESTS_DATABASE, name, columns)

    assert len(trino) == len(expected) > 0
    assert_rows_equal(table, expected, trino, types, ("id",), reader="trino", expected_from_source=False)
