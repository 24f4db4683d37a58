"""The catalog entry of a lake table, the same in every catalog (AWS Glue, a Hive Metastore).

A table ``source.schema.table`` is registered as ``<database>.<source>_<schema>_<table>`` (Glue names
are lowercase, without dots), an external table whose storage descriptor points at the table's
current base path, with every column of the lake table: the format's metadata columns, the lake's own
``_cdc_*`` columns (so that a reader can filter soft-deleted rows; the delete marker is never a
visible column), then the source's.  Readers match Parquet columns by name, so the entry's order is
free, and this one keeps every column's position when the source gains a column: a Hive Metastore
refuses an entry whose column at a position changes to a type it cannot convert to ("The following
columns have types incompatible with the existing columns").  The entry also holds the parameters
Athena and Spark use to read the table: the format's input and output formats, SerDe and
``classification`` (its :class:`~cdc_lake.lake.format.CatalogStorage`),
``spark.sql.sources.provider`` (the format's name: Spark's data source) and ``path``; the format's
facts (:class:`~cdc_lake.lake.format.FormatFacts`) give them.  It is written as Glue's ``TableInput``;
the Hive catalog builds its metastore ``Table`` from that.  Neither boto3 nor a JVM is needed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql.types import ByteType, DataType, ShortType, StructType, TimestampNTZType

from cdc_lake.lake.columns import DELETED_COLUMN, METADATA_FIELDS
from cdc_lake.lake.format import FormatFacts


def catalog_table_name(qualified_name: str) -> str:
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
    facts: FormatFacts, name: str, location: str, columns: StructType, partition_fields: Sequence[str] = ()
) -> dict[str, Any]:
    """The Glue ``TableInput`` of a table of the format ``facts`` declares at ``location`` with row
    ``columns`` (the source's)."""
    storage = facts.catalog_storage
    partitions = set(partition_fields)
    meta = [{"Name": c, "Type": "string"} for c in facts.meta_columns]
    data = [
        {"Name": f.name, "Type": hive_type(f.dataType)} for f in columns.fields if f.name not in partitions
    ]
    lake = [
        {"Name": f.name, "Type": hive_type(f.dataType)} for f in METADATA_FIELDS if f.name != DELETED_COLUMN
    ]
    # In the table's partition order, which is its folders' (region=eu/day=...), not the columns'.
    by_name = {f.name: f for f in columns.fields}
    keys = [{"Name": n, "Type": hive_type(by_name[n].dataType)} for n in partition_fields if n in by_name]
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {
            "EXTERNAL": "TRUE",
            "classification": storage.classification,
            "spark.sql.sources.provider": facts.name,
            "path": location,
        },
        "PartitionKeys": keys,
        "StorageDescriptor": {
            "Columns": meta + lake + data,
            "Location": location,
            "InputFormat": storage.input_format,
            "OutputFormat": storage.output_format,
            "SerdeInfo": {
                "SerializationLibrary": storage.serde,
                "Parameters": {"serialization.format": "1", "path": location},
            },
        },
    }
