"""AWS Glue Data Catalog sync through boto3's Glue API (Hudi's own Glue sync tool, in ``hudi-aws``, is
not resolvable from the Maven mirror here).

A table ``source.schema.table`` is registered as ``<database>.<source>_<schema>_<table>`` (Glue names
are lowercase, without dots), an external table whose storage descriptor points at the table's
current base path, with the columns of the lake table (Hudi's metadata columns first, as Hudi writes
them) and the parameters Athena and Spark use to read a Hudi copy-on-write table: Hudi's input format,
the Parquet SerDe, ``spark.sql.sources.provider=hudi`` and ``path``.

:meth:`GlueCatalog.sync` creates the database and the table, or updates the table in place when its
location or columns changed: one ``UpdateTable`` call, so readers see the old or the new location,
never no table.  That is the re-bootstrap switch readers see.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from pyspark.sql.types import ByteType, DataType, ShortType, StructType, TimestampNTZType

from cdc_lake.config import GlueSettings
from cdc_lake.exceptions import CatalogError

_LOG = logging.getLogger(__name__)

HUDI_META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


def glue_table_name(qualified_name: str) -> str:
    """``pg.public.Orders`` -> ``pg_public_orders``."""
    return qualified_name.replace(".", "_").lower()


def hive_type(data_type: DataType) -> str:
    """The Hive/Glue type name of a Spark type (Spark's simple strings are Hive's, but a few).

    Hive has no ``timestamp_ntz``: its ``timestamp`` is the wall-clock one (a metastore refuses the
    Spark name).
    """
    if isinstance(data_type, TimestampNTZType):
        return "timestamp"
    if isinstance(data_type, ByteType):
        return "tinyint"
    if isinstance(data_type, ShortType):
        return "smallint"
    return data_type.simpleString()


def table_input(
    name: str, location: str, columns: StructType, partition_fields: Sequence[str] = ()
) -> dict[str, Any]:
    """The Glue ``TableInput`` of a Hudi table at ``location`` with row ``columns``."""
    partitions = set(partition_fields)
    meta = [{"Name": c, "Type": "string"} for c in HUDI_META_COLUMNS]
    data = [
        {"Name": f.name, "Type": hive_type(f.dataType)} for f in columns.fields if f.name not in partitions
    ]
    keys = [{"Name": f.name, "Type": hive_type(f.dataType)} for f in columns.fields if f.name in partitions]
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {
            "EXTERNAL": "TRUE",
            "classification": "hudi",
            "spark.sql.sources.provider": "hudi",
            "path": location,
        },
        "PartitionKeys": keys,
        "StorageDescriptor": {
            "Columns": meta + data,
            "Location": location,
            "InputFormat": INPUT_FORMAT,
            "OutputFormat": OUTPUT_FORMAT,
            "SerdeInfo": {
                "SerializationLibrary": SERDE,
                "Parameters": {"serialization.format": "1", "path": location},
            },
        },
    }


class GlueCatalog:
    """Registers tables in one Glue database."""

    def __init__(self, settings: GlueSettings) -> None:
        self.settings = settings
        self.client: Any = boto3.client(
            "glue", region_name=settings.region, endpoint_url=settings.endpoint_url
        )

    def sync(
        self, qualified_name: str, location: str, columns: StructType, partition_fields: Sequence[str]
    ) -> str:
        """Create or update the table's entry; returns ``database.table``."""
        database, name = self.settings.database, glue_table_name(qualified_name)
        wanted = table_input(name, location, columns, partition_fields)
        try:
            self._ensure_database(database)
            try:
                current = self.client.get_table(DatabaseName=database, Name=name)["Table"]
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "EntityNotFoundException":
                    raise
                self.client.create_table(DatabaseName=database, TableInput=wanted)
                _LOG.info("%s: registered as glue table %s.%s at %s", qualified_name, database, name,
                          location)
                return f"{database}.{name}"
            if _same(current, wanted):
                return f"{database}.{name}"
            self.client.update_table(DatabaseName=database, TableInput=wanted)
            _LOG.info("%s: glue table %s.%s now at %s", qualified_name, database, name, location)
        except (ClientError, BotoCoreError) as exc:
            raise CatalogError(f"table {qualified_name}: glue catalog {database}.{name}: {exc}") from exc
        return f"{database}.{name}"

    def location(self, qualified_name: str) -> str | None:
        """The registered location of the table (None when it is not registered)."""
        try:
            name = glue_table_name(qualified_name)
            table = self.client.get_table(DatabaseName=self.settings.database, Name=name)
        except ClientError:
            return None
        return str(table["Table"]["StorageDescriptor"]["Location"])

    def _ensure_database(self, database: str) -> None:
        try:
            self.client.get_database(Name=database)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "EntityNotFoundException":
                raise
            self.client.create_database(DatabaseInput={"Name": database})


def _same(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    sd, want = current.get("StorageDescriptor", {}), wanted["StorageDescriptor"]
    return bool(
        sd.get("Location") == want["Location"]
        and [(c["Name"], c["Type"]) for c in sd.get("Columns", [])]
        == [(c["Name"], c["Type"]) for c in want["Columns"]]
        and current.get("PartitionKeys", []) == wanted["PartitionKeys"]
    )
