"""Hudi tables: the spec and writer options, writes, reads and removal, the commit timeline and table
properties.  Every call into Hudi's JVM API is made here."""

from cdc_lake.hudi.options import (
    COMMIT_METADATA_PREFIX,
    DELETE_MARKER_COLUMN,
    CompactionSpec,
    HudiTableSpec,
    IndexType,
    TableType,
    WriteOperation,
    write_options,
)
from cdc_lake.hudi.timeline import CommitInfo, latest_commit, record_key_fields, records_written, table_exists
from cdc_lake.hudi.writer import read_table, remove_table, write_batch

__all__ = [
    "COMMIT_METADATA_PREFIX",
    "DELETE_MARKER_COLUMN",
    "CommitInfo",
    "CompactionSpec",
    "HudiTableSpec",
    "IndexType",
    "TableType",
    "WriteOperation",
    "latest_commit",
    "read_table",
    "record_key_fields",
    "records_written",
    "remove_table",
    "table_exists",
    "write_batch",
    "write_options",
]
