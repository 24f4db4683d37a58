"""From decoded change events to lake rows: metadata columns, deletes, and the last change per key."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql.types import BooleanType, StringType, StructField, StructType, TimestampType

from cdc_lake.decode.envelope import ChangeEvent, Tombstone
from cdc_lake.decode.types import UNAVAILABLE
from cdc_lake.exceptions import DecodeError

OP_COLUMN = "_cdc_op"
SOURCE_TS_COLUMN = "_cdc_source_ts"
ORDERING_COLUMN = "_cdc_ordering"
APPLIED_AT_COLUMN = "_cdc_applied_at"
SOFT_DELETED_COLUMN = "_cdc_deleted"
DELETED_COLUMN = "_hoodie_is_deleted"

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

``_cdc_deleted`` is true for rows kept after a delete (soft-delete tables); ``_hoodie_is_deleted``
tells Hudi to remove the row (hard-delete tables) and is never visible in the table.
"""


def source_time(ts_ms: int) -> dt.datetime:
    """A source commit time in epoch milliseconds as an exact UTC datetime."""
    return _EPOCH + dt.timedelta(milliseconds=ts_ms)


def lake_struct(row_type: StructType) -> StructType:
    """The lake table's schema: the source row's columns followed by the metadata columns."""
    return StructType([*row_type.fields, *METADATA_FIELDS])


def lake_row(event: ChangeEvent, applied_at: dt.datetime, soft_deletes: bool = False) -> dict[str, Any]:
    """One lake row for `event`: its row image plus metadata; deletes keep the `before` image, flagged.

    A delete is flagged for Hudi to remove the row, or with `soft_deletes` kept with `_cdc_deleted` set.

    Raises DecodeError when the image still holds an unavailable (TOAST) placeholder: such a
    column must be filled from the stored row before writing, never written as the placeholder.
    """
    image = event.row
    if image is None:
        raise DecodeError(f"{event.ref}: {event.op!r} event has no row image")
    missing = sorted(name for name, value in image.items() if value is UNAVAILABLE)
    if missing:
        raise DecodeError(
            f"{event.ref}: columns {missing} are unavailable (unchanged TOAST) and must be merged "
            "with the stored row"
        )
    return {
        **image,
        OP_COLUMN: event.op,
        SOURCE_TS_COLUMN: source_time(event.source.ts_ms),
        ORDERING_COLUMN: event.ordering_value,
        APPLIED_AT_COLUMN: applied_at,
        SOFT_DELETED_COLUMN: soft_deletes and event.is_delete,
        DELETED_COLUMN: event.is_delete and not soft_deletes,
    }


def record_key(event: ChangeEvent, key_fields: Sequence[str]) -> tuple[Any, ...]:
    """The record key of the row `event` changes."""
    image = event.row or {}
    try:
        return tuple(image[name] for name in key_fields)
    except KeyError as exc:
        raise DecodeError(f"{event.ref}: key column {exc.args[0]!r} is missing from the row image") from exc


def latest_per_key(
    messages: Iterable[ChangeEvent | Tombstone], key_fields: Sequence[str]
) -> list[ChangeEvent]:
    """The last change of each key among `messages`, in (partition, offset) order.

    Ties cannot happen within one partition; Debezium routes a key to one partition, so a key's
    changes are totally ordered by offset.  Tombstones only follow deletes and carry nothing more.
    """
    latest: dict[tuple[Any, ...], ChangeEvent] = {}
    for message in sorted(messages, key=lambda m: (m.ref.partition, m.ref.offset)):
        if isinstance(message, Tombstone) or message.is_truncate:
            continue
        latest[record_key(message, key_fields)] = message
    return list(latest.values())
