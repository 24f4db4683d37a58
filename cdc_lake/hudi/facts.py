"""Hudi's facts as a lake format (:data:`FACTS`): what the code around the writers asks of it, without Spark.

The Spark bundle of the Hudi release the product is built and tested against, the session settings its
Spark integration needs, the five meta columns it adds to every table (and the ``_hoodie_`` columns it
uses internally), how Hive and Glue describe its tables, Trino's connector for them, which ``hoodie.*``
options pass through (:func:`cdc_lake.hudi.options.passthrough_option_problem`), which composite
keys its record key cannot tell apart and which keys it takes as one (:mod:`cdc_lake.hudi.keys`, imported
when asked: it needs Spark).
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from cdc_lake.hudi.options import passthrough_option_problem
from cdc_lake.lake.format import CatalogStorage, FormatFacts

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructType

HUDI_VERSION: Final = "1.1.1"
_META_PREFIX = "_hoodie_"


class HudiFacts(FormatFacts):
    """Apache Hudi |version| through its Spark datasource."""

    name = "hudi"
    version = HUDI_VERSION
    implementation = "cdc_lake.hudi.format.HudiFormat"
    spark_conf: ClassVar[Mapping[str, str]] = {
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
        "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
        # Hudi's Avro-to-Parquet writer (upserts, MOR compaction) defaults to the legacy two-level list,
        # which cannot hold a NULL array element ("Array contains a null element") and differs from the
        # three-level list Spark's row writer (bulk_insert) uses; the standard layout fixes both.
        "spark.hadoop.parquet.avro.write-old-list-structure": "false",
    }
    spark_probe_class = "org.apache.spark.sql.hudi.HoodieSparkSessionExtension"
    meta_columns = (
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    )
    catalog_storage = CatalogStorage(
        input_format="org.apache.hudi.hadoop.HoodieParquetInputFormat",
        output_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        serde="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
        classification="hudi",
    )
    trino_connector = "hudi"

    def spark_packages(self, spark_line: str, scala_binary_version: str) -> tuple[str, ...]:
        return (f"org.apache.hudi:hudi-spark{spark_line}-bundle_{scala_binary_version}:{HUDI_VERSION}",)

    def is_meta_column(self, column: str) -> bool:
        return column.startswith(_META_PREFIX)

    def commit_time(self, instant: str) -> float | None:
        # ``yyyyMMddHHmmssSSS``; cdc-lake's writers make instants in UTC (hoodie.timeline.timezone).
        if len(instant) < 14 or not instant[:14].isdigit():
            return None
        seconds = calendar.timegm(time.strptime(instant[:14], "%Y%m%d%H%M%S"))
        millis = int(instant[14:17]) / 1000 if instant[14:17].isdigit() else 0.0
        return float(seconds) + millis

    def option_problem(self, key: str) -> str | None:
        return passthrough_option_problem(key)

    def key_problem(self, table: str, row: Mapping[str, Any], key_fields: Sequence[str]) -> str | None:
        from cdc_lake.hudi import keys

        column = keys.ambiguous_key_column(row, key_fields)
        return None if column is None else keys.ambiguous_key_reason(table, column, key_fields)

    def key_identity(self, key: tuple[Any, ...]) -> Hashable:
        from cdc_lake.hudi import keys

        return keys.key_identity(key)

    def key_identity_column(self, key: Column, key_type: StructType) -> Column:
        from cdc_lake.hudi import keys

        return keys.key_identity_column(key, key_type)


FACTS: Final = HudiFacts()
