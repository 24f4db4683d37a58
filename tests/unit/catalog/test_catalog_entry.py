"""The catalog entry of a Hudi table (Glue's table input): names, Hive types, location, Hudi parameters,
partition keys."""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ByteType,
    DecimalType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from cdc_lake.catalog.entry import catalog_table_name, hive_type, table_input
from cdc_lake.lake.format import format_facts

HUDI_META_COLUMNS = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
]

COLUMNS = StructType(
    [
        StructField("id", LongType()),
        StructField("region", StringType()),
        StructField("total", DecimalType(12, 2)),
        StructField("at", TimestampType()),
    ]
)


def test_glue_names_are_lowercase_without_dots() -> None:
    assert catalog_table_name("pg.public.Orders") == "pg_public_orders"


def test_hive_types_follow_spark_but_for_byte_and_short() -> None:
    assert [hive_type(t) for t in (ByteType(), ShortType(), DecimalType(12, 2), LongType())] == [
        "tinyint",
        "smallint",
        "decimal(12,2)",
        "bigint",
    ]


def test_a_wall_clock_timestamp_is_hives_timestamp() -> None:
    # A Hive Metastore refuses Spark's name: "Invalid column type: timestamp_ntz".
    assert (hive_type(TimestampNTZType()), hive_type(TimestampType())) == ("timestamp", "timestamp")


def test_the_table_input_is_an_external_hudi_table_at_the_location() -> None:
    made: dict[str, Any] = table_input(
        format_facts("hudi"), "pg_public_orders", "s3a://lake/pg/public/orders__v2", COLUMNS, ["region"]
    )

    sd = made["StorageDescriptor"]
    assert made["TableType"] == "EXTERNAL_TABLE"
    assert made["Parameters"]["spark.sql.sources.provider"] == made["Parameters"]["classification"] == "hudi"
    assert sd["Location"] == made["Parameters"]["path"] == "s3a://lake/pg/public/orders__v2"
    assert sd["InputFormat"] == "org.apache.hudi.hadoop.HoodieParquetInputFormat"
    parquet = "org.apache.hadoop.hive.ql.io.parquet"
    assert sd["OutputFormat"] == f"{parquet}.MapredParquetOutputFormat"
    assert sd["SerdeInfo"]["SerializationLibrary"] == f"{parquet}.serde.ParquetHiveSerDe"
    # Every lake column a reader filters on (soft deletes, source time, ordering) is in the entry.
    lake = ["_cdc_op", "_cdc_source_ts", "_cdc_ordering", "_cdc_applied_at", "_cdc_deleted"]
    # They come before the source's, so a column the source gains keeps every other column's position.
    assert [c["Name"] for c in sd["Columns"]] == [*HUDI_META_COLUMNS, *lake, "id", "total", "at"]
    assert [c["Type"] for c in sd["Columns"]][-8:] == [
        "string",
        "timestamp",
        "string",
        "timestamp",
        "boolean",
        "bigint",
        "decimal(12,2)",
        "timestamp",
    ]
    assert made["PartitionKeys"] == [{"Name": "region", "Type": "string"}]


def test_partition_keys_follow_the_tables_partition_order_not_its_columns() -> None:
    """A partition's values are registered in its folder's order (``region=eu/day=...``); keys listed in the
    columns' order instead paired each value with the other key (Trino read ``day`` as the region)."""
    columns = StructType([
        StructField("id", LongType()), StructField("day", StringType()), StructField("region", StringType())
    ])
    made = table_input(format_facts("hudi"), "t", "/lake/t", columns, ["region", "day"])
    assert [k["Name"] for k in made["PartitionKeys"]] == ["region", "day"]
