"""What every lake format does, run once per format: Hudi, and an in-memory fake registered by one line.

The ``lake`` fixture is ``load_format(spark, name)`` for each name, the product's own way of loading a
format; the fake (tests/support/memory_format.py) becomes a format by one entry in
``FORMATS`` (the ``registered`` fixture), which is all a new format needs besides its module.  The
behaviours are the ones the bootstrap and the applier rely on (docs/hudi.md): a table exists from its
first write until it is removed; a bulk insert reads back row for row and column for column; an upsert
merges by event-time ordering (a higher or equal ordering value wins, an older change arriving late
loses, a delete marker removes a key only when it wins); a DELETE removes keys whatever their ordering;
every write is one commit carrying its operation and its cdc-lake metadata with the layout it wrote
(table type and index, which the table keeps); the format's own columns
appear only when asked for.  Local base paths under ``tmp_path``, COPY_ON_WRITE, tens of rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType
from support.memory_format import FACTS as MEMORY_FACTS
from support.memory_format import MemoryFormat

from cdc_lake.exceptions import ConfigError, LakeWriteError
from cdc_lake.lake import format as lake_format
from cdc_lake.lake.columns import DELETED_COLUMN, lake_struct
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.format import DEFAULT_FORMAT, LakeFormat, WriteOperation, format_facts, load_format
from cdc_lake.lake.layout import TableSpec

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

MEMORY = "memory"
MEMORY_MODULE = "support.memory_format"
SCHEMA = lake_struct(
    StructType(
        [
            StructField("id", LongType(), nullable=False),
            StructField("name", StringType()),
            StructField("qty", IntegerType()),
        ]
    )
)
COLUMNS = [name for name in SCHEMA.fieldNames() if name != DELETED_COLUMN]
"""The columns a read returns: every written one but the delete marker, in the written order."""
SOURCE_TS = dt.datetime(2026, 1, 2, 3, 4, 5, 123456)
APPLIED_AT = dt.datetime(2026, 1, 2, 3, 4, 6, 654321)
SNAPSHOT_ORDERING = 10
BOOTSTRAP = CommitMetadata(
    bootstrap_attempt="attempt-1",
    bootstrap_partitions=frozenset({0, 3}),
    compared_columns=frozenset({"id", "name", "qty"}),
    char_lengths={"name": 40},
)
CHECKPOINT = CommitMetadata(
    topic="src.public.t",
    offsets={0: 42, 1: 7},
    newest_source_ts_ms=1_767_322_245_123,
    positions={0: '{"lsn":1234}'},
    topic_id="topic-id-1",
    quarantined={1: (5, 6)},
)


def _ordering(value: int) -> str:
    """An ``_cdc_ordering`` value: strings compared as they are, so fixed width."""
    return f"{value:020d}"


def _row(key: int, name: str, ordering: int, *, deleted: bool = False) -> tuple[Any, ...]:
    """One lake row of ``SCHEMA``: the source columns then the metadata columns."""
    return (key, name, key * 10, "u", SOURCE_TS, _ordering(ordering), APPLIED_AT, False, deleted)


def _read(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a read returns for ``row``: every column but the delete marker."""
    return row[:-1]


def _frame(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, SCHEMA)


def _spec(base: Path, name: str) -> TableSpec:
    base_path = (base / name).as_uri()
    return TableSpec(name=f"src.public.{name}", base_path=base_path, key_fields=("id",), parallelism=1)


def _stored(lake: LakeFormat, spec: TableSpec) -> set[tuple[Any, ...]]:
    return {tuple(row) for row in lake.read(spec.base_path).collect()}


@pytest.fixture(scope="module")
def registered() -> Iterator[None]:
    """The in-memory format known to the product by its one line in ``FORMATS``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(lake_format.FORMATS, MEMORY, MEMORY_MODULE)
        yield


@pytest.fixture(scope="module", params=[DEFAULT_FORMAT, MEMORY])
def format_name(request: pytest.FixtureRequest, registered: None) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def lake(spark: SparkSession, format_name: str) -> LakeFormat:
    """The format ``format_name`` as the product loads it."""
    return load_format(spark, format_name)


@pytest.fixture(scope="module")
def snapshot(
    lake: LakeFormat, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[TableSpec, str, list[tuple[Any, ...]]]:
    """A table made by one bulk insert (the bootstrap's write), shared by the tests that only read it:
    its spec, the commit's instant and the rows written."""
    spec = _spec(tmp_path_factory.mktemp("snapshot"), "snapshot")
    rows = [_row(key, f"name {key}", SNAPSHOT_ORDERING) for key in range(1, 21)]
    instant = lake.write(spec, _frame(spark, rows), WriteOperation.BULK_INSERT, BOOTSTRAP)
    return spec, instant, rows


def test_a_new_format_is_its_module_plus_one_line(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(lake_format.FORMATS, MEMORY, raising=False)
    with pytest.raises(ConfigError, match="unknown format 'memory'"):
        load_format(spark, MEMORY)

    monkeypatch.setitem(lake_format.FORMATS, MEMORY, MEMORY_MODULE)

    assert format_facts(MEMORY) is MEMORY_FACTS
    loaded = load_format(spark, MEMORY)
    assert isinstance(loaded, MemoryFormat) and loaded.spark is spark


def test_a_table_exists_from_its_first_write_until_removed(
    lake: LakeFormat, spark: SparkSession, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, "lifecycle")
    assert not lake.table_exists(spec.base_path)
    assert lake.latest_commit(spec.base_path) is None

    lake.write(spec, _frame(spark, [_row(1, "one", 1)]), WriteOperation.BULK_INSERT, BOOTSTRAP)
    assert lake.table_exists(spec.base_path)

    lake.remove(spec.base_path)
    assert not lake.table_exists(spec.base_path)
    assert lake.latest_commit(spec.base_path) is None
    lake.remove(spec.base_path)  # nothing to remove: no error
    assert not lake.table_exists(spec.base_path)


def test_a_bulk_insert_reads_back_every_row_and_column(
    lake: LakeFormat, snapshot: tuple[TableSpec, str, list[tuple[Any, ...]]]
) -> None:
    spec, _, rows = snapshot
    table = lake.read(spec.base_path)

    assert table.columns == COLUMNS
    assert {tuple(row) for row in table.collect()} == {_read(row) for row in rows}


def test_the_format_columns_appear_only_when_asked_for(
    lake: LakeFormat, format_name: str, snapshot: tuple[TableSpec, str, list[tuple[Any, ...]]]
) -> None:
    spec, _, rows = snapshot
    facts = format_facts(format_name)
    with_meta = lake.read(spec.base_path, meta_columns=True)
    plain = lake.read(spec.base_path).columns

    assert facts.meta_columns and set(facts.meta_columns) <= set(with_meta.columns)
    assert set(COLUMNS) <= set(with_meta.columns)
    assert not [column for column in plain if facts.is_meta_column(column)]
    assert DELETED_COLUMN not in plain
    assert with_meta.count() == len(rows)


def test_a_commit_keeps_its_operation_metadata_and_record_count(
    lake: LakeFormat, snapshot: tuple[TableSpec, str, list[tuple[Any, ...]]]
) -> None:
    spec, instant, rows = snapshot
    commit = lake.latest_commit(spec.base_path)

    assert commit is not None and commit.instant == instant
    assert commit.operation == WriteOperation.BULK_INSERT.name
    recorded = replace(BOOTSTRAP, layout=spec.layout)  # the format records the layout it wrote
    assert commit.metadata == recorded.to_dict()
    assert CommitMetadata.from_dict(commit.metadata) == recorded
    assert lake.records_written(spec.base_path, instant) == len(rows)
    with pytest.raises(LakeWriteError, match="not a completed commit"):
        lake.records_written(spec.base_path, "20000101000000000")
    assert lake.record_key_fields(spec.base_path) == spec.key_fields


def test_an_upsert_merges_by_event_time_ordering(
    lake: LakeFormat, spark: SparkSession, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, "upsert")
    stored = {key: _row(key, f"snapshot {key}", SNAPSHOT_ORDERING) for key in range(1, 7)}
    first = lake.write(spec, _frame(spark, list(stored.values())), WriteOperation.BULK_INSERT, BOOTSTRAP)
    changes = {
        "newer": _row(1, "newer", SNAPSHOT_ORDERING + 5),
        "older, arriving late": _row(2, "late", SNAPSHOT_ORDERING - 5),
        "equal": _row(3, "equal", SNAPSHOT_ORDERING),
        "newer delete": _row(4, "gone", SNAPSHOT_ORDERING + 5, deleted=True),
        "older delete": _row(5, "not gone", SNAPSHOT_ORDERING - 5, deleted=True),
        "new key": _row(7, "inserted", 1),
        "delete of a key never stored": _row(8, "never", SNAPSHOT_ORDERING + 5, deleted=True),
        "a key twice, first": _row(9, "first", 3),
        "a key twice, second": _row(9, "second", 4),
    }

    second = lake.write(spec, _frame(spark, list(changes.values())), WriteOperation.UPSERT, CHECKPOINT)

    expected = {
        _read(changes["newer"]),
        _read(stored[2]),
        _read(changes["equal"]),
        _read(stored[5]),
        _read(stored[6]),
        _read(changes["new key"]),
        _read(changes["a key twice, second"]),
    }
    assert _stored(lake, spec) == expected
    commit = lake.latest_commit(spec.base_path)
    assert commit is not None and commit.instant == second and second > first
    assert commit.operation == WriteOperation.UPSERT.name
    assert CommitMetadata.from_dict(commit.metadata) == replace(CHECKPOINT, layout=spec.layout)


def test_a_delete_removes_keys_whatever_their_ordering(
    lake: LakeFormat, spark: SparkSession, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, "delete")
    stored = [_row(key, f"snapshot {key}", SNAPSHOT_ORDERING) for key in range(1, 5)]
    lake.write(spec, _frame(spark, stored), WriteOperation.BULK_INSERT, BOOTSTRAP)
    # Lower ordering values than the stored rows', and a key never stored.
    keys = [_row(1, "x", 1), _row(2, "y", 1), _row(99, "z", 1)]

    instant = lake.write(spec, _frame(spark, keys), WriteOperation.DELETE, CHECKPOINT)

    assert _stored(lake, spec) == {_read(row) for row in stored[2:]}
    commit = lake.latest_commit(spec.base_path)
    assert commit is not None and commit.instant == instant
    assert commit.operation == WriteOperation.DELETE.name
    assert commit.metadata == replace(CHECKPOINT, layout=spec.layout).to_dict()
