"""The lake table contract's metadata columns: what every lake table carries besides the source's columns.

The names are the lake's, not a format's: the delete marker :data:`DELETED_COLUMN` is the one a writer's
frame carries, and each format maps it to its own (Hudi: ``_hoodie_is_deleted``) when it writes.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql.types import BooleanType, StringType, StructField, StructType, TimestampType

OP_COLUMN = "_cdc_op"
SOURCE_TS_COLUMN = "_cdc_source_ts"
ORDERING_COLUMN = "_cdc_ordering"
APPLIED_AT_COLUMN = "_cdc_applied_at"
SOFT_DELETED_COLUMN = "_cdc_deleted"
DELETED_COLUMN = "_cdc_remove"

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

METADATA_FIELDS = (
    StructField(OP_COLUMN, StringType(), nullable=False),
    StructField(SOURCE_TS_COLUMN, TimestampType(), nullable=True),
    StructField(ORDERING_COLUMN, StringType(), nullable=False),
    StructField(APPLIED_AT_COLUMN, TimestampType(), nullable=False),
    StructField(SOFT_DELETED_COLUMN, BooleanType(), nullable=False),
    StructField(DELETED_COLUMN, BooleanType(), nullable=False),
)
"""Columns every lake table carries besides the source's: what happened, when, and in which order.

``_cdc_deleted`` is true for rows kept after a delete (soft-delete tables); ``_cdc_remove`` tells the
format to remove the row in an upsert (hard-delete tables) and is never visible in the table.
"""


def source_time(ts_ms: int) -> dt.datetime:
    """A source commit time in epoch milliseconds as an exact UTC datetime."""
    return _EPOCH + dt.timedelta(milliseconds=ts_ms)


def lake_struct(row_type: StructType) -> StructType:
    """The lake table's schema: the source row's columns followed by the metadata columns."""
    return StructType([*row_type.fields, *METADATA_FIELDS])
