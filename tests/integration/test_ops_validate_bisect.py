"""`validate`'s comparison bisects differing ranges down to a few rows and names exactly the keys changed.

Differences are planted in a copy of a generated table (rows deleted, changed and added); the
comparison must name exactly those keys, with the rows joined by key bounded by the leaf size at the
last level, both for an integral key (key ranges) and a text key (hash positions).  Without
bisection (one range) it finds the same keys by joining everything.
"""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_lake.validation import ValidateResult
from cdc_lake_bootstrap.validate import ValidateOptions, compare_rows

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ROWS = 200_000
MISSING = [17, 123_456]
DIFFERENT = [99_999, 150_001, 199_999]
EXTRA = [250_000]


def _tables(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    source = spark.range(ROWS).select(
        F.col("id"),
        F.concat(F.lit("n"), F.col("id").cast("string")).alias("note"),
        (F.col("id") / 4).alias("amount"),
    )
    extra = spark.createDataFrame([(i, "extra", 0.0) for i in EXTRA], "id long, note string, amount double")
    changed = F.col("id").isin(DIFFERENT)
    lake = (
        source.where(~F.col("id").isin(MISSING))
        .withColumn("note", F.when(changed, F.lit("changed behind the pipeline")).otherwise(F.col("note")))
        .unionByName(extra)
    )
    return source, lake


def _compare(
    spark: SparkSession, source: DataFrame, lake: DataFrame, key: str, buckets: int, leaf_rows: int = 10_000
) -> ValidateResult:
    result = ValidateResult("t")
    values = [c for c in source.columns if c != key]
    options = ValidateOptions(buckets=buckets, max_keys=10, leaf_rows=leaf_rows)
    compare_rows(spark, source, lake, (key,), values, options, result)
    return result


def _found(result: ValidateResult, key: str) -> tuple[list[object], list[object], list[object]]:
    return (
        [k[key] for k in result.missing],
        [k[key] for k in result.different],
        [k[key] for k in result.extra],
    )


def test_bisection_on_an_integral_key_names_exactly_the_planted_keys(spark: SparkSession) -> None:
    source, lake = _tables(spark)

    result = _compare(spark, source, lake, "id", buckets=16, leaf_rows=100)

    assert _found(result, "id") == (MISSING, DIFFERENT, EXTRA)
    assert (result.missing_count, result.different_count, result.extra_count) == (2, 3, 1)
    assert (result.source_rows, result.lake_rows) == (ROWS, ROWS - 2 + 1)
    # Span 250,001 in 16 ranges of 15,626 ids, then 977, 62 and 4: 6 differing ranges of 4 at most.
    assert result.levels == 4, result
    assert result.differing_ranges == 6 and 0 < result.compared_rows <= 6 * 4, result

    unbisected = _compare(spark, source, lake, "id", buckets=1)
    assert _found(unbisected, "id") == (MISSING, DIFFERENT, EXTRA)
    assert unbisected.levels == 1 and unbisected.compared_rows == ROWS  # the larger side


def test_bisection_on_a_text_key_uses_hash_positions(spark: SparkSession) -> None:
    source, lake = (
        frame.withColumn("code", F.concat(F.lit("k"), F.lpad(F.col("id").cast("string"), 7, "0"))).drop("id")
        for frame in _tables(spark)
    )

    result = _compare(spark, source, lake, "code", buckets=64, leaf_rows=50)

    def codes(ids: list[int]) -> list[object]:
        return [f"k{i:07d}" for i in ids]

    assert _found(result, "code") == (codes(MISSING), codes(DIFFERENT), codes(EXTRA))
    assert result.levels > 2 and 0 < result.compared_rows <= 50, result


def test_equal_tables_bisect_nothing(spark: SparkSession) -> None:
    source, _ = _tables(spark)

    result = _compare(spark, source, source, "id", buckets=16, leaf_rows=100)

    assert (result.missing_count, result.different_count, result.extra_count) == (0, 0, 0)
    assert result.levels == 1 and result.compared_rows == 0 and result.differing_ranges == 0


def test_keys_the_lake_holds_twice_are_named_as_duplicates(spark: SparkSession) -> None:
    # Two record keys for one source key (a bootstrap and an applier that built them differently): a copy
    # equal to the source row, and one with an older value; either way "2 lake rows for key".
    source, _ = _tables(spark)
    twins = source.where(F.col("id") == 777).unionByName(
        source.where(F.col("id") == 888).withColumn("note", F.lit("an older value"))
    )
    lake = source.unionByName(twins)

    result = _compare(spark, source, lake, "id", buckets=16, leaf_rows=100)

    assert result.duplicate == [{"id": 777, "lake_rows": 2}, {"id": 888, "lake_rows": 2}], result
    assert result.duplicate_count == 2 and not result.matches
    assert (result.missing_count, result.different_count, result.extra_count) == (0, 0, 0)
    assert (result.source_rows, result.lake_rows) == (ROWS, ROWS + 2)
