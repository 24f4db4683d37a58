"""Repairing chosen keys of a lake table in one batch of the applier, exact at the source's read point.

``cdc-lake repair`` (:mod:`cdc_lake_bootstrap.repair`) reads the rows of the keys to repair from the
read replica while it holds the table's apply lock, so the lake stays at its checkpoint ``C`` (the Kafka
offsets its last commit applied).  The read is at or after the primary's position when the lock was
taken, so it reflects every change below ``C``; it ends at the *read point* ``S`` (the position the
replica had replayed by then).  The repair waits until Debezium has committed its source offset past
``S`` (as the bootstrap's hand-off does), so the topic's end offsets ``E`` read after that hold every
change up to ``S``.  Then it applies one batch from ``C`` to ``E``, not capped by
``apply.batch_max_events``, in which the rows read enter as snapshot records (:func:`snapshot_changes`:
the snapshot ordering value, placed before every change of the batch).

Why that is exact (the bootstrap hand-off's argument, docs/design-notes.md, per repaired key ``k``):

- ``k`` has no change in ``(C, E]``: its source row did not change between the lake's checkpoint and the
  read, and the read row is its state at ``E``; the batch writes it.
- ``k`` has changes in ``(C, E]``: the batch's last change of ``k`` is its state at ``E`` (a full row
  image); an unchanged TOASTed column it lacks comes from ``k``'s earlier change in the batch that
  carries it, else from the read row, which holds the column's value since before ``C``.
- ``k`` absent at the source and unchanged in ``(C, E]``: the lake's row is removed.

Every repaired key then holds its state at ``E`` in one commit: readers see the diverged row, then the
right one, never a state older than the read (the rows are not written first and then replayed over).
A change after ``E`` has a higher ordering value than any change before it of the same key (Postgres: the
key's change LSNs grow under its row lock; binlog sources: Kafka offsets), so it wins over the repaired
row; a re-send of a change below ``E`` is skipped by the re-send marks (:mod:`cdc_lake.apply.redelivery`)
or, at the mark, shows the state it showed.

A diverged lake row can carry an ordering value higher than the batch's row for its key (a row written
from a transaction the source no longer has, after a failover; a row written behind the pipeline's
back): Hudi's event-time merge would keep it.  Such rows, and the rows of keys the source no longer
holds, are removed first, in a commit of their own that keeps the checkpoint (:func:`must_remove` decides,
:func:`removal_frame` selects them).  Between the two commits the removed keys are absent; a repair that
stops there must be finished before the table is applied again, or the replay from ``C`` would leave them
absent or rebuild them without their unchanged TOASTed values: the runner stops the table FAILED with
:func:`interrupted_repair` before the removal, naming ``cdc-lake repair TABLE --resume``, and restores its
state after the batch's commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdc_lake.apply.decoding import DecodedChange
from cdc_lake.apply.frame import col, key_identity
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE
from cdc_lake.lake.applier import INTERRUPTED_REPAIR, RepairRows
from cdc_lake.lake.columns import ORDERING_COLUMN, SOFT_DELETED_COLUMN
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.format import LakeFormat, Unread, WriteOperation
from cdc_lake.lake.layout import TableSpec

_LOG = logging.getLogger(__name__)

REPAIR_READ_OFFSET = -1
"""The Kafka offset the rows read take in the batch: below every message, so they are placed first."""

_KEY = "_cdc_repair_key"
_STORED = "_cdc_repair_stored"
_LIVE = "_cdc_repair_live"
_FINAL = "_cdc_repair_final"


def snapshot_changes(rows: Sequence[Mapping[str, Any]], partition: int, read_ms: int) -> list[DecodedChange]:
    """The rows read, as snapshot records of the batch: ordering value below every change, Kafka offset
    below every message of ``partition``, so each key's changes in the batch come after its row and win
    (:func:`cdc_lake.apply.last_change.last_changes`, :func:`cdc_lake.apply.frame.placed`)."""
    return [
        DecodedChange(
            partition, REPAIR_READ_OFFSET, "r", 0, None, SNAPSHOT_ORDERING_VALUE, read_ms, dict(row), (), None
        )
        for row in rows
    ]


def must_remove(stored_ordering: str | None, stored_live: bool, final_ordering: str | None) -> bool:
    """Whether a repaired key's lake row must be removed before the batch writes the key.

    ``final_ordering`` is the ordering value of the batch's row for the key (None: the batch writes no
    row, the source does not hold the key); the stored row is live unless soft-deleted.  A live row of a
    key the source does not hold goes; a row the batch's row would lose to (a higher ordering value, which
    Hudi's event-time merge keeps) goes; on equal values Hudi takes the incoming row.
    """
    if final_ordering is None:
        return stored_live
    return stored_ordering is not None and stored_ordering > final_ordering


def removal_frame(
    spark: SparkSession,
    stored: DataFrame,
    batch: DataFrame,
    repair: RepairRows,
    lake_format: str,
) -> DataFrame | None:
    """The stored rows of the repaired keys that :func:`must_remove` removes before ``batch`` (the rows
    the batch writes) is written, or None when there are none.  Keys are matched by their identity in
    ``lake_format``'s record key; only the repaired keys' rows reach the driver."""
    key_fields = repair.key_fields
    key_type = StructType([stored.schema[name] for name in key_fields])
    wanted = spark.createDataFrame([tuple(k) for k in repair.keys], key_type)
    identity = key_identity(key_type, key_fields, lake_format)
    wanted_keys = wanted.select(identity.alias(_KEY)).distinct()
    soft = SOFT_DELETED_COLUMN in stored.columns
    live = ~F.coalesce(col(SOFT_DELETED_COLUMN), F.lit(False)) if soft else F.lit(True)
    held = stored.select(
        key_identity(stored.schema, key_fields, lake_format).alias(_KEY),
        col(ORDERING_COLUMN).alias(_STORED),
        live.alias(_LIVE),
    ).join(wanted_keys, [_KEY], "left_semi")
    written = batch.select(
        key_identity(batch.schema, key_fields, lake_format).alias(_KEY), col(ORDERING_COLUMN).alias(_FINAL)
    ).join(wanted_keys, [_KEY], "left_semi")
    pairs = held.join(written, [_KEY], "left").collect()
    chosen: list[Hashable] = [
        row[_KEY] for row in pairs if must_remove(row[_STORED], bool(row[_LIVE]), row[_FINAL])
    ]
    if not chosen:
        return None
    key_schema = held.schema[_KEY]
    removed = spark.createDataFrame([(k,) for k in chosen], StructType([key_schema]))
    own = key_identity(stored.schema, key_fields, lake_format)
    return stored.join(removed, own == col(_KEY), "left_semi")


Repairing = tuple[RepairRows, Callable[[int], object]]
"""A repair's rows read, and what runs before its removal commit with the count of rows it removes."""


def remove_first(
    lake: LakeFormat,
    spec: TableSpec,
    stored: DataFrame,
    batch: DataFrame,
    repair: Repairing,
    kept: CommitMetadata,
    previous: str | Unread | None,
    before_commit: Callable[[], None] | None,
    lake_format: str,
) -> bool:
    """Remove the stored rows ``batch`` cannot replace (:func:`removal_frame`) as one DELETE commit storing
    ``kept`` (the checkpoint's offsets and re-send marks, unchanged); whether there were any.  The repair's
    hook runs before, with their count; ``before_commit`` after (the batch's commit comes next)."""
    rows, before_removal = repair
    removal = removal_frame(lake.spark, stored, batch, rows, lake_format)
    if removal is None:
        return False
    removal = removal.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        count = removal.count()
        before_removal(count)
        instant = lake.write(spec, removal, WriteOperation.DELETE, kept, previous=previous)
    finally:
        removal.unpersist()
    _LOG.warning(
        "%s: repair removed %d lake row(s) its batch could not replace, commit %s", spec.name, count, instant
    )
    if before_commit is not None:
        before_commit()
    return True


def interrupted_repair(table: str, repair: RepairRows) -> str:
    """The FAILED error of a table whose repair removed lake rows and has not written its batch yet: the
    way out is to resume it."""
    keys, point = len(repair.keys), repair.point
    return (
        f"{INTERRUPTED_REPAIR} after it removed lake rows of the {keys} key(s) it repairs (read at {point}): "
        f"the table is not applied until it is finished; run cdc-lake repair {table} --resume"
    )
