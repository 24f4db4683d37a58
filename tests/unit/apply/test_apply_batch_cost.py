"""The batch's fixed cost: timeline reads per commit, small batches decoded in one Spark job and merged
per key on the driver.

Stand-ins replace the Spark pieces (a list-backed RDD, a DataFrame writer that records the save), so
what is checked is how often the timeline is read and which RDD calls a batch makes; the Spark path
itself runs in ``tests/integration/test_apply_behaviors.py`` and ``benchmarks/batch_cost_bench.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from pyspark.sql.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from cdc_lake.apply import frame, table_applier
from cdc_lake.apply.decoding import BadMessage, BatchSummary, Decoded, DecodedChange
from cdc_lake.exceptions import LakeWriteError
from cdc_lake.hudi import writer
from cdc_lake.hudi.options import HudiTableSpec, WriteOperation
from cdc_lake.hudi.timeline import CommitInfo


class _Save:
    """``df.write.format(..).options(..).mode(..).save(path)``: records the save."""

    def __init__(self) -> None:
        self.saved: list[str] = []
        self.options_given: dict[str, str] = {}

    def format(self, _: str) -> _Save:
        return self

    def options(self, **options: str) -> _Save:
        self.options_given.update(options)
        return self

    def mode(self, _: str) -> _Save:
        return self

    def save(self, path: str) -> None:
        self.saved.append(path)


class _Frame:
    def __init__(self) -> None:
        self.write = _Save()
        self.schema = StructType([StructField("id", IntegerType())])

    def withColumnsRenamed(self, _: dict[str, str]) -> _Frame:
        return self


def _commit(instant: str) -> CommitInfo:
    return CommitInfo(instant, "commit", instant, "UPSERT")


SPEC = HudiTableSpec(table_name="t", base_path="/lake/t", record_key_fields=("id",), ordering_field="o")


def _timeline(monkeypatch: pytest.MonkeyPatch, answers: list[CommitInfo | None]) -> list[str]:
    reads: list[str] = []

    def latest_commit(spark: Any, base_path: str) -> CommitInfo | None:
        reads.append(base_path)
        return answers[len(reads) - 1]

    monkeypatch.setattr(writer, "latest_commit", latest_commit)
    return reads


def test_a_write_given_the_latest_instant_reads_the_timeline_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _timeline(monkeypatch, [_commit("002")])
    frame = _Frame()
    instant = writer.write_batch(None, SPEC, frame, WriteOperation.UPSERT, {}, previous="001")  # type: ignore[arg-type]
    assert (instant, frame.write.saved, reads) == ("002", ["/lake/t"], ["/lake/t"])


@pytest.mark.parametrize(("unique", "combine"), [(True, "false"), (False, "true")])
def test_a_write_of_one_row_per_key_skips_hudis_combine(
    monkeypatch: pytest.MonkeyPatch, unique: bool, combine: str
) -> None:
    _timeline(monkeypatch, [_commit("002")])
    frame = _Frame()
    writer.write_batch(None, SPEC, frame, WriteOperation.UPSERT, {}, previous="001", unique_keys=unique)  # type: ignore[arg-type]
    assert frame.write.options_given["hoodie.combine.before.upsert"] == combine


def test_a_write_that_left_the_given_instant_latest_completed_no_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _timeline(monkeypatch, [_commit("001")])
    with pytest.raises(LakeWriteError, match=r"table 't' at /lake/t.*completed no commit"):
        writer.write_batch(None, SPEC, _Frame(), WriteOperation.UPSERT, {}, previous="001")  # type: ignore[arg-type]


def test_a_first_write_given_no_instant_reads_the_timeline_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _timeline(monkeypatch, [_commit("001")])
    instant = writer.write_batch(None, SPEC, _Frame(), WriteOperation.UPSERT, {}, previous=None)  # type: ignore[arg-type]
    assert (instant, len(reads)) == ("001", 1)


def test_a_write_not_told_the_latest_instant_reads_it_before(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _timeline(monkeypatch, [_commit("001"), _commit("002")])
    instant = writer.write_batch(None, SPEC, _Frame(), WriteOperation.UPSERT, {})  # type: ignore[arg-type]
    assert (instant, len(reads)) == ("002", 2)


class _Rdd:
    """A list-backed stand-in for the decoded RDD that counts Spark jobs and persists."""

    def __init__(self, records: list[Decoded], log: list[str]) -> None:
        self.records = records
        self.log = log

    def mapPartitions(self, f: Callable[[Iterable[Decoded]], Iterator[Any]]) -> _Rdd:
        return _Rdd(list(f(self.records)), self.log)

    def filter(self, f: Callable[[Decoded], bool]) -> _Rdd:
        return _Rdd([r for r in self.records if f(r)], self.log)

    def collect(self) -> list[Any]:
        self.log.append("job")
        return list(self.records)

    def persist(self, _: Any) -> _Rdd:
        self.log.append("persist")
        return self

    def unpersist(self) -> _Rdd:
        self.log.append("unpersist")
        return self


def _change(partition: int, offset: int) -> DecodedChange:
    return DecodedChange(partition, offset, "u", 2, 1, f"{offset:020d}", 1, {"id": offset}, (), None)


RECORDS: list[Decoded] = [_change(0, 0), _change(0, 1), BadMessage(0, 2, "bad", None, None), _change(1, 0)]


def test_a_small_batch_is_decoded_and_summarised_in_one_job_without_persisting() -> None:
    log: list[str] = []
    with table_applier.decoded_batch(_Rdd(RECORDS, log), offsets=4) as (summary, records):  # type: ignore[arg-type]
        assert records == RECORDS
        assert summary.changes == 3 and summary.first_bad[0].offset == 2
    assert log == ["job"]


def test_a_large_batch_stays_on_the_executors_persisted_until_written() -> None:
    log: list[str] = []
    rdd = _Rdd(RECORDS, log)
    with table_applier.decoded_batch(rdd, offsets=table_applier.DRIVER_BATCH + 1) as (summary, records):  # type: ignore[arg-type]
        assert records is rdd and summary.changes == 3
        assert log == ["persist", "job"]
    assert log == ["persist", "job", "unpersist"]


@pytest.mark.parametrize("offsets", [4, table_applier.DRIVER_BATCH + 1])
def test_the_summary_before_a_cut_is_the_same_either_way(offsets: int) -> None:
    with table_applier.decoded_batch(_Rdd(RECORDS, []), offsets=offsets) as (_, records):  # type: ignore[arg-type]
        before = table_applier.summary_before(records, {0: 1})
    assert isinstance(before, BatchSummary) and before.changes == 2


class _Spark:
    """Records ``createDataFrame``: the rows a batch on the driver hands to Spark."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def createDataFrame(self, rows: list[tuple[Any, ...]], schema: StructType, **_: Any) -> StructType:
        self.rows.extend(rows)
        return schema


def _pg(offset: int, op: str, row: dict[str, Any], unavailable: tuple[str, ...] = ()) -> DecodedChange:
    return DecodedChange(0, offset, op, 2, 1, f"{offset:020d}", 0, row, unavailable, str(offset))


def test_a_small_batch_enters_spark_one_row_per_key_merged_on_the_driver() -> None:
    """Key 1's unchanged TOASTed note comes from its earlier change; key 2's from its stored row (the
    lookup); the change at the cut and the bad message stay out.  No Spark job, no Window."""
    spark = _Spark()
    records: list[Decoded] = [
        _pg(0, "c", {"id": 1, "qty": 1, "note": "a"}),
        _pg(1, "u", {"id": 2, "qty": 2, "note": None}, ("note",)),
        _pg(2, "u", {"id": 1, "qty": 3, "note": None}, ("note",)),
        _pg(3, "u", {"id": 1, "qty": 4, "note": "z"}),
        BadMessage(0, 3, "bad", None, None),
    ]
    columns = StructType([StructField(name, IntegerType()) for name in ("id", "qty")])
    columns.add(StructField("note", StringType()))
    schema = frame.latest_frame(spark, records, columns, {0: 3}, ("id",), ["note"], 0)  # type: ignore[arg-type]
    assert isinstance(schema, StructType)
    named = [dict(zip(schema.fieldNames(), row, strict=True)) for row in spark.rows]
    picked = [(r["id"], r["qty"], r["note"], r[frame.MISSING_COLUMN], r[frame.LOOKUPS_COLUMN]) for r in named]
    assert picked == [(1, 3, "a", [], None), (2, 2, None, ["note"], [(2,)])]


@pytest.mark.parametrize(
    ("key_type", "stored", "unique"),
    [(IntegerType(), None, True), (StringType(), None, True), (IntegerType(), "lake", False),
     (DoubleType(), None, False), (FloatType(), None, False), (DecimalType(20, 2), None, False)],
)
def test_hudi_combines_the_rows_only_where_a_key_may_repeat(key_type: Any, stored: Any, unique: bool) -> None:
    """The fill joins the lake, and the driver's merge keeps two NaN keys apart: Hudi combines those."""
    columns = StructType([StructField("id", key_type), StructField("note", StringType())])
    assert frame.one_row_per_key(columns, ("id",), stored) is unique
