"""The layout settings a lake table is created with (table type, index, compaction, table version) and
:class:`TableSpec`, one table as a format writes it.

The settings are the config's ``lake.table_type``, ``lake.index``, ``lake.compaction`` and
``lake.table_version`` (docs/hudi.md), carried by every :class:`~cdc_lake.lake.target.TableTarget`; the
format turns a spec into its writer options.  Nothing here imports the config or a format, so both
can name these types.

A table keeps the :class:`TableLayout` (table type, index, and the bucket index's bucket count) it was
created with: every commit records its layout (:class:`~cdc_lake.lake.commit_metadata.CommitMetadata`),
and the applier writes an existing table in its recorded layout whatever the config says now
(:func:`kept_layout`).  Another index would not find the stored rows (a bucket index looks a key up only
in its hash bucket, a global index in files a bucket index never wrote), nor would another bucket count
(a key hashes to another bucket): the table would gain a second row per key.  Hudi itself keeps no bucket
count with the table (apache/hudi#13241).  The config's layout applies to new copies, so a layout change
is ``cdc-lake rebootstrap TABLE``.

A bucket-index table's count is sized when a bootstrap creates it (:func:`sized_for_rows`: one bucket
per ``lake.rows_per_bucket`` estimated rows, at least :data:`DEFAULT_BUCKETS`).  Each bucket is one file
group: a random-key commit appends to every bucket, and a compaction rewrites a file group in one task,
so the count trades a commit's cost against how long a commit waits behind a compaction task (docs/hudi.md,
"Bucket count": at 10M rows 4 buckets beat 41 by 2.2x in freshness p99).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

TABLE_VERSIONS = (6, 8, 9)
"""Hudi table versions Hudi 1.1 can write (``hoodie.write.table.version``); 9 is its own."""

DEFAULT_TABLE_VERSION = 6

DEFAULT_BUCKETS = 4
"""The bucket count of a bucket-index table created without a row estimate (by the applier's first
write), the fewest a bootstrap sizes, and the count of a table whose commits record none (created before
the count was recorded, 2026-12-05: they were all written with 4)."""

MAX_BUCKETS = 1024
"""The most buckets a bootstrap sizes a table with."""


class TableType(StrEnum):
    """Hudi table types: rewrite base files on update, or append logs and compact later."""

    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"


class IndexType(StrEnum):
    """How the writer finds the file group holding an incoming key.

    The global kinds (GLOBAL_BLOOM, GLOBAL_SIMPLE, RECORD_INDEX) enforce key
    uniqueness across partitions and move a row whose partition value changes;
    BLOOM, SIMPLE and BUCKET look a key up only in the partition its incoming row
    names, so they suit only unpartitioned tables (the config refuses them with
    ``partition_by``: a delete image without the partition value, or an update
    that changes it, would miss the stored row).
    """

    GLOBAL_BLOOM = "GLOBAL_BLOOM"
    RECORD_INDEX = "RECORD_INDEX"
    GLOBAL_SIMPLE = "GLOBAL_SIMPLE"
    BLOOM = "BLOOM"
    SIMPLE = "SIMPLE"
    BUCKET = "BUCKET"

    @property
    def is_global(self) -> bool:
        """Whether the index finds a key in any partition (and moves a row whose partition changes)."""
        return self in (IndexType.GLOBAL_BLOOM, IndexType.GLOBAL_SIMPLE, IndexType.RECORD_INDEX)


class CompactionExecutor(StrEnum):
    """Who executes a table's compaction plans when its writes only schedule them.

    ``run``: ``cdc-lake run``'s table-service thread, in the writer's Spark application (and any
    ``cdc-lake compact``).  ``job``: only ``cdc-lake compact`` (``--every`` to keep looking), a process of
    its own beside ``run``: on a cluster its own executors, on a shared machine a lower CPU priority
    (``nice``), so a compaction never takes the writer's cores; ``run`` then only records the backlog."""

    RUN = "run"
    JOB = "job"


@dataclass(frozen=True)
class CompactionSpec:
    """MERGE_ON_READ compaction, planned after ``max_delta_commits`` delta commits (or ``max_delta_seconds``
    since the last compaction, whichever comes first).

    ``inline``: the writer also executes each plan inside its commit.  Otherwise the writer only schedules
    it, and a table service outside the write executes it (``cdc-lake run``'s table-service thread, or
    ``cdc-lake compact`` as a job; :mod:`cdc_lake.apply.table_services`), which also plans the next one
    itself when the oldest change no base file holds has waited ``max_delta_seconds`` (a table whose
    writes stopped plans nothing).

    ``plan_io_mb``: a plan's budget, file groups with the most log data first until their reads and
    writes reach it (at least one file group; one under 1 MB counts as none); None: every file group with
    logs.  A compaction rewrites a file group in one task, so the budget bounds how many cores a
    compaction holds while the writer waits for one (docs/hudi.md, "Table services").

    ``executor``: who executes the plans the writer schedules (:class:`CompactionExecutor`).
    """

    inline: bool = True
    max_delta_commits: int = 5
    max_delta_seconds: int | None = None
    plan_io_mb: int | None = None
    executor: CompactionExecutor = CompactionExecutor.RUN


@dataclass(frozen=True)
class TableSpec:
    """One lake table as a format writes it: name, path, key, partitioning and layout settings.

    ``TableTarget.spec`` builds it for a key; the format derives its own writer settings from it (the
    ordering field is the lake contract's ``_cdc_ordering``).  ``name`` is the format's table name,
    ``options`` the passed-through format options (global, then the table's), ``parallelism`` the
    write's parallelism (None: the format's default).
    """

    name: str
    base_path: str
    key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    table_type: TableType = TableType.COPY_ON_WRITE
    index: IndexType = IndexType.GLOBAL_BLOOM
    compaction: CompactionSpec = field(default_factory=CompactionSpec)
    table_version: int = DEFAULT_TABLE_VERSION
    options: tuple[tuple[str, str], ...] = ()
    parallelism: int | None = None
    buckets: int = DEFAULT_BUCKETS
    """The bucket index's bucket count (other indexes have none)."""

    @property
    def layout(self) -> TableLayout:
        """The layout this spec writes."""
        buckets = self.buckets if self.index is IndexType.BUCKET else None
        return TableLayout(self.table_type, self.index, buckets)


@dataclass(frozen=True)
class TableLayout:
    """What a table keeps from its creation on: its table type, index and (bucket index) bucket count;
    ``buckets`` None on a bucket-index table: recorded before the count was, :data:`DEFAULT_BUCKETS`."""

    table_type: TableType
    index: IndexType
    buckets: int | None = None

    def __str__(self) -> str:
        buckets = "" if self.buckets is None else f" ({self.buckets} buckets)"
        return f"{self.table_type.value} + {self.index.value}{buckets}"

    def same_kind(self, other: TableLayout) -> bool:
        """Whether ``other`` has this table type and index (a bucket count is sized per table)."""
        return (self.table_type, self.index) == (other.table_type, other.index)


def kept_layout(spec: TableSpec, recorded: TableLayout | None) -> TableSpec:
    """``spec`` in the layout its table records (None: the table records none, ``spec`` as it is)."""
    if recorded is None:
        return spec
    buckets = DEFAULT_BUCKETS if recorded.buckets is None else recorded.buckets
    return replace(spec, table_type=recorded.table_type, index=recorded.index, buckets=buckets)


def sized_for_rows(spec: TableSpec, rows: int, rows_per_bucket: int) -> TableSpec:
    """``spec`` as a bootstrap creates its table for about ``rows`` rows: a bucket-index table gets one
    bucket per ``rows_per_bucket`` rows, between :data:`DEFAULT_BUCKETS` and :data:`MAX_BUCKETS`."""
    if spec.index is not IndexType.BUCKET:
        return spec
    wanted = math.ceil(max(rows, 0) / rows_per_bucket)
    return replace(spec, buckets=min(MAX_BUCKETS, max(DEFAULT_BUCKETS, wanted)))
