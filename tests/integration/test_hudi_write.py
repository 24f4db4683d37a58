"""Hudi writes through the real Hudi 1.1 bundle on a local path: ordering, deletes, moves, MOR, metadata."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from apply_bench import plain_upsert
from pyspark.sql import SparkSession
from support.second_reader import second_reader_rows

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.hudi.options import DELETE_MARKER_COLUMN, HudiTableSpec, write_options
from cdc_lake.hudi.services import execute_compactions, service_backlog
from cdc_lake.hudi.timeline import latest_commit, partitions
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.columns import DELETED_COLUMN
from cdc_lake.lake.format import PlanNow, ServiceBacklog, WriteOperation
from cdc_lake.lake.layout import CompactionSpec, IndexType, TableType

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("trino_reads_every_table"), pytest.mark.timeout(600)]

SCHEMA = "id long, region string, name string, lsn long, _hoodie_is_deleted boolean"


def _spec(tmp_path: Path, name: str, **kwargs: Any) -> HudiTableSpec:
    return HudiTableSpec(
        table_name=f"src.public.{name}",
        base_path=(tmp_path / name).as_uri(),
        record_key_fields=("id",),
        ordering_field="lsn",
        **kwargs,
    )


def _completed_commits(table: Path) -> list[str]:
    """The data timeline's completed ``commit`` instants (a compaction's, on a MERGE_ON_READ table): in
    ``.hoodie/timeline`` from table version 8 on, in ``.hoodie`` itself before (version 6)."""
    hoodie = table / ".hoodie"
    timeline = hoodie / "timeline" if (hoodie / "timeline").is_dir() else hoodie
    return sorted(p.name for p in timeline.glob("*.commit"))


def _write(
    spark: SparkSession,
    spec: HudiTableSpec,
    rows: list[tuple[Any, ...]],
    operation: WriteOperation = WriteOperation.UPSERT,
    metadata: dict[str, str] | None = None,
) -> str:
    return write_batch(spark, spec, spark.createDataFrame(rows, SCHEMA), operation, metadata)


def _rows(spark: SparkSession, spec: HudiTableSpec) -> list[tuple[Any, ...]]:
    """(partition path, id, name, lsn) of every row, sorted by id."""
    df = read_table(spark, spec.base_path, meta_columns=True)
    return [
        (r["_hoodie_partition_path"], r["id"], r["name"], r["lsn"])
        for r in df.select("_hoodie_partition_path", "id", "name", "lsn").orderBy("id").collect()
    ]


def test_event_time_ordering_and_commit_metadata(spark: SparkSession, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "orders", partition_fields=("region",))
    assert latest_commit(spark, spec.base_path) is None

    snapshot = [(1, "eu", "a", 0, False), (2, "us", "b", 0, False), (3, "eu", "c", 0, False)]
    first = _write(spark, spec, snapshot, WriteOperation.BULK_INSERT, {"kafka.offsets": "0:0"})
    # Replayed events carry higher LSNs than snapshot rows and win; an event older than the
    # stored row loses, whether it is an update or a delete.
    events = [(1, "eu", "a1", 10, False), (2, "us", "stale", -1, False), (3, "eu", None, -1, True)]
    second = _write(spark, spec, events, metadata={"kafka.offsets": "0:17,1:4"})

    assert second > first
    assert _rows(spark, spec) == [
        ("region=eu", 1, "a1", 10),
        ("region=us", 2, "b", 0),
        ("region=eu", 3, "c", 0),
    ]
    commit = latest_commit(spark, spec.base_path)
    assert commit is not None
    assert (commit.instant, commit.action, commit.operation) == (second, "commit", "UPSERT")
    assert commit.metadata == {"kafka.offsets": "0:17,1:4"}


def test_delete_reinsert_and_partition_move_with_global_bloom(spark: SparkSession, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "customers", partition_fields=("region",))
    _write(spark, spec, [(1, "eu", "a", 1, False), (2, "eu", "b", 1, False), (3, "us", "c", 1, False)])
    # One commit: delete id 2, move id 1 from eu to us.
    _write(spark, spec, [(2, "eu", None, 5, True), (1, "us", "a-moved", 6, False)])
    assert _rows(spark, spec) == [("region=us", 1, "a-moved", 6), ("region=us", 3, "c", 1)]

    # A hard delete leaves no tombstone: any later insert of the key comes back.
    _write(spark, spec, [(2, "us", "b-again", 2, False)])
    assert _rows(spark, spec) == [
        ("region=us", 1, "a-moved", 6),
        ("region=us", 2, "b-again", 2),
        ("region=us", 3, "c", 1),
    ]


def test_record_index_moves_rows_without_duplicates(spark: SparkSession, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "accounts", partition_fields=("region",), index=IndexType.RECORD_INDEX)
    _write(spark, spec, [(1, "eu", "a", 1, False), (2, "us", "b", 1, False)])
    _write(spark, spec, [(1, "us", "a-moved", 2, False), (2, "us", None, 2, True)])

    assert _rows(spark, spec) == [("region=us", 1, "a-moved", 2)]
    properties = Path(tmp_path / "accounts" / ".hoodie" / "hoodie.properties").read_text()
    assert "record_index" in properties


def test_merge_on_read_snapshot_and_compaction(spark: SparkSession, tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        "events",
        table_type=TableType.MERGE_ON_READ,
        compaction=CompactionSpec(inline=True, max_delta_commits=2),
    )
    _write(spark, spec, [(1, None, "a", 1, False), (2, None, "b", 1, False)], metadata={"offset": "1"})
    second = _write(
        spark, spec, [(1, None, "a2", 2, False), (2, None, None, 2, True)], metadata={"offset": "2"}
    )

    assert _rows(spark, spec) == [("", 1, "a2", 2)]
    timeline = _completed_commits(tmp_path / "events")
    assert timeline, "inline compaction should have completed after two delta commits"
    # The compaction commit is the newest on the timeline; the applier's offsets come from the delta commit.
    commit = latest_commit(spark, spec.base_path)
    assert commit is not None
    assert (commit.instant, commit.action, commit.metadata) == (second, "deltacommit", {"offset": "2"})


def test_a_bucket_table_is_compacted_outside_its_writes(spark: SparkSession, tmp_path: Path) -> None:
    """MERGE_ON_READ + the bucket index with compaction outside the writes (the tier-0 layout issue 35
    measures): the table service's write client executes the plan.  It failed on every plan before its
    options named the record key (Hudi checks the bucket index's hash fields against them: a
    NullPointerException), so a read-optimized reader never saw a change."""
    spec = _spec(
        tmp_path,
        "bucketed",
        table_type=TableType.MERGE_ON_READ,
        index=IndexType.BUCKET,
        compaction=CompactionSpec(inline=False, max_delta_commits=1),
    )
    _write(spark, spec, [(1, None, "a", 1, False), (2, None, "b", 1, False)])
    _write(spark, spec, [(1, None, "a2", 2, False), (2, None, None, 2, True)])

    executed = execute_compactions(spark, spec, plan=PlanNow.EVERY_FILE_GROUP)

    assert len(executed) == 1, executed
    assert _rows(spark, spec) == [("", 1, "a2", 2)]
    optimized = spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")
    assert [(r["id"], r["name"]) for r in optimized.load(spec.base_path).collect()] == [(1, "a2")]


def test_compacting_with_a_new_plan_leaves_no_log_a_pending_plan_did_not_cover(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``execute_compactions(plan=PlanNow.EVERY_FILE_GROUP)`` (``cdc-lake compact --schedule``):
    everything reaches the base files, also when a plan is pending and fewer delta commits than the
    table's trigger follow it.  Hudi plans no file group a pending plan holds, and plans nothing before
    the trigger (here 3 delta commits): planning and executing in one call executed the old plan only
    and left the logs after it (the demo's Trino count missed 26 of 2,207 rows)."""
    spec = _spec(tmp_path, "pending", table_type=TableType.MERGE_ON_READ, index=IndexType.BUCKET,
                 compaction=CompactionSpec(inline=False, max_delta_commits=3))  # fmt: skip
    for n in range(1, 8):
        _write(spark, spec, [(i, None, f"v{n}", n, False) for i in range(1, 9)])
        if service_backlog(spark, spec.base_path).pending_plans:
            break
    assert service_backlog(spark, spec.base_path).pending_plans == 1, "no plan in 7 delta commits"
    _write(spark, spec, [(i, None, "last", 99, False) for i in range(1, 9)])  # logs after the plan

    execute_compactions(spark, spec, plan=PlanNow.EVERY_FILE_GROUP)

    optimized = spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")
    assert sorted((r["id"], r["name"]) for r in optimized.load(spec.base_path).collect()) == [
        (i, "last") for i in range(1, 9)
    ]
    assert service_backlog(spark, spec.base_path) == ServiceBacklog(0, None)


def test_the_backlog_counts_the_file_groups_a_bounded_plan_left_out(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A compaction plan need not cover every file group: ``plan_io_mb`` bounds a plan by IO (Hudi's
    ``hoodie.compaction.target.io``, here 1 MB: one file group per plan), so the newest compaction does
    not say every older log is in a base file.  The backlog answered per table: after a plan over one of
    the four buckets it reported nothing uncompacted while the read-optimized reader still missed the
    other buckets' updates.  And ``plan=PlanNow.EVERY_FILE_GROUP`` (``cdc-lake compact --schedule``)
    plans every file group, whatever the table's bound: it compacted one more bucket only.  (Hudi counts
    a file group's IO in whole MB, and one under 1 MB as none: the rows carry incompressible text so each
    bucket's is more.)"""
    spec = _spec(tmp_path, "bounded", table_type=TableType.MERGE_ON_READ, index=IndexType.BUCKET,
                 compaction=CompactionSpec(inline=False, max_delta_commits=1, plan_io_mb=1))  # fmt: skip
    keys = range(1, 40_001)
    started = time.time()
    _write(spark, spec, [(i, None, uuid.uuid4().hex * 3, 1, False) for i in keys])
    _write(spark, spec, [(i, None, "b", 2, False) for i in keys])  # a log in every bucket, then one plan
    optimized = spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")

    executed = execute_compactions(spark, spec)

    assert len(executed) == 1, executed
    compacted = Counter(r["name"] == "b" for r in optimized.load(spec.base_path).collect())
    assert sum(compacted.values()) == len(keys)
    assert 0 < compacted[True] < len(keys), f"one plan should have compacted one bucket: {compacted}"
    backlog = service_backlog(spark, spec.base_path)
    assert backlog.pending_plans == 0
    assert backlog.uncompacted_since is not None, "the buckets no plan covered wait since the update"
    assert started - 1 <= backlog.uncompacted_since <= time.time(), (backlog, started)

    execute_compactions(spark, spec, plan=PlanNow.NEXT)  # the table's next plan: one more bucket

    more = Counter(r["name"] == "b" for r in optimized.load(spec.base_path).collect())
    assert compacted[True] < more[True] < len(keys), f"the next plan should have compacted one bucket: {more}"
    assert service_backlog(spark, spec.base_path).uncompacted_since == backlog.uncompacted_since

    execute_compactions(spark, spec, plan=PlanNow.EVERY_FILE_GROUP)

    assert Counter(r["name"] for r in optimized.load(spec.base_path).collect()) == {"b": len(keys)}
    assert service_backlog(spark, spec.base_path) == ServiceBacklog(0, None)
    assert _rows(spark, spec) == [("", i, "b", 2) for i in keys]
    second = second_reader_rows(spec.base_path, ["id", "name", "lsn"])
    assert sorted((r["id"], r["name"], r["lsn"]) for r in second) == [(i, "b", 2) for i in keys]


def test_the_second_reader_reads_the_logs_written_after_a_pending_plan(
    spark: SparkSession, tmp_path: Path
) -> None:
    """On table version 6 a log written after a compaction plan is named after the plan: the new slice,
    whose base file the plan has not written yet.  Hudi merges its logs with the slice before; hudi-rs
    0.5 lists the slice before alone, so the second reader missed every change since the plan (deleted
    rows read as present in ``test_table_services.py`` once ``run``'s service thread planned by time)."""
    spec = _spec(tmp_path, "pending_read", table_type=TableType.MERGE_ON_READ, index=IndexType.BUCKET,
                 compaction=CompactionSpec(inline=False, max_delta_commits=1))  # fmt: skip
    _write(spark, spec, [(i, None, "a", 1, False) for i in range(1, 9)])
    _write(spark, spec, [(i, None, "b", 2, False) for i in range(1, 9)])
    assert service_backlog(spark, spec.base_path).pending_plans, "the writer planned no compaction"

    _write(spark, spec, [(1, None, "c", 3, False), (2, None, None, 3, True)])  # logs after the plan

    expected = [(1, "c", 3), *((i, "b", 2) for i in range(3, 9))]
    assert [row[1:] for row in _rows(spark, spec)] == expected
    second = second_reader_rows(spec.base_path, ["id", "name", "lsn"])
    assert sorted((r["id"], r["name"], r["lsn"]) for r in second) == expected


def test_a_bucket_table_keeps_no_metadata_table_and_one_written_with_it_drops_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A bucket-index table goes without Hudi's metadata table (its commit was half of a small upsert's:
    :func:`cdc_lake.hudi.options.metadata_options`).  One written with it, as every table was before,
    drops it at its next write; its writes, compactions and partition listings go on from the folders,
    and Spark, hudi-rs and Trino (the module's fixture) read the same rows."""
    spec = _spec(
        tmp_path, "bucket_listed", partition_fields=("region",), table_type=TableType.MERGE_ON_READ,
        index=IndexType.BUCKET, compaction=CompactionSpec(inline=False, max_delta_commits=1),
    )  # fmt: skip
    metadata = tmp_path / "bucket_listed" / ".hoodie" / "metadata"
    with_metadata = {**write_options(spec, WriteOperation.UPSERT), "hoodie.metadata.enable": "true"}
    rows = [(1, "eu", "a", 1, False), (2, "us", "b", 1, False), (3, "us", "c", 1, False)]
    spark.createDataFrame(rows, SCHEMA).write.format("hudi").options(**with_metadata).mode("append").save(
        spec.base_path
    )
    assert metadata.is_dir(), "the earlier write kept no metadata table"

    _write(spark, spec, [(1, "eu", "a2", 2, False), (4, "eu", "d", 2, False)])
    assert not metadata.exists(), "the bucket table kept its metadata table"
    assert execute_compactions(spark, spec, plan=PlanNow.EVERY_FILE_GROUP), "no plan was executed"
    _write(spark, spec, [(2, "us", None, 3, True), (5, "asia", "e", 3, False)])

    assert not metadata.exists(), "a write or a compaction made a metadata table again"
    assert [p.path for p in partitions(spark, spec.base_path)] == ["region=asia", "region=eu", "region=us"]
    expected = [("region=eu", 1, "a2", 2), ("region=us", 3, "c", 1), ("region=eu", 4, "d", 2),
                ("region=asia", 5, "e", 3)]  # fmt: skip
    assert _rows(spark, spec) == expected
    second = second_reader_rows(spec.base_path, ["id", "name", "lsn"])
    assert sorted((r["id"], r["name"], r["lsn"]) for r in second) == [row[1:] for row in expected]


@pytest.mark.parametrize("table_type", [TableType.MERGE_ON_READ, TableType.COPY_ON_WRITE])
def test_a_bucket_table_bootstrapped_in_several_commits_takes_upserts(
    spark: SparkSession, tmp_path: Path, table_type: TableType
) -> None:
    """A bootstrap writes one bulk insert per group of plan partitions.  Hudi's bulk insert creates a new
    file group for every bucket it writes, so a second group gave each bucket a second file group and
    every later write of the table failed ("Find multiple files at partition path= that belong to the
    same bucket id"): found by a 10M-row tier-0 bootstrap (three groups).  A bulk insert into a bucket
    table that exists writes into its buckets' file groups instead."""
    name = f"grouped_{table_type.value.lower()}"
    spec = _spec(tmp_path, name, table_type=table_type, index=IndexType.BUCKET)
    groups = [range(1, 41), range(41, 81), range(81, 121)]
    for group in groups:
        _write(spark, spec, [(i, None, f"s{i}", 0, False) for i in group], WriteOperation.BULK_INSERT)
    file_groups = {p.name.split("_", 1)[0] for p in (tmp_path / name).glob("*.parquet")}
    buckets = [file_group.split("-", 1)[0] for file_group in file_groups]

    _write(spark, spec, [(i, None, f"u{i}", 1, False) for i in range(1, 121, 3)])

    assert len(set(buckets)) == len(buckets) == spec.bucket_count, sorted(file_groups)
    expected = [("", i, f"u{i}" if i % 3 == 1 else f"s{i}", 1 if i % 3 == 1 else 0) for i in range(1, 121)]
    assert _rows(spark, spec) == expected
    second = second_reader_rows(spec.base_path, ["id", "name", "lsn"])
    assert sorted((r["id"], r["name"], r["lsn"]) for r in second) == [row[1:] for row in expected]


def test_a_benchmarks_plain_upsert_of_the_appliers_rows_deletes_what_they_remove(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The limit benchmarks' write-only arm upserts the rows the applier wrote, saved as the applier gave
    them to ``write_batch`` (the lake's delete marker, ``_cdc_remove``).  Written as they were, a
    MERGE_ON_READ + BUCKET table refused them (``MissingSchemaFieldException``: its schema holds Hudi's
    marker); a table that took them would have kept the deleted rows."""
    spec = _spec(tmp_path, "plain", table_type=TableType.MERGE_ON_READ, index=IndexType.BUCKET)
    _write(spark, spec, [(i, None, f"s{i}", 0, False) for i in range(1, 7)], WriteOperation.BULK_INSERT)
    saved = tmp_path / "applier-rows"
    lake_schema = SCHEMA.replace(DELETE_MARKER_COLUMN, DELETED_COLUMN)
    changes = [(2, None, "u2", 1, False), (3, None, None, 1, True), (7, None, "i7", 1, False)]
    spark.createDataFrame(changes, lake_schema).write.parquet(str(saved))

    seconds, upserted = plain_upsert(spark, spec, saved)

    assert upserted == 3 and seconds > 0
    kept = [(1, "s1"), (2, "u2"), (4, "s4"), (5, "s5"), (6, "s6"), (7, "i7")]
    assert [row[1:3] for row in _rows(spark, spec)] == kept


def test_failed_write_names_table_and_path(spark: SparkSession, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "broken")
    without_ordering_field = spark.createDataFrame([(1, "a")], "id long, name string")
    with pytest.raises(LakeWriteError, match=r"table 'src\.public\.broken' at file:"):
        write_batch(spark, spec, without_ordering_field, WriteOperation.UPSERT)


ARRAY_SCHEMA = "id long, tags array<string>, nums array<int>, lsn long, _hoodie_is_deleted boolean"


def _array_rows(spark: SparkSession, spec: HudiTableSpec) -> list[tuple[Any, ...]]:
    df = read_table(spark, spec.base_path).select("id", "tags", "nums", "lsn").orderBy("id")
    return [(r["id"], r["tags"], r["nums"], r["lsn"]) for r in df.collect()]


@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
def test_arrays_with_null_elements_in_every_write_path(
    spark: SparkSession, tmp_path: Path, table_type: TableType
) -> None:
    """bulk_insert (Spark's row writer), upsert and MOR log + compaction (Hudi's Avro writer) alike."""
    spec = _spec(
        tmp_path,
        f"arrays_{table_type.value.lower()}",
        table_type=table_type,
        compaction=CompactionSpec(inline=True, max_delta_commits=2),
    )

    def write(rows: list[tuple[Any, ...]], operation: WriteOperation = WriteOperation.UPSERT) -> None:
        write_batch(spark, spec, spark.createDataFrame(rows, ARRAY_SCHEMA), operation)

    write([(1, ["a", None], [1, 2, None], 0, False), (2, None, [], 0, False)], WriteOperation.BULK_INSERT)
    write([(1, [None], [None, 3], 1, False), (3, ["c", None, "d"], [None], 1, False)])
    write([(2, [None, None], [7, None], 2, False)])
    write([(3, ["c2"], None, 3, False)])

    assert _array_rows(spark, spec) == [
        (1, [None], [None, 3], 1),
        (2, [None, None], [7, None], 2),
        (3, ["c2"], None, 3),
    ]
    second_reader = second_reader_rows(spec.base_path, ["id", "tags", "nums", "lsn"])
    assert sorted(tuple(r.values()) for r in second_reader) == [
        (1, [None], [None, 3], 1),
        (2, [None, None], [7, None], 2),
        (3, ["c2"], None, 3),
    ]
    if table_type is TableType.MERGE_ON_READ:
        table = tmp_path / spec.base_path.rsplit("/", 1)[1]
        assert _completed_commits(table), "inline compaction should have rewritten the log files"


@pytest.mark.parametrize("version", [6, 8])
def test_an_older_table_version_is_written_and_read_by_both_readers(
    spark: SparkSession, tmp_path: Path, version: int
) -> None:
    """``lake.table_version``: a table older readers understand, read back by Spark and by hudi-rs."""
    spec = _spec(tmp_path, f"v{version}", table_version=version)
    _write(spark, spec, [(1, None, "a", 1, False), (2, None, "b", 1, False)], WriteOperation.BULK_INSERT)
    _write(spark, spec, [(1, None, "a2", 2, False), (2, None, None, 2, True)])

    properties = (tmp_path / f"v{version}" / ".hoodie" / "hoodie.properties").read_text()
    assert f"hoodie.table.version={version}\n" in properties
    assert _rows(spark, spec) == [("", 1, "a2", 2)]
    second = second_reader_rows(spec.base_path, ["id", "name", "lsn"])
    assert [tuple(r.values()) for r in second] == [(1, "a2", 2)]


def _footers(base: Path, endings: list[str] | None = None) -> list[tuple[str, frozenset[bytes]]]:
    """Per data file of the table at ``base`` (whose name ends with one of ``endings``, if given): its
    first column's compression and its footer's keys."""
    import pyarrow.parquet as pq

    files = [f for f in base.rglob("*.parquet") if ".hoodie" not in f.parts]
    assert files
    files = [f for f in files if endings is None or f.name.endswith(tuple(endings))]
    metadata = [pq.ParquetFile(f).metadata for f in files]
    return [(m.row_group(0).column(0).compression, frozenset(m.metadata or {})) for m in metadata]


def _codecs(base: Path) -> set[str]:
    """The compression codec of the first column of every data file of the table at ``base``."""
    return {codec for codec, _ in _footers(base)}


_BLOOM_FILTER = b"org.apache.hudi.bloomfilter"


def test_base_files_are_zstd_and_a_bucket_tables_carry_no_bloom_filter(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Bootstrap, upserts and compaction write zstd base files (Hudi 1.1's default is gzip); a bucket
    table's compactions write no key bloom filter (its index reads none; Hudi's bulk-insert row writer
    writes one whatever the setting), a bloom-index table's files all carry one; Spark, hudi-rs and
    Trino (the module's fixture) read both."""
    bucket = _spec(
        tmp_path, "bucket_zstd", table_type=TableType.MERGE_ON_READ, index=IndexType.BUCKET,
        compaction=CompactionSpec(inline=False, max_delta_commits=1),
    )  # fmt: skip
    bloom = _spec(tmp_path, "bloom_zstd")
    for table in (bucket, bloom):
        _write(spark, table, [(1, None, "a", 0, False), (2, None, "b", 0, False)], WriteOperation.BULK_INSERT)
        _write(spark, table, [(2, None, "b2", 5, False), (3, None, "c", 5, False)])
    compactions = execute_compactions(spark, bucket, plan=PlanNow.EVERY_FILE_GROUP)
    assert compactions, "no plan was executed"

    bucket_files, bloom_files = _footers(tmp_path / "bucket_zstd"), _footers(tmp_path / "bloom_zstd")
    compacted = _footers(tmp_path / "bucket_zstd", [f"_{instant}.parquet" for instant in compactions])
    assert compacted, "the compaction wrote no base file"
    assert {codec for codec, _ in bucket_files + bloom_files} == {"ZSTD"}
    assert not [keys for _, keys in compacted if _BLOOM_FILTER in keys], "a compaction wrote a bloom filter"
    assert all(_BLOOM_FILTER in keys for _, keys in bloom_files), "a bloom-index table wrote no bloom filter"
    expected = [(1, "a", 0), (2, "b2", 5), (3, "c", 5)]
    for table in (bucket, bloom):
        assert _rows(spark, table) == [("", *row) for row in expected]
        second = second_reader_rows(table.base_path, ["id", "name", "lsn"])
        assert sorted((r["id"], r["name"], r["lsn"]) for r in second) == expected


def test_passed_through_options_reach_the_files(spark: SparkSession, tmp_path: Path) -> None:
    plain = _spec(tmp_path, "plain")
    spec = _spec(tmp_path, "snappy", extra_options=(("hoodie.parquet.compression.codec", "snappy"),))
    for table in (plain, spec):
        _write(spark, table, [(1, "eu", "a", 0, False), (2, "us", "b", 0, False)], WriteOperation.BULK_INSERT)
        _write(spark, table, [(2, "us", "b2", 5, False)])

    assert _codecs(tmp_path / "snappy") == {"SNAPPY"}
    assert _codecs(tmp_path / "plain") == {"ZSTD"}
    assert _rows(spark, spec) == [("", 1, "a", 0), ("", 2, "b2", 5)]
    assert sorted(second_reader_rows(spec.base_path, ["id", "name"]), key=lambda r: r["id"]) == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b2"},
    ]
