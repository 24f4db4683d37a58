"""Step 5: writing snapshot rows with Hudi ``bulk_insert``, one commit per group of plan partitions.

The table is created by the first commit, in a base path no other writer has used, with the same spec
as the applier's (record key, ordering field, partitioning, table type, index), so the applier's first
upsert finds a table it could have created itself.

Resuming is exact because the lake says what it holds: every commit's metadata names the bootstrap
attempt (the watermark's creation time) and the plan partitions it contains, besides the watermark
offsets the applier starts from and the id of their topic (so its first batch refuses a topic created
again since).  The state store marks partitions done after each commit; a bootstrap
killed between a commit and those marks finds the partitions in the latest commit and does not write
them twice.  A commit killed half-way never completes: Hudi rolls it back on the next write and its
partitions are read again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame

from cdc_lake.exceptions import BootstrapError, LakeWriteError
from cdc_lake.lake.checkpoint import Checkpoint, Origin
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.format import LakeFormat, WriteOperation
from cdc_lake.lake.layout import TableSpec
from cdc_lake.spark.errors import JVM_ERRORS, root_cause
from cdc_lake.state.records import Watermark


def attempt_id(watermark: Watermark) -> str:
    """The identity of one bootstrap attempt: when its watermark was saved."""
    return watermark.created_at.isoformat()


def group_metadata(watermark: Watermark, partitions: list[int], lengths: Mapping[str, int]) -> CommitMetadata:
    """The metadata of one bootstrap commit: the watermark checkpoint, the attempt and its partitions,
    and the character lengths of the registered schema the copy was aligned with."""
    checkpoint = Checkpoint(
        watermark.topic,
        dict(watermark.offsets),
        watermark.ts_source_ms,
        Origin.WATERMARK,
        topic_id=watermark.topic_id,
    )
    return replace(
        checkpoint.metadata(),
        bootstrap_attempt=attempt_id(watermark),
        bootstrap_partitions=frozenset(partitions),
        char_lengths=dict(lengths),
    )


@dataclass(frozen=True)
class LakeState:
    """What the lake holds of a bootstrap attempt: whether the table exists and which partitions it has."""

    exists: bool
    committed: frozenset[int]


def _exists(lake: LakeFormat, base_path: str) -> bool:
    try:
        return lake.table_exists(base_path)
    except JVM_ERRORS as exc:
        raise LakeWriteError(f"reading lake path {base_path} failed: {root_cause(exc)}") from exc


def check_fresh(lake: LakeFormat, base_path: str, table: str) -> None:
    """Refuse to start a bootstrap into a base path that already holds a table of the lake's format."""
    if _exists(lake, base_path):
        raise BootstrapError(
            f"table {table}: lake path {base_path} already holds a lake table; a bootstrap writes into a "
            "fresh base path (remove it, or re-bootstrap the table)"
        )


def lake_state(lake: LakeFormat, base_path: str, table: str, watermark: Watermark) -> LakeState:
    """The partitions of ``watermark``'s attempt the lake holds; any other writer's commit is an error."""
    if not _exists(lake, base_path):
        return LakeState(False, frozenset())
    commit = lake.latest_commit(base_path)
    if commit is None:
        return LakeState(True, frozenset())
    stored = CommitMetadata.from_dict(commit.metadata)
    if stored.bootstrap_attempt != attempt_id(watermark):
        raise BootstrapError(
            f"table {table}: lake path {base_path} has commit {commit.instant} ({commit.operation}) that "
            "this bootstrap did not write; remove the path or re-bootstrap the table"
        )
    return LakeState(True, stored.bootstrap_partitions)


def write_group(
    lake: LakeFormat,
    spec: TableSpec,
    rows: DataFrame,
    watermark: Watermark,
    partitions: list[int],
    lengths: Mapping[str, int],
) -> str:
    """Bulk-insert ``rows`` (the lake rows of ``partitions``) as one commit; returns its instant."""
    metadata = group_metadata(watermark, partitions, lengths)
    return lake.write(spec, rows, WriteOperation.BULK_INSERT, metadata)
