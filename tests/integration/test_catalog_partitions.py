"""A partitioned table's partitions in the stack's Hive Metastore follow the table and a re-bootstrap's
new copy, as Trino (which takes partitions from the metastore) reads them.

Two copies of one table are written, partitioned by ``region``: the first with ``eu`` and ``us/west``
(a value Hudi escapes in its folder name), the second, as a re-bootstrap would leave it, with ``eu`` and
``apac``.  The catalog sync registers the first copy with its partitions; then the applier's call after
a batch at the second copy's path moves ``eu`` there, adds ``apac`` and drops ``us/west``.  Trino reads
each copy's rows exactly, every column, and the metastore's partitions name only the current copy's
folders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType
from support.compare import assert_rows_equal
from support.trino_reader import WRITER_TESTS_DATABASE, catalog_rows

from cdc_lake.catalog.hive import HiveMetastoreCatalog
from cdc_lake.catalog.sync import CatalogSync
from cdc_lake.config import HiveMetastoreSettings
from cdc_lake.hudi.format import HudiFormat
from cdc_lake.hudi.options import HudiTableSpec
from cdc_lake.hudi.writer import write_batch
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.schema import row_columns
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]

SCHEMA = StructType([
    StructField("id", LongType(), False),
    StructField("region", StringType(), False),
    StructField("note", StringType(), True),
    StructField("_cdc_ordering", StringType(), False),
])
COPIES = {
    "v1": [(1, "eu", "a"), (2, "us/west", "b"), (3, "eu", "c")],
    "v2": [(1, "eu", "a2"), (3, "eu", "c2"), (4, "apac", "d")],
}


def _write(spark: SparkSession, base_path: str, rows: list[tuple[int, str, str]]) -> None:
    spec = HudiTableSpec(
        table_name="regions", base_path=base_path, record_key_fields=("id",), ordering_field="_cdc_ordering",
        partition_fields=("region",), parallelism=1,
    )
    frame = spark.createDataFrame([(*row, "1") for row in rows], SCHEMA)
    write_batch(spark, spec, frame, WriteOperation.UPSERT)


def _metastore_partitions(
    spark: SparkSession, stack: LocalStack, entry: str, *, drop: bool
) -> dict[tuple[str, ...], str]:
    """The entry's partitions in the metastore: values -> folder (``drop``: then drop the entry)."""
    jvm: Any = spark._jvm
    conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
    conf.set("hive.metastore.uris", stack.hive_metastore.uri)
    client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
    try:
        found = client.listPartitions(WRITER_TESTS_DATABASE, entry, -1)
        held = {tuple(p.getValues()): str(p.getSd().getLocation()).removeprefix("file:") for p in found}
        if drop:
            client.dropTable(WRITER_TESTS_DATABASE, entry, False, True)
        return held
    finally:
        client.close()


def test_partitions_follow_the_table_to_its_new_copy(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    paths = {copy: str(tmp_path / copy) for copy in COPIES}
    for copy, rows in COPIES.items():
        _write(spark, paths[copy], rows)
    lake = HudiFormat(spark)
    table = f"writer_tests.partitions.{tmp_path.name}"
    entry = table.replace(".", "_").lower()
    hive = HiveMetastoreCatalog(
        HiveMetastoreSettings(uri=local_stack.hive_metastore.uri, database=WRITER_TESTS_DATABASE)
    )
    sync = CatalogSync([hive])
    columns = row_columns(lake.read(paths["v1"]).schema)
    names = ["id", "region", "note"]
    types = {f.name: f.dataType for f in SCHEMA.fields}

    sync.register(table, paths["v1"], columns, ("region",), lake.partitions(paths["v1"]))
    assert _metastore_partitions(spark, local_stack, entry, drop=False) == {
        ("eu",): f"{paths['v1']}/region=eu", ("us/west",): f"{paths['v1']}/region=us%2Fwest"
    }
    # Synced again unchanged: nothing to change (the metastore's ``file:`` locations are the same folders).
    assert hive.sync_partitions(table, paths["v1"], lake.partitions(paths["v1"])) == 0
    first = catalog_rows(local_stack, WRITER_TESTS_DATABASE, table, names)
    expected = [dict(zip(names, row, strict=True)) for row in COPIES["v1"]]
    assert_rows_equal(table, expected, first, types, ("id",), reader="trino", expected_from_source=False)

    sync.after_batch(table, paths["v2"], columns, ("region",), lake.partitions)
    second = catalog_rows(local_stack, WRITER_TESTS_DATABASE, table, names)
    expected = [dict(zip(names, row, strict=True)) for row in COPIES["v2"]]
    assert_rows_equal(table, expected, second, types, ("id",), reader="trino", expected_from_source=False)
    assert len(second) == 3
    held = _metastore_partitions(spark, local_stack, entry, drop=True)
    assert held == {("eu",): f"{paths['v2']}/region=eu", ("apac",): f"{paths['v2']}/region=apac"}
