"""The bootstrap's Spark conversions of JDBC text: exact lake values, or a failure naming the column.

Values are given as the source's text (what the bootstrap's SELECT hands over), so the conversions are
tested on Spark alone; ``test_bootstrap_behaviors.py`` reads real sources of every engine.
"""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import SparkSession

from cdc_lake.sources.snapshot import SourceColumn, TableShape
from cdc_lake.spark.errors import JVM_ERRORS, root_cause
from cdc_lake_bootstrap.lake_types import column_reads, to_lake_types

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _convert(spark: SparkSession, engine: str, type_name: str, text: str) -> object:
    shape = TableShape("s.t", (SourceColumn("c", type_name, type_name, True),), (), 0, 0)
    reads = column_reads(engine, shape, ["c"], lambda name: f'"{name}"')
    frame = spark.createDataFrame([(text,)], "c string")
    return to_lake_types(frame, reads, "s.t", ["c"]).collect()[0][0]


def test_iso_dates_and_timestamps_convert_exactly(spark: SparkSession) -> None:
    assert _convert(spark, "postgres", "date", "0001-01-01") == dt.date(1, 1, 1)
    assert _convert(spark, "postgres", "timestamp", "9999-12-31 23:59:59.999999") == dt.datetime(
        9999, 12, 31, 23, 59, 59, 999999
    )
    assert _convert(spark, "mysql", "datetime", "2024-02-29 12:00:00") == dt.datetime(2024, 2, 29, 12)


@pytest.mark.parametrize(
    ("engine", "type_name", "text"),
    [
        # Postgres writes BC dates with a suffix that Spark's cast silently ignores (44 AD).
        ("postgres", "date", "0044-03-15 BC"),
        ("postgres", "timestamp", "0044-03-15 12:00:00 BC"),
        ("postgres", "date", "10000-01-01"),
        ("postgres", "date", "infinity"),
        ("postgres", "timestamp", "-infinity"),
        ("mysql", "date", "0000-00-00"),
        ("mysql", "timestamp", "0044-03-15 12:00:00 BC"),
    ],
)
def test_dates_the_applier_refuses_are_refused_naming_the_column(
    spark: SparkSession, engine: str, type_name: str, text: str
) -> None:
    with pytest.raises(JVM_ERRORS) as failure:
        _convert(spark, engine, type_name, text)
    assert "table s.t: column c of the row with key {" in root_cause(failure.value)
