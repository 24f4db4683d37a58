"""What a cdc-lake Hudi table is (:class:`HudiTableSpec`) and the writer options derived from it.

The options target Hudi 1.1, writing table version 9 unless the spec asks for 8 or 6
(``hoodie.write.table.version``, see ``docs/hudi.md``).  Choices that are fixed when a
table is created (key generator, ordering field, merge mode, index family)
come only from the spec, so every write of a table sends the same values.

Users pass other ``hoodie.*`` options through (``lake.format_options`` and a table's ``format_options``):
metrics reporters, lock providers, clustering, index tuning.  They are applied after the product's
options, except the :data:`PROTECTED_OPTIONS`, which decide correctness (key, ordering and merge
rules, table type and version, index family, the commit-metadata checkpoint): overriding one is a
:class:`ConfigError` naming the key and the setting to use instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cdc_lake.exceptions import ConfigError
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.layout import (
    DEFAULT_BUCKETS,
    DEFAULT_TABLE_VERSION,
    TABLE_VERSIONS,
    CompactionSpec,
    IndexType,
    TableType,
)

COMMIT_METADATA_PREFIX = "cdc_lake."
"""Writer options starting with this prefix are stored as extra metadata in the Hudi commit."""

DELETE_MARKER_COLUMN = "_hoodie_is_deleted"
"""Boolean column: rows where it is true are hard-deleted by an upsert (deletes and upserts in one commit);
the lake's delete marker (:data:`~cdc_lake.lake.columns.DELETED_COLUMN`) is written under this name."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_ORDERING = "the latest source position must win every merge (docs/applier.md)"
_LAYOUT = "the bootstrap, the applier and readers rely on one partition layout"
PROTECTED_OPTIONS: dict[str, str] = {
    "hoodie.table.name": "the Hudi table name comes from the source and table names",
    "hoodie.datasource.write.table.name": "the Hudi table name comes from the source and table names",
    "hoodie.datasource.write.table.type": "set lake.table_type or the table's table_type instead",
    "hoodie.table.type": "set lake.table_type or the table's table_type instead",
    "hoodie.datasource.write.operation": "cdc-lake chooses the operation of each write",
    "hoodie.datasource.write.recordkey.field": "set the table's key instead",
    "hoodie.table.recordkey.fields": "set the table's key instead",
    "hoodie.datasource.write.partitionpath.field": "set the table's partition_by instead",
    "hoodie.table.partition.fields": "set the table's partition_by instead",
    "hoodie.datasource.write.keygenerator.class": "the key generator follows key and partition_by",
    "hoodie.datasource.write.keygenerator.type": "the key generator follows key and partition_by",
    "hoodie.table.keygenerator.class": "the key generator follows key and partition_by",
    "hoodie.datasource.write.hive_style_partitioning": _LAYOUT,
    "hoodie.datasource.write.partitionpath.urlencode": _LAYOUT,
    "hoodie.datasource.write.precombine.field": _ORDERING,
    "hoodie.table.precombine.field": _ORDERING,
    "hoodie.table.ordering.fields": _ORDERING,
    "hoodie.record.merge.mode": _ORDERING,
    "hoodie.write.record.merge.mode": _ORDERING,
    "hoodie.record.merge.strategy.id": _ORDERING,
    "hoodie.write.record.merge.strategy.id": _ORDERING,
    "hoodie.datasource.write.record.merger.impls": _ORDERING,
    "hoodie.write.record.merge.custom.implementation.classes": _ORDERING,
    "hoodie.datasource.write.payload.class": _ORDERING,
    "hoodie.compaction.payload.class": _ORDERING,
    "hoodie.combine.before.upsert": _ORDERING,
    "hoodie.combine.before.delete": _ORDERING,
    "hoodie.combine.before.insert": _ORDERING,
    "hoodie.datasource.write.insert.drop.duplicates": _ORDERING,
    "hoodie.write.table.version": "set lake.table_version instead",
    "hoodie.table.version": "set lake.table_version instead",
    "hoodie.table.timeline.timezone": "freshness and the hand-off compare instant times in UTC",
    "hoodie.datasource.write.commitmeta.key.prefix": "applied Kafka offsets are stored in commit metadata",
    "hoodie.index.type": "set lake.index or the table's index instead",
    "hoodie.bloom.index.update.partition.path": "a global index must move a row whose partition changes",
    "hoodie.simple.index.update.partition.path": "a global index must move a row whose partition changes",
    "hoodie.record.index.update.partition.path": "a global index must move a row whose partition changes",
    "hoodie.metadata.global.record.level.index.enable": "set lake.index or the table's index instead",
    "hoodie.metadata.record.index.enable": "set lake.index or the table's index instead",
    "hoodie.metadata.enable": "the table's index decides it: the record index needs the metadata table",
    "hoodie.index.bucket.engine": "set lake.index or the table's index instead",
    "hoodie.bucket.index.num.buckets": "a bootstrap sizes it by lake.rows_per_bucket and the table keeps it",
    "hoodie.bucket.index.hash.field": "the bucket layout follows the table's key",
    "hoodie.compact.inline": "set lake.compaction.inline instead",
    "hoodie.compact.schedule.inline": "set lake.compaction.inline instead",
    "hoodie.compact.inline.max.delta.commits": "set lake.compaction.max_delta_commits instead",
    "hoodie.compact.inline.max.delta.seconds": "set lake.compaction.max_delta_seconds instead",
    "hoodie.compact.inline.trigger.strategy": "set lake.compaction.max_delta_seconds instead",
    "hoodie.compaction.target.io": "set lake.compaction.plan_io_mb instead",
    "hoodie.populate.meta.fields": "incremental reads, validation and hudi-rs need the meta fields",
    "hoodie.datasource.write.row.writer.enable": "the bootstrap's record keys must equal the applier's",
}
"""``hoodie.*`` options cdc-lake decides itself, with the reason a user cannot override them."""


def passthrough_option_problem(key: str) -> str | None:
    """Why ``key`` cannot be passed through (not ``hoodie.*``, or decided by cdc-lake), or None."""
    if not key.startswith("hoodie."):
        return f"'{key}' is not a Hudi option (only hoodie.* keys pass through)"
    reason = PROTECTED_OPTIONS.get(key)
    return None if reason is None else f"'{key}' cannot be overridden: {reason}"


@dataclass(frozen=True)
class HudiTableSpec:
    """Everything that identifies one Hudi table and how it is keyed, partitioned, ordered and indexed."""

    table_name: str
    base_path: str
    record_key_fields: tuple[str, ...]
    ordering_field: str
    partition_fields: tuple[str, ...] = ()
    table_type: TableType = TableType.COPY_ON_WRITE
    index: IndexType = IndexType.GLOBAL_BLOOM
    compaction: CompactionSpec = field(default_factory=CompactionSpec)
    parallelism: int = 4
    bucket_count: int = DEFAULT_BUCKETS
    table_version: int = DEFAULT_TABLE_VERSION
    extra_options: tuple[tuple[str, str], ...] = ()
    """Passed-through ``hoodie.*`` options (global, then the table's), applied after the product's."""

    def __post_init__(self) -> None:
        for key, _ in self.extra_options:
            problem = passthrough_option_problem(key)
            if problem is not None:
                raise ConfigError(f"table '{self.table_name}' format_options: {problem}")
        if not self.record_key_fields:
            raise ConfigError(f"table '{self.table_name}': a Hudi table needs at least one record key field")
        if not self.ordering_field:
            raise ConfigError(f"table '{self.table_name}': a Hudi table needs an ordering field")
        if not self.base_path:
            raise ConfigError(f"table '{self.table_name}': the lake base path is empty")
        if self.parallelism < 1:
            raise ConfigError(f"table '{self.table_name}': parallelism must be at least 1")
        if self.table_version not in TABLE_VERSIONS:
            raise ConfigError(
                f"table '{self.table_name}': Hudi table version {self.table_version} cannot be written; "
                f"choose one of {', '.join(map(str, TABLE_VERSIONS))}"
            )
        if self.compaction.max_delta_commits < 1:
            raise ConfigError(f"table '{self.table_name}': compaction max_delta_commits must be at least 1")

    @property
    def hudi_table_name(self) -> str:
        """The ``hoodie.table.name``: the spec name with non-word characters replaced by ``_``."""
        name = re.sub(r"\W", "_", self.table_name)
        return name if _IDENTIFIER.fullmatch(name) else f"t_{name}"


def _key_generator(spec: HudiTableSpec) -> str:
    if not spec.partition_fields:
        return "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if len(spec.record_key_fields) == 1 and len(spec.partition_fields) == 1:
        return "org.apache.hudi.keygen.SimpleKeyGenerator"
    return "org.apache.hudi.keygen.ComplexKeyGenerator"


def key_generator_options(spec: HudiTableSpec) -> dict[str, str]:
    """What a writer or a table service of ``spec``'s table needs for its key generator.

    The complex key generator with one key field: Hudi 1.1 refuses to write such a table unless told that
    no Hudi 0.14.1-1.0.2 wrote it (those wrote its record key as ``v``, others as ``f:v``: HUDI-7001).
    cdc-lake's tables are written by Hudi 1.1 only, bootstrap and applier alike as ``f:v``
    (tests/integration/test_hudi_record_key_types.py).
    """
    if len(spec.record_key_fields) == 1 and len(spec.partition_fields) > 1:
        return {"hoodie.write.complex.keygen.validation.enable": "false"}
    return {}


def index_options(spec: HudiTableSpec) -> dict[str, str]:
    """Index type plus the flags that make a global index move a row when its partition value changes."""
    match spec.index:
        case IndexType.GLOBAL_BLOOM:
            return {"hoodie.index.type": "GLOBAL_BLOOM", "hoodie.bloom.index.update.partition.path": "true"}
        case IndexType.GLOBAL_SIMPLE:
            return {"hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.simple.index.update.partition.path": "true"}
        case IndexType.RECORD_INDEX:
            # Hudi 1.1 name of the global record-level index (RECORD_INDEX is its deprecated alias).
            return {
                "hoodie.index.type": "GLOBAL_RECORD_LEVEL_INDEX",
                "hoodie.metadata.global.record.level.index.enable": "true",
                "hoodie.record.index.update.partition.path": "true",
            }
        case IndexType.BLOOM:
            return {"hoodie.index.type": "BLOOM"}
        case IndexType.SIMPLE:
            return {"hoodie.index.type": "SIMPLE"}
        case IndexType.BUCKET:
            return {
                "hoodie.index.type": "BUCKET",
                "hoodie.index.bucket.engine": "SIMPLE",
                "hoodie.bucket.index.num.buckets": str(spec.bucket_count),
                "hoodie.bucket.index.hash.field": ",".join(spec.record_key_fields),
                # Hudi checks the hash fields against the record key fields when it builds any write
                # client's config: a table service's client (run_compaction) without them failed with a
                # NullPointerException on every plan (benchmarks/freshness_bench.py, mor-bucket-async).
                "hoodie.datasource.write.recordkey.field": ",".join(spec.record_key_fields),
            }


def metadata_options(spec: HudiTableSpec) -> dict[str, str]:
    """Whether the table keeps Hudi's metadata table (its file listings, column statistics and the record
    index), which every write and table service of the table then updates in a commit of its own.

    A bucket-index table keeps none: its index is the bucket number in each file group's name, so a write
    looks nothing up, and the metadata table's commit (its ``files`` and ``column_stats`` partitions,
    compacted every tenth write) was half of a 2,000-row upsert into a 1M-row MERGE_ON_READ table
    (docs/benchmarks.md, "Goal 1: a bucket table without the metadata table").  Writers and readers list
    the table's folder instead (one listing per partition a write touches; the config gives the bucket
    index to unpartitioned tables only).  A bucket table written before keeps its metadata table until
    its next write, which deletes it (Hudi does so for a client that has it disabled).  Every other index
    keeps it: the record index lives in it, and it spares a global index's lookups the listing of every
    partition.
    """
    return {"hoodie.metadata.enable": "false" if spec.index is IndexType.BUCKET else "true"}


BASE_FILE_CODEC = "zstd"
"""The compression of every base file (Parquet) cdc-lake writes: bootstrap, applier and compaction."""


def storage_options(spec: HudiTableSpec) -> dict[str, str]:
    """How base files are encoded: in :data:`BASE_FILE_CODEC`, and without Hudi's key bloom filter in
    their footers where the index never reads it (the bucket index: the bucket is in the file group's
    name).

    Hudi 1.1 writes gzip and a bloom filter of every key by default.  Compacting a 2.5M-row file group
    of a bucket table took 12.05 s so, 9.76 s in zstd without the filter (medians of 4,
    ``benchmarks/commit_options_bench.py --compaction``), and its file was 24.9 MB against 13.6 MB
    (docs/benchmarks.md, "Goal 1: zstd base files without bloom filters").  Spark, hudi-rs and Trino
    read zstd.  Hudi's bulk-insert row writer writes the filter whatever the setting; compactions
    rewrite those files without it.  Every other index keeps the filter (a bloom index looks keys up in
    it).  Both are tunables: ``format_options`` override them.
    """
    options = {"hoodie.parquet.compression.codec": BASE_FILE_CODEC}
    if spec.index is IndexType.BUCKET:
        options["hoodie.parquet.bloom.filter.enabled"] = "false"
    return options


IN_PROCESS_LOCK_PROVIDER = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"
LOCK_PROVIDER_OPTION = "hoodie.write.lock.provider"
PLAN_IO_OPTION = "hoodie.compaction.target.io"


def compaction_options(spec: HudiTableSpec) -> dict[str, str]:
    """When a MERGE_ON_READ write plans compaction, and whether it also executes the plan.

    Inline: the writer schedules and executes a plan inside its commit.  Otherwise it only schedules
    (``hoodie.compact.schedule.inline``) and a table service executes the plan concurrently with later
    writes (:func:`cdc_lake.hudi.services.execute_compactions`); Hudi then takes a lock around the
    metadata table's updates, the in-process one unless the user's ``hoodie.write.lock.provider`` names a
    lock shared by processes.  A plan is due after ``max_delta_commits`` delta commits, or
    ``max_delta_seconds`` since the last compaction when that is set, whichever comes first.  With
    ``plan_io_mb`` a plan holds file groups, the most log data first (Hudi's default strategy), until
    their IO reaches it.
    """
    if spec.table_type is not TableType.MERGE_ON_READ:
        return {}
    compaction = spec.compaction
    options = {
        "hoodie.compact.inline": "true" if compaction.inline else "false",
        "hoodie.compact.schedule.inline": "false" if compaction.inline else "true",
        "hoodie.compact.inline.max.delta.commits": str(compaction.max_delta_commits),
    }
    if compaction.max_delta_seconds is not None:
        options["hoodie.compact.inline.trigger.strategy"] = "NUM_OR_TIME"
        options["hoodie.compact.inline.max.delta.seconds"] = str(compaction.max_delta_seconds)
    if compaction.plan_io_mb is not None:
        options[PLAN_IO_OPTION] = str(compaction.plan_io_mb)
    if not compaction.inline:
        options[LOCK_PROVIDER_OPTION] = IN_PROCESS_LOCK_PROVIDER
    return options


def table_service_options(spec: HudiTableSpec) -> dict[str, str]:
    """The options a table service's write client needs to leave the table as the writer keeps it.

    The metadata table's partitions follow the client's config: a client without the record index
    settings would drop the record index the writer reads (measured: the next upsert then fails with
    "Record index is not initialized in MDT"), so the service gets the writer's index, metadata, version
    and lock settings and the user's passed-through options.
    """
    options = {
        "hoodie.write.table.version": str(spec.table_version),
        "hoodie.table.timeline.timezone": "UTC",
        "hoodie.datasource.write.precombine.field": spec.ordering_field,
        "hoodie.table.ordering.fields": spec.ordering_field,
        "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
        "hoodie.write.record.merge.mode": "EVENT_TIME_ORDERING",
    }
    options.update(metadata_options(spec))
    options.update(key_generator_options(spec))
    options.update(index_options(spec))
    options.update(storage_options(spec))
    options.update(compaction_options(spec))
    options.update(spec.extra_options)
    return options


def commit_metadata_options(commit_metadata: dict[str, str]) -> dict[str, str]:
    """Writer options that Hudi copies into the commit's extra metadata (keys get the cdc-lake prefix)."""
    options = {"hoodie.datasource.write.commitmeta.key.prefix": COMMIT_METADATA_PREFIX}
    for key, value in commit_metadata.items():
        if not key or key.startswith(COMMIT_METADATA_PREFIX):
            raise ConfigError(f"commit metadata key '{key}' must be non-empty and unprefixed")
        options[f"{COMMIT_METADATA_PREFIX}{key}"] = value
    return options


def write_options(
    spec: HudiTableSpec,
    operation: WriteOperation,
    commit_metadata: dict[str, str] | None = None,
    *,
    unique_keys: bool = False,
    row_writer: bool = True,
) -> dict[str, str]:
    """All Hudi datasource options for one write of ``spec`` with ``operation``.

    ``row_writer``: a bulk insert may use Hudi's row writer, which builds record keys its own way; false
    when that way differs from the upsert's for the table's key (:mod:`cdc_lake.hudi.keys`).

    ``unique_keys``: the caller's rows hold each record key once by construction (the applier's last
    change per key, not joined with anything), so Hudi's own combine before an upsert, a shuffle that
    keeps the greatest ordering value per key, has nothing to do and is skipped.  Without it the
    combine stays on: a caller's duplicate keys must still resolve to the latest change.
    """
    parallelism = str(spec.parallelism)
    options = {
        "hoodie.table.name": spec.hudi_table_name,
        "hoodie.datasource.write.table.name": spec.hudi_table_name,
        "hoodie.datasource.write.table.type": spec.table_type.value,
        "hoodie.datasource.write.operation": operation.value,
        "hoodie.datasource.write.recordkey.field": ",".join(spec.record_key_fields),
        "hoodie.datasource.write.partitionpath.field": ",".join(spec.partition_fields),
        "hoodie.datasource.write.keygenerator.class": _key_generator(spec),
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.partitionpath.urlencode": "true",
        # Event-time merging: the larger ordering value wins regardless of commit order, so snapshot
        # rows (lowest ordering value) lose to every replayed change. Fixed at table creation.
        "hoodie.datasource.write.precombine.field": spec.ordering_field,
        "hoodie.table.ordering.fields": spec.ordering_field,
        "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
        "hoodie.write.record.merge.mode": "EVENT_TIME_ORDERING",
        "hoodie.combine.before.upsert": "false" if unique_keys else "true",
        "hoodie.combine.before.delete": "true",
        "hoodie.datasource.write.row.writer.enable": "true" if row_writer else "false",
        "hoodie.upsert.shuffle.parallelism": parallelism,
        "hoodie.insert.shuffle.parallelism": parallelism,
        "hoodie.delete.shuffle.parallelism": parallelism,
        "hoodie.bulkinsert.shuffle.parallelism": parallelism,
        "hoodie.write.table.version": str(spec.table_version),
        # Instant times are timestamps; UTC keeps them comparable across hosts and with freshness checks.
        "hoodie.table.timeline.timezone": "UTC",
    }
    options.update(metadata_options(spec))
    options.update(key_generator_options(spec))
    options.update(index_options(spec))
    options.update(storage_options(spec))
    options.update(compaction_options(spec))
    options.update(spec.extra_options)
    options.update(commit_metadata_options(commit_metadata or {}))
    return options
