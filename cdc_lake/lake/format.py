"""The lake format: what the writers and the operations ask of a table format, and which class a name loads.

:class:`LakeFormat` is the interface both writers (the bootstrap's bulk insert, the applier's upserts)
and the operations use for a table's data and commits: whether a table exists, a snapshot read, one
write (an operation and its :class:`~cdc_lake.lake.commit_metadata.CommitMetadata`) as one commit, the
latest data commit and the records a commit wrote, the record key fields the table was created with,
its table services when they run outside the writes (plans, their backlog), and removing a table.

:class:`FormatFacts` is what a format declares once, importable without Spark, for the code around the
writers: the jars and session settings Spark needs, the columns the format adds to every table, how a
metastore and Trino describe its tables, which pass-through options it takes, which keys it cannot
tell apart and which keys its record key takes as one.  :data:`FORMATS` maps each ``lake.format`` name
to the module holding its facts (``FACTS``), imported only when asked (:func:`format_facts`); the facts
name the :class:`LakeFormat` class, imported only when the format is loaded (:func:`load_format`).  A
new format is its package plus one line there.
Hudi (``cdc_lake/hudi``) is the only one.
"""

from __future__ import annotations

import enum
import importlib
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from cdc_lake.exceptions import ConfigError
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.layout import kept_layout

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from cdc_lake.lake.layout import TableSpec

DEFAULT_FORMAT = "hudi"
FORMATS: dict[str, str] = {
    DEFAULT_FORMAT: "cdc_lake.hudi.facts",
}
"""``lake.format`` name -> the module whose ``FACTS`` (a :class:`FormatFacts`) declare the format."""


class WriteOperation(StrEnum):
    """The write operations the product uses.

    UPSERT merges by event-time ordering: an incoming row (or delete flagged in the delete marker
    column) replaces the stored one only if its ordering value is higher.  DELETE removes the given keys
    whatever their ordering value.  BULK_INSERT writes without looking keys up: for the snapshot into a
    new table.
    """

    UPSERT = "upsert"
    DELETE = "delete"
    BULK_INSERT = "bulk_insert"


@dataclass(frozen=True)
class CommitInfo:
    """A completed write commit and the cdc-lake metadata stored in it (without a format's prefix)."""

    instant: str
    action: str
    completion_time: str | None
    operation: str
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServiceBacklog:
    """What a read-optimized reader misses: table-service plans not yet executed, and since when (epoch
    seconds) the oldest write not yet in the files such a reader reads has waited (None: nothing waits)."""

    pending_plans: int
    uncompacted_since: float | None

    def staleness_seconds(self, now: float) -> float:
        """How old the oldest change a read-optimized reader misses is at ``now`` (0: it misses none)."""
        return 0.0 if self.uncompacted_since is None else max(0.0, now - self.uncompacted_since)


class PlanNow(StrEnum):
    """What a table-service look plans before it executes the pending plans."""

    NOTHING = "nothing"
    """Only the plans the writer scheduled."""
    NEXT = "next"
    """The table's next plan, within its own bound (``plan_io_mb``), due at once."""
    EVERY_FILE_GROUP = "every_file_group"
    """One plan over every file group with logs, whatever the table's bound (``compact --schedule``)."""


NULL_PARTITION_VALUE = "__HIVE_DEFAULT_PARTITION__"
"""A null partition value as Hive, Glue and their readers write and read it."""


@dataclass(frozen=True)
class Partition:
    """One partition of a table: its folder under the base path and its values as text, one per partition
    field in the table's order (:data:`NULL_PARTITION_VALUE` for null).  Catalogs register these so readers
    that take partitions from the metastore (Trino, Athena, Hive) find the files."""

    path: str
    values: tuple[str, ...]


class Unread(enum.Enum):
    """The type of :data:`UNREAD`."""

    UNREAD = enum.auto()


UNREAD = Unread.UNREAD
"""``previous`` of :meth:`LakeFormat.write` when the caller has not just read the table's latest commit."""


class LakeFormat(ABC):
    """One table format, bound to a Spark session; every table is named by its base path."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    @abstractmethod
    def table_exists(self, base_path: str) -> bool:
        """Whether ``base_path`` holds a table of this format."""

    @abstractmethod
    def read(self, base_path: str, *, meta_columns: bool = False) -> DataFrame:
        """The table's latest snapshot; the format's own columns only with ``meta_columns``."""

    @abstractmethod
    def write(
        self,
        spec: TableSpec,
        rows: DataFrame,
        operation: WriteOperation,
        metadata: CommitMetadata,
        *,
        previous: str | Unread | None = UNREAD,
        unique_keys: bool = False,
    ) -> str:
        """Write ``rows`` into ``spec``'s table as one commit storing ``metadata`` with ``spec``'s layout
        (:attr:`~cdc_lake.lake.layout.TableSpec.layout`); its instant.

        The table is created by its first write.  ``previous``: the latest data commit's instant (None:
        none) when the caller has just read it.  ``unique_keys``: ``rows`` hold each key once.
        """

    @abstractmethod
    def latest_commit(self, base_path: str, *, ours: bool = False) -> CommitInfo | None:
        """The latest completed data commit (table services skipped), None for none or no table; with
        ``ours``, the latest cdc-lake wrote (:func:`~cdc_lake.lake.commit_metadata.written_by_cdc_lake`)."""

    def kept_spec(self, spec: TableSpec) -> TableSpec:
        """``spec`` in the layout the table's latest cdc-lake commit records (its table type, index and
        bucket count: :func:`~cdc_lake.lake.layout.kept_layout`), as it is when the table records none."""
        latest = self.latest_commit(spec.base_path, ours=True)
        return kept_layout(spec, None if latest is None else CommitMetadata.from_dict(latest.metadata).layout)

    @abstractmethod
    def records_written(self, base_path: str, instant: str) -> int:
        """How many records the completed commit ``instant`` wrote."""

    @abstractmethod
    def record_key_fields(self, base_path: str) -> tuple[str, ...] | None:
        """The record key fields the table was created with (None: it names none)."""

    @abstractmethod
    def partitions(self, base_path: str) -> tuple[Partition, ...]:
        """Every partition the table at ``base_path`` holds (none for an unpartitioned table)."""

    @abstractmethod
    def key_refusal(self, table: str, stored: DataFrame, key_fields: tuple[str, ...]) -> str | None:
        """The one-line reason an upsert keyed by ``key_fields`` would not find ``stored``'s rows (the
        table read with ``meta_columns``: it holds keys another writer built otherwise), or None."""

    @abstractmethod
    def snapshot_in_one_commit(self, spec: TableSpec) -> bool:
        """Whether a bootstrap writes ``spec``'s whole snapshot as one commit, not one per group of plan
        partitions: the format would write a later commit of new keys into log files, not files of its
        own, leaving the whole copy to a compaction (and a resumed copy starts over)."""

    @abstractmethod
    def services_outside_write(self, spec: TableSpec) -> bool:
        """Whether ``spec``'s table leaves table services to :meth:`run_services` (none run in its writes)."""

    @abstractmethod
    def services_lock_shared(self, spec: TableSpec) -> bool:
        """Whether ``spec``'s writers and table services take a lock other processes take too (then a
        service in another process needs no apply lock)."""

    @abstractmethod
    def run_services(self, spec: TableSpec, *, plan: PlanNow = PlanNow.NOTHING) -> tuple[str, ...]:
        """Execute the table's pending table-service plans, then plan as ``plan`` says and execute that;
        the plans executed.  Safe while a writer of this process commits to the table."""

    @abstractmethod
    def service_backlog(self, base_path: str) -> ServiceBacklog:
        """The table's pending plans and the age of what a read-optimized reader misses."""

    @abstractmethod
    def remove(self, base_path: str) -> None:
        """Delete the table at ``base_path`` and all its files (nothing when there is none)."""


@dataclass(frozen=True)
class CatalogStorage:
    """How a Hive metastore or Glue describes a table of the format: its Hive input and output formats,
    serde and ``classification``."""

    input_format: str
    output_format: str
    serde: str
    classification: str


class FormatFacts(ABC):
    """What a format declares once, read without Spark or a table.

    ``spark_conf``: session settings the format cannot work without (a user's Spark conf may not
    contradict them); ``spark_probe_class``: a JVM class loadable on the driver exactly when the format's
    jars are; ``meta_columns``: the columns the format adds to every table, in its order, which a
    catalog entry lists and a schema of source columns leaves out; ``implementation``: the
    :class:`LakeFormat` class, ``module.Class``, imported by :func:`load_format`.
    """

    name: ClassVar[str]
    version: ClassVar[str]
    implementation: ClassVar[str]
    spark_conf: ClassVar[Mapping[str, str]]
    spark_probe_class: ClassVar[str]
    meta_columns: ClassVar[tuple[str, ...]]
    catalog_storage: ClassVar[CatalogStorage]
    trino_connector: ClassVar[str]

    @abstractmethod
    def spark_packages(self, spark_line: str, scala_binary_version: str) -> tuple[str, ...]:
        """The Maven coordinates (``group:artifact:version``) Spark ``spark_line`` needs for the format."""

    def is_meta_column(self, column: str) -> bool:
        """Whether ``column`` is one the format adds (or uses internally), not a source or cdc-lake one."""
        return column in self.meta_columns

    @abstractmethod
    def commit_time(self, instant: str) -> float | None:
        """When the commit ``instant`` (as :meth:`LakeFormat.write` returned it) was made, epoch seconds;
        None for a string that is not one of the format's instants."""

    @abstractmethod
    def option_problem(self, key: str) -> str | None:
        """Why ``key`` cannot be passed through ``format_options`` (not the format's, or decided by
        cdc-lake), one line naming it, or None."""

    @abstractmethod
    def key_problem(self, table: str, row: Mapping[str, Any], key_fields: Sequence[str]) -> str | None:
        """The one-line reason the key of ``row`` (a change's column values) cannot be told apart from
        another key by the format's record key, or None."""

    def key_identity(self, key: tuple[Any, ...]) -> Hashable:
        """``key`` (a row's key values, in key order) as the format's record key tells keys apart: two keys
        have one identity exactly when the format writes them as one record key.  The applier's per-key
        merge of a batch groups and pairs changes by it (:mod:`cdc_lake.apply.last_change`), never by
        Python's equality, which a record key built from the values' text does not follow on
        floating-point values (a NaN equals no NaN, ``-0.0`` equals ``0.0``).  By default the values
        themselves, for a format whose record key is that tuple."""
        return key

    def key_identity_column(self, key: Column, key_type: StructType) -> Column:
        """:meth:`key_identity` in Spark: of ``key``, a struct column of key values of type ``key_type``.  Two
        such columns are equal (in a join, a window's partition, ``exists``) exactly when their record
        keys are one; Spark's own equality takes ``-0.0`` for ``0.0`` (:mod:`cdc_lake.apply.frame`).  By
        default ``key`` itself."""
        return key


def unknown_format(name: str) -> str | None:
    """Why ``name`` is not a ``lake.format`` value, naming the known ones; None for a known name."""
    return None if name in FORMATS else f"unknown format {name!r} (known: {', '.join(sorted(FORMATS))})"


def format_facts(name: str = DEFAULT_FORMAT) -> FormatFacts:
    """The facts of the format ``name`` (a ``lake.format`` value); its facts module is imported now.

    Raises ConfigError, one line naming the setting and the known formats, for an unknown name.
    """
    module = FORMATS.get(name)
    if module is None:
        raise ConfigError(f"lake.format: {unknown_format(name)}")
    facts = _FACTS.get(module)
    if facts is None:
        facts = _FACTS[module] = importlib.import_module(module).FACTS
    return facts


_FACTS: dict[str, FormatFacts] = {}
"""Each facts module's ``FACTS``, by module name: :func:`format_facts` is asked once per decoded change."""


def load_format(spark: SparkSession, name: str = DEFAULT_FORMAT) -> LakeFormat:
    """The format ``name`` (a ``lake.format`` value) bound to ``spark``; its module is imported now.

    Raises ConfigError, one line naming the setting and the known formats, for an unknown name.
    """
    module, _, cls = format_facts(name).implementation.rpartition(".")
    implementation: type[LakeFormat] = getattr(importlib.import_module(module), cls)
    return implementation(spark)
