"""The record key and the columns a bootstrap reads, checked against the source table's catalog.

The key is the config's ``key`` if set, else the table's primary key: the same columns the applier
keys on (Debezium's message key is the primary key).  Bootstrap partitions are ranges of this key, so
a row is in exactly one of them.  Hudi record keys cannot be null, so a nullable key column is refused,
as is a table with neither a primary key nor a configured key.

A configured key that does not hold the primary key is unique only as long as a unique index says so:
onboarding checks that one exists, but it can be dropped later, and the bulk insert stores every row it
reads, so two rows sharing the key would be two lake rows under one record key.  Such a copy is read
back once written (:func:`duplicate_key`: one aggregation over the key columns) before the hand-off.
Every plan partition is one statement on the source, and a key value falls in exactly one partition, so
two copied rows share a key only when the source held both at once: never under a unique index.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lake.config import Table
from cdc_lake.exceptions import BootstrapError
from cdc_lake.sources.snapshot import TableShape
from cdc_lake_bootstrap.lake_types import spark_column


def record_key(qualified: str, table: Table, shape: TableShape) -> tuple[str, ...]:
    """The key columns of ``table``; raises BootstrapError when there is no usable one."""
    key = tuple(table.key) if table.key else shape.primary_key
    if not key:
        raise BootstrapError(
            f"table {qualified} has no primary key: set key in its config entry to columns that are unique "
            "and not null"
        )
    for name in key:
        column = shape.column(name)
        if column is None:
            raise BootstrapError(f"table {qualified}: key column {name} does not exist in the source table")
        if column.nullable:
            raise BootstrapError(
                f"table {qualified}: key column {name} is nullable; record keys must not be null"
            )
    return key


def selected_columns(qualified: str, table: Table, shape: TableShape, key: tuple[str, ...]) -> list[str]:
    """The columns to read, in table order: the frozen ``columns`` list plus the key, else all."""
    if not table.columns:
        return [column.name for column in shape.columns]
    missing = [name for name in table.columns if shape.column(name) is None]
    if missing:
        raise BootstrapError(f"table {qualified}: columns {missing} of its config do not exist in the source")
    wanted = set(table.columns) | set(key)
    return [column.name for column in shape.columns if column.name in wanted]


def unique_by_definition(key: tuple[str, ...], shape: TableShape) -> bool:
    """Whether ``key`` holds the table's primary key, so no two rows can share it."""
    return bool(shape.primary_key) and set(shape.primary_key) <= set(key)


def duplicate_key(rows: DataFrame, key: tuple[str, ...]) -> tuple[str, int] | None:
    """A value of ``key`` that several of ``rows`` share (as JSON, ``{"code":"c7"}``) and how many share
    it; None when every row has its own."""
    columns = [spark_column(name) for name in key]
    shared = (
        rows.groupBy(*columns)
        .count()
        .where(F.col("count") > 1)
        .select(F.to_json(F.struct(*columns)).alias("key"), "count")
        .limit(1)
        .collect()
    )
    return (str(shared[0]["key"]), int(shared[0]["count"])) if shared else None
