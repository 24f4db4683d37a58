"""The lake tables: where and how they are written (format, layout, object store, compaction) and the
catalogs they are registered in."""

from __future__ import annotations

import posixpath
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from cdc_lake.config.paths import DEFAULT_STATE_DIR
from cdc_lake.sources.settings import ConfigModel as _Model
from cdc_lake.sources.settings import FormatOptions, IndexName, Secret, Table, TableTypeName


class S3Settings(_Model):
    """Object store credentials and endpoint for an ``s3a://`` lake."""

    endpoint: str | None = None
    region: str | None = None
    access_key: Secret | None = None
    secret_key: Secret | None = None
    path_style_access: bool = True


class CompactionSettings(_Model):
    """MERGE_ON_READ compaction (docs/hudi.md#table-services): planned after ``max_delta_commits`` delta
    commits or ``max_delta_seconds`` since the last compaction; executed inside the writer's commit
    (``inline``) or, with ``inline: false``, by ``cdc-lake run``'s table-service thread every
    ``check_seconds`` and by ``cdc-lake compact``.  ``max_staleness_seconds`` bounds how old the newest
    data a read-optimized reader (Trino) misses may get before ``CdcLakeCompactionBehind`` fires."""

    inline: bool = True
    max_delta_commits: int = Field(default=5, ge=1)
    max_delta_seconds: int | None = Field(default=None, ge=1)
    check_seconds: float = Field(default=10.0, gt=0)
    max_staleness_seconds: float = Field(default=300.0, gt=0)
    plan_io_mb: int | None = Field(default=None, ge=1)
    """A plan's IO budget in MB, file groups with the most log data first (at least one); None: every
    file group with logs (:class:`cdc_lake.lake.layout.CompactionSpec`)."""
    executor: Literal["run", "job"] = "run"
    """Who executes the plans of ``inline: false``: ``run``'s table-service thread, or only a separate
    ``cdc-lake compact --every`` job (:class:`cdc_lake.lake.layout.CompactionExecutor`)."""

    @model_validator(mode="after")
    def _a_job_executes_only_plans_the_writer_leaves(self) -> CompactionSettings:
        if self.executor == "job" and self.inline:
            raise PydanticCustomError(
                "executor_needs_async",
                "executor: job needs inline: false (an inline compaction runs inside the writer's commit)",
                {},
            )
        return self


class TierLayout(_Model):
    """The layout a tier's new unpartitioned tables are created with, unless a table names its own
    ``table_type`` or ``index`` (docs/hudi.md, "Choosing a layout")."""

    table_type: TableTypeName
    index: IndexName
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    """How this layout's MERGE_ON_READ tables are compacted (instead of ``lake.compaction``)."""

    @model_validator(mode="after")
    def _compaction_needs_mor(self) -> TierLayout:
        if "compaction" in self.model_fields_set and self.table_type != "MERGE_ON_READ":
            raise PydanticCustomError(
                "compaction_needs_mor",
                "compaction applies only to MERGE_ON_READ tables, and this layout's table_type is "
                "{table_type}",
                {"table_type": self.table_type},
            )
        return self


TIER0_LAYOUT = TierLayout(
    table_type="MERGE_ON_READ",
    index="BUCKET",
    compaction=CompactionSettings(
        inline=False, max_delta_commits=5, max_delta_seconds=120, check_seconds=5, plan_io_mb=1
    ),
)
"""Tier 0's default: the layout whose commit costs the batch, not the table, with compaction outside the
writes, a plan at least every 120 s, and plans of one file group each once a file group holds more than
1 MB, so a compaction holds one core (docs/benchmarks.md, "Issue 35": the growth curve, and "Goal 1:
plans of one file group")."""


def _default_tier_layouts() -> dict[int, TierLayout]:
    return {0: TIER0_LAYOUT}


def _default_format() -> str:
    from cdc_lake.lake.format import DEFAULT_FORMAT

    return DEFAULT_FORMAT


class LakeSettings(_Model):
    """Where and how lake tables are written, and in which format."""

    format: str = Field(default_factory=_default_format)
    """The table format (a name :data:`cdc_lake.lake.format.FORMATS` knows) every table is written in."""
    base_path: str = f"{DEFAULT_STATE_DIR}/lake"
    table_type: TableTypeName = "COPY_ON_WRITE"
    index: IndexName = "GLOBAL_BLOOM"
    soft_deletes: bool = False
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    s3: S3Settings | None = None
    # Hudi table version written (docs/hudi.md#table-version): 6 is read by Spark, hudi-rs and Trino 476.
    table_version: Literal[6, 8, 9] = 6
    format_options: FormatOptions = Field(default_factory=dict)
    """The format's options for every table; a table's own ``format_options`` win over these."""
    old_copy_keep_hours: float = Field(default=24.0, ge=0)
    """How long a re-bootstrapped table's previous base path is kept before
    ``cdc-lake rebootstrap --remove-old`` removes it (readers that resolved it before the switch)."""
    rows_per_bucket: int = Field(default=2_500_000, gt=0)
    """A bucket-index table a bootstrap creates gets one bucket per this many estimated rows (at least 4,
    at most 1024); the table keeps its count (a change is a ``rebootstrap``).  Fewer, larger buckets make
    each commit cheaper (a random-key batch appends to every bucket) and each compaction task longer:
    at 10M rows 4 buckets gave p99 83.5 s at 500 changes/s, 41 buckets 187.3 s (docs/benchmarks.md)."""
    tier_layouts: dict[Annotated[int, Field(ge=0)], TierLayout] = Field(default_factory=_default_tier_layouts)
    """Per tier, the layout its new unpartitioned tables get instead of ``table_type``, ``index`` and
    ``compaction``; given, it replaces the default (tier 0: :data:`TIER0_LAYOUT`); ``{}``: none.  A
    config that sets ``table_type`` or ``index`` and not this has none: its layout is every tier's."""

    @model_validator(mode="after")
    def _a_lake_layout_set_applies_to_every_tier(self) -> LakeSettings:
        # A config naming the lake's layout (written before the tier-0 default, or meaning it for every
        # table) keeps it for tier 0 too, unless it lists tier_layouts as well.
        named = {"table_type", "index"} & self.model_fields_set
        if named and "tier_layouts" not in self.model_fields_set:
            self.tier_layouts = {}
        return self

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        from cdc_lake.lake.format import unknown_format

        # The error's location names the setting already.
        problem = unknown_format(value)
        if problem is not None:
            raise PydanticCustomError("lake_format", "{reason}", {"reason": problem})
        return value

    def layout_of(self, table: Table) -> TierLayout:
        """The layout a new copy of ``table`` is created with: the table's own ``table_type`` and ``index``
        (the other of the two from the lake's) if it names either; else its tier's in ``tier_layouts`` if
        it is unpartitioned; else the lake's."""
        if table.table_type is None and table.index is None and not table.partition_by:
            tiered = self.tier_layouts.get(table.tier)
            if tiered is not None:
                return tiered
        # Built from settings validated already (and a COPY_ON_WRITE table ignores the lake's compaction).
        return TierLayout.model_construct(
            table_type=table.table_type or self.table_type,
            index=table.index or self.index,
            compaction=self.compaction,
        )

    def compaction_of_tier(self, tier: int) -> CompactionSettings:
        """The compaction settings of ``tier``'s tables (its tier layout's, else ``compaction``)."""
        tiered = self.tier_layouts.get(tier)
        return tiered.compaction if tiered is not None else self.compaction

    @property
    def check_seconds(self) -> float:
        """How often ``run``'s table-service thread looks: the shortest of every compaction setting's."""
        tiered = (layout.compaction.check_seconds for layout in self.tier_layouts.values())
        return min([self.compaction.check_seconds, *tiered])

    def table_base_path(self, qualified_name: str) -> str:
        """The Hudi base path of a table named ``source.schema.table``: one directory level per part."""
        return "/".join([self.base_path.rstrip("/"), *qualified_name.split(".")])

    def holds(self, path: str) -> bool:
        """Whether ``path`` lies strictly below ``base_path``: same scheme and bucket, ``..`` resolved."""
        base, inner = urlsplit(self.base_path), urlsplit(path)
        if (base.scheme, base.netloc) != (inner.scheme, inner.netloc):
            return False
        root = posixpath.normpath(base.path or "/").rstrip("/")
        return posixpath.normpath(inner.path or "/").startswith(f"{root}/")


class GlueSettings(_Model):
    """An AWS Glue Data Catalog database the lake tables are registered in (credentials: boto3's chain)."""

    database: str
    region: str = "us-east-1"
    endpoint_url: str | None = None
    """A Glue-compatible endpoint (the local stack's ``http://127.0.0.1:17080``); AWS when unset."""


class HiveMetastoreSettings(_Model):
    """A Hive Metastore database the lake tables are registered in (through Spark's JVM)."""

    uri: str
    """The metastore's thrift URI, e.g. the local stack's ``thrift://127.0.0.1:19083``."""
    database: str


class CatalogSettings(_Model):
    """Where tables are registered after publish, schema changes and re-bootstrap switches."""

    glue: GlueSettings | None = None
    hive: HiveMetastoreSettings | None = None
