"""Composite key values Hudi's record key cannot tell apart, through the real Hudi 1.1 bundle.

Hudi joins a composite record key as ``f1:v1,f2:v2`` unescaped (``cdc_lake/hudi/keys.py``): two
distinct source keys can share one record key.  Each write path of the product (the bootstrap's bulk
insert of a group, the applier's upsert) must refuse such a value, naming the table and the key column,
instead of leaving the lake with fewer rows than the source.  Keys Hudi can tell apart are written.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.hudi.format import HudiFormat, hudi_spec
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.columns import ORDERING_COLUMN
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.layout import IndexType, TableSpec, TableType
from cdc_lake.state.records import Watermark
from cdc_lake_bootstrap.partition_copy import write_failure
from cdc_lake_bootstrap.write import write_group

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("trino_reads_every_table"), pytest.mark.timeout(600)]

SCHEMA = f"a string, b string, name string, {ORDERING_COLUMN} long, _hoodie_is_deleted boolean"
COLLIDING = {
    # Both rows become record key a:x,b:y,b:z.
    "separator": [("x,b:y", "z", "first", 1, False), ("x", "y,b:z", "second", 1, False)],
    # Both rows become record key a:__empty__,b:z (an upsert takes the empty string; a bulk insert
    # refuses it, so the bootstrap's pair holds the placeholder beside a distinct key).
    "placeholder": [("", "z", "first", 1, False), ("__empty__", "z", "second", 1, False)],
}


def _spec(tmp_path: Path, name: str) -> TableSpec:
    return TableSpec(
        name=f"src.public.{name}", base_path=(tmp_path / name).as_uri(), key_fields=("a", "b"), parallelism=1
    )


def _bootstrap(spark: SparkSession, spec: TableSpec, rows: list[tuple[Any, ...]]) -> None:
    """The bootstrap's own write path: write_group through the lake format."""
    watermark = Watermark(
        spec.name, "src.public.t", {0: 0}, None, None, datetime(2026, 1, 1, tzinfo=UTC), True, ()
    )
    write_group(HudiFormat(spark), spec, spark.createDataFrame(rows, SCHEMA), watermark, [0], {})


def _apply(spark: SparkSession, spec: TableSpec, rows: list[tuple[Any, ...]]) -> None:
    write_batch(spark, hudi_spec(spec), spark.createDataFrame(rows, SCHEMA), WriteOperation.UPSERT)


def _outcome(spark: SparkSession, spec: TableSpec, write: Any, rows: list[tuple[Any, ...]]) -> str:
    """``refused: <error>`` or how many of the source's rows the lake holds under distinct record keys."""
    try:
        write(spark, spec, rows)
    except LakeWriteError as exc:
        assert latest_commit(spark, spec.base_path) is None
        return f"refused: {exc}"
    keys = read_table(spark, spec.base_path, meta_columns=True).select("_hoodie_record_key").distinct()
    return f"lake holds {keys.count()} of {len(rows)} source rows"


@pytest.mark.parametrize("path", ["bootstrap", "apply"])
@pytest.mark.parametrize("case", sorted(COLLIDING))
def test_keys_hudi_cannot_tell_apart_stop_the_write_instead_of_losing_a_row(
    spark: SparkSession, tmp_path: Path, path: str, case: str
) -> None:
    rows = COLLIDING[case]
    if path == "bootstrap" and case == "placeholder":
        rows = [("__empty__", "z", "first", 1, False), ("x", "z", "second", 1, False)]
    spec = _spec(tmp_path, f"{path}_{case}")

    outcome = _outcome(spark, spec, _bootstrap if path == "bootstrap" else _apply, rows)

    assert outcome.startswith(f"refused: Hudi {'bulk_insert' if path == 'bootstrap' else 'upsert'} into "
                              f"table '{spec.name}'"), outcome
    assert f"table {spec.name}: key column 'a' of the row with key {{\"a\":" in outcome
    assert "set key in the table's config" in outcome and "\n" not in outcome
    if path == "bootstrap":  # a refused value: the bootstrap ends at once, naming what to change
        error = write_failure(spec.name, [0], outcome.removeprefix("refused: "), 1)
        assert error is not None and "resume" not in str(error), error


def test_keys_hudi_tells_apart_are_all_written(spark: SparkSession, tmp_path: Path) -> None:
    # Commas, colons and the other key column's name, but never ',<key column>:' nor a placeholder.
    rows = [("x,y", "b:z", "1", 1, False), ("x", "y,b", "2", 1, False), ("x:b", ",a", "3", 1, False)]
    spec = _spec(tmp_path, "distinct")
    _bootstrap(spark, spec, rows)
    _apply(spark, spec, [("", "z", "4", 2, False), ("x", ",b", "5", 2, False)])

    stored = read_table(spark, spec.base_path).select("a", "b", "name").orderBy("name").collect()
    assert [tuple(r) for r in stored] == [
        ("x,y", "b:z", "1"), ("x", "y,b", "2"), ("x:b", ",a", "3"), ("", "z", "4"), ("x", ",b", "5")
    ]


@pytest.mark.parametrize("path", ["bootstrap", "apply"])
def test_a_record_key_the_record_index_cannot_read_back_stops_the_write(
    spark: SparkSession, tmp_path: Path, path: str
) -> None:
    # Hudi 1.1.1's record index fails every later lookup (or runs the JVM out of memory) once it holds a
    # key of 126 bytes or more (apache/hudi#18450): 'a:' + 'x' * 60 + ',b:' + 'y' * 61 is 126 bytes.
    spec = replace(
        _spec(tmp_path, f"long_{path}"), table_type=TableType.MERGE_ON_READ, index=IndexType.RECORD_INDEX
    )
    longest = [("x" * 60, "y" * 60, "fits", 1, False)]  # 125 bytes: written, and upserted again
    (_bootstrap if path == "bootstrap" else _apply)(spark, spec, longest)
    _apply(spark, spec, [("x" * 60, "y" * 60, "again", 2, False)])

    before = latest_commit(spark, spec.base_path)

    with pytest.raises(LakeWriteError) as refused:
        (_bootstrap if path == "bootstrap" else _apply)(spark, spec, [("x" * 60, "y" * 61, "no", 3, False)])

    outcome = str(refused.value)
    assert "is 126 bytes; Hudi 1.1.1's record index" in outcome, outcome
    assert f"table {spec.name}: the record key of the row with key" in outcome and "\n" not in outcome
    assert latest_commit(spark, spec.base_path) == before
    stored = read_table(spark, spec.base_path).select("a", "b", "name").collect()
    assert [tuple(r) for r in stored] == [("x" * 60, "y" * 60, "again")]
