"""A lake format keeping its tables in this process's memory: the proof that a format is its module plus
one line in :data:`cdc_lake.lake.format.FORMATS`.

:data:`FACTS` (``memory``) names :class:`MemoryFormat`; registering the module under a ``lake.format``
name (``FORMATS["memory"] = "support.memory_format"``) is all :func:`~cdc_lake.lake.format.load_format`
needs.  tests/integration/test_format_behaviors.py runs it through the same behaviour suite as Hudi.

A table is named by its base path (tables live as long as the process; every :class:`MemoryFormat`
shares them, as every ``HudiFormat`` shares the files).  Its rows are kept by record key, with the
commits that wrote them.  The semantics are Hudi's as the product uses them (docs/hudi.md):

- UPSERT first keeps one row per key of the batch (the highest ordering value, a later row on a tie:
  Hudi's combine before upsert), then merges each with the stored row by event-time ordering: the
  incoming row replaces the stored one when its ``_cdc_ordering`` is higher or equal (a tie goes to the
  newer commit, as Hudi's EVENT_TIME_ORDERING merger does); a row whose delete marker is true removes the
  key under the same rule, and inserts nothing for a key not stored.
- DELETE removes the keys of the given rows whatever their ordering value.
- BULK_INSERT stores the rows without looking keys up (the snapshot into a new table).

Ordering values are compared as they are (``_cdc_ordering`` is a string), with Python's ordering.
Partition fields are ignored: a key is unique across the table, as with a global index.  A write is one
commit; an empty one too.  No table services: everything a reader reads is written in the commit.
"""

from __future__ import annotations

import calendar
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final

from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.lake.columns import DELETED_COLUMN, ORDERING_COLUMN
from cdc_lake.lake.commit_metadata import CommitMetadata, written_by_cdc_lake
from cdc_lake.lake.format import (
    NULL_PARTITION_VALUE,
    UNREAD,
    CatalogStorage,
    CommitInfo,
    FormatFacts,
    LakeFormat,
    Partition,
    PlanNow,
    ServiceBacklog,
    Unread,
    WriteOperation,
)
from cdc_lake.lake.layout import TableSpec, TableType

COMMIT_TIME_COLUMN = "_memory_commit_time"
RECORD_KEY_COLUMN = "_memory_record_key"
_META_PREFIX = "_memory_"


class MemoryFacts(FormatFacts):
    """Tables in the memory of the process that writes them: no jars, settings, options or catalog."""

    name = "memory"
    version = "1"
    implementation = f"{__name__}.MemoryFormat"
    spark_conf: ClassVar[Mapping[str, str]] = {}
    # Nothing beyond Spark itself: a class loadable whenever the session is.
    spark_probe_class = "org.apache.spark.sql.SparkSession"
    meta_columns = (COMMIT_TIME_COLUMN, RECORD_KEY_COLUMN)
    # No metastore or Trino reads these tables; the values only say what kind of table an entry would be.
    catalog_storage = CatalogStorage(
        input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        output_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        serde="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
        classification="memory",
    )
    trino_connector = "memory"

    def spark_packages(self, spark_line: str, scala_binary_version: str) -> tuple[str, ...]:
        return ()

    def is_meta_column(self, column: str) -> bool:
        return column.startswith(_META_PREFIX)

    def commit_time(self, instant: str) -> float | None:
        if len(instant) != 17 or not instant.isdigit():
            return None
        return calendar.timegm(time.strptime(instant[:14], "%Y%m%d%H%M%S")) + int(instant[14:]) / 1000

    def option_problem(self, key: str) -> str | None:
        return f"{key}: the memory format takes no format options"

    def key_problem(self, table: str, row: Mapping[str, Any], key_fields: Sequence[str]) -> str | None:
        return None  # a key is the tuple of its values: two keys are never one


FACTS: Final = MemoryFacts()


@dataclass
class _Commit:
    instant: str
    action: str
    operation: WriteOperation
    metadata: dict[str, str]
    records: int


@dataclass
class _Table:
    key_fields: tuple[str, ...]
    schema: StructType
    rows: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Record key -> (instant of the commit that wrote the row, the row's values without the marker)."""
    commits: list[_Commit] = field(default_factory=list)
    partition_fields: tuple[str, ...] = ()


_Keyed = tuple[tuple[Any, ...], dict[str, Any]]
"""An incoming row's record key and its values."""

_TABLES: dict[str, _Table] = {}
_LOCK = threading.Lock()
_last_instant = ""


def _path(base_path: str) -> str:
    return base_path.rstrip("/")


def _next_instant() -> str:
    """A Hudi-shaped instant (UTC ``yyyyMMddHHmmssSSS``), later than every instant before it."""
    global _last_instant
    now = time.time()
    while True:
        instant = time.strftime("%Y%m%d%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}"
        if instant > _last_instant:
            _last_instant = instant
            return instant
        now += 0.001


def _hashable(value: Any) -> Any:
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def _merged_schema(stored: StructType | None, incoming: StructType) -> StructType:
    """The stored columns (an incoming column's type replacing its stored one), then the new ones."""
    fields = {f.name: f for f in incoming.fields if f.name != DELETED_COLUMN}
    if stored is None:
        return StructType(list(fields.values()))
    kept = [fields.pop(f.name, f) for f in stored.fields]
    return StructType([*kept, *fields.values()])


def _wins(incoming: dict[str, Any], stored: dict[str, Any]) -> bool:
    """Event-time ordering: the incoming row wins on a higher or equal ordering value."""
    return bool(incoming[ORDERING_COLUMN] >= stored[ORDERING_COLUMN])


class MemoryFormat(LakeFormat):
    """The tables of :data:`_TABLES`; ``read`` hands them to the session as DataFrames."""

    def _table(self, base_path: str) -> _Table:
        table = _TABLES.get(_path(base_path))
        if table is None:
            raise LakeWriteError(f"no memory table at {base_path}")
        return table

    def table_exists(self, base_path: str) -> bool:
        return _path(base_path) in _TABLES

    def read(self, base_path: str, *, meta_columns: bool = False) -> DataFrame:
        with _LOCK:
            table = self._table(base_path)
            stored = [(key, instant, dict(row)) for key, (instant, row) in table.rows.items()]
            schema = table.schema
        names = schema.fieldNames()
        values = [tuple(row.get(name) for name in names) for _, _, row in stored]
        if meta_columns:
            meta = [StructField(name, StringType()) for name in FACTS.meta_columns]
            schema = StructType([*meta, *schema.fields])
            values = [
                (instant, repr(key), *value) for (key, instant, _), value in zip(stored, values, strict=True)
            ]
        return self.spark.createDataFrame(values, schema)

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
        incoming = [row.asDict() for row in rows.collect()]
        missing = [name for name in spec.key_fields if name not in rows.columns]
        if missing:
            where = f"table '{spec.name}' at {spec.base_path}"
            raise LakeWriteError(f"memory {operation.value} into {where}: no key columns {missing}")
        keyed = [(tuple(_hashable(row[name]) for name in spec.key_fields), row) for row in incoming]
        with _LOCK:
            table = _TABLES.get(_path(spec.base_path))
            if table is None:
                table = _Table(
                    spec.key_fields, _merged_schema(None, rows.schema), partition_fields=spec.partition_fields
                )
            elif operation is not WriteOperation.DELETE:
                table.schema = _merged_schema(table.schema, rows.schema)
            instant = _next_instant()
            records = self._apply(table, keyed, operation, instant)
            action = "deltacommit" if spec.table_type is TableType.MERGE_ON_READ else "commit"
            stored = replace(metadata, layout=spec.layout).to_dict()
            table.commits.append(_Commit(instant, action, operation, stored, records))
            _TABLES[_path(spec.base_path)] = table
        return instant

    @staticmethod
    def _apply(table: _Table, keyed: list[_Keyed], operation: WriteOperation, instant: str) -> int:
        """Apply the rows to ``table``; how many rows the commit stored (inserted or replaced)."""
        if operation is WriteOperation.DELETE:
            for key, _ in keyed:
                table.rows.pop(key, None)
            return 0
        if operation is WriteOperation.BULK_INSERT:
            for key, row in keyed:
                row.pop(DELETED_COLUMN, None)
                table.rows[key] = (instant, row)
            return len(keyed)
        combined: dict[tuple[Any, ...], dict[str, Any]] = {}
        for key, row in keyed:
            if key not in combined or _wins(row, combined[key]):
                combined[key] = row
        records = 0
        for key, row in combined.items():
            stored = table.rows.get(key)
            if stored is not None and not _wins(row, stored[1]):
                continue
            if row.pop(DELETED_COLUMN, False):
                table.rows.pop(key, None)
                continue
            table.rows[key] = (instant, row)
            records += 1
        return records

    def latest_commit(self, base_path: str, *, ours: bool = False) -> CommitInfo | None:
        with _LOCK:
            table = _TABLES.get(_path(base_path))
            commits = [] if table is None else table.commits
            kept = [c for c in commits if not ours or written_by_cdc_lake(c.metadata)]
            if not kept:
                return None
            last = kept[-1]
            operation = last.operation.name
            return CommitInfo(last.instant, last.action, last.instant, operation, dict(last.metadata))

    def records_written(self, base_path: str, instant: str) -> int:
        with _LOCK:
            for commit in self._table(base_path).commits:
                if commit.instant == instant:
                    return commit.records
        raise LakeWriteError(f"commit {instant} at {base_path} is not a completed commit")

    def record_key_fields(self, base_path: str) -> tuple[str, ...] | None:
        with _LOCK:
            return self._table(base_path).key_fields or None

    def partitions(self, base_path: str) -> tuple[Partition, ...]:
        with _LOCK:
            table = self._table(base_path)
            found = {
                tuple(NULL_PARTITION_VALUE if row[f] is None else str(row[f]) for f in table.partition_fields)
                for _, row in table.rows.values()
            }
            fields = table.partition_fields
        if not fields:
            return ()
        return tuple(
            Partition("/".join(f"{f}={v}" for f, v in zip(fields, values, strict=True)), values)
            for values in sorted(found, key=repr)
        )

    def key_refusal(self, table: str, stored: DataFrame, key_fields: tuple[str, ...]) -> str | None:
        return None  # every writer builds a key the same way: the tuple of its values

    def snapshot_in_one_commit(self, spec: TableSpec) -> bool:
        return False

    def services_outside_write(self, spec: TableSpec) -> bool:
        return False

    def services_lock_shared(self, spec: TableSpec) -> bool:
        return False

    def run_services(self, spec: TableSpec, *, plan: PlanNow = PlanNow.NOTHING) -> tuple[str, ...]:
        return ()

    def service_backlog(self, base_path: str) -> ServiceBacklog:
        return ServiceBacklog(0, None)

    def remove(self, base_path: str) -> None:
        with _LOCK:
            _TABLES.pop(_path(base_path), None)
