"""The in-memory merge of the property suite against real Spark and Hudi, on generated batches.

``tests/unit/apply/test_apply_model.py`` runs the production decode path and the per-key merge of a batch on
the driver (:func:`cdc_lake.apply.last_change.last_changes`: last change by ordering value, Kafka
partition and offset; unavailable columns filled from the key's earlier changes, a moved row's from its
old key, then from the stored row) in memory, and models Hudi's event-time merge
(:func:`support.change_model.hudi_merge`).  Here generated Postgres workloads (``COPY`` pages, key
changes, TOAST placeholders, deletes, re-sends) are decoded the same way and cut into two batches; each
batch's rows are built by both paths of :func:`cdc_lake.apply.frame.latest_frame` (the Spark steps of a
large batch, and the driver's merge as a local DataFrame), which must give the same rows, and written
into a Hudi table; after each commit the table must hold exactly the model's rows and ordering values.
A few examples in CI (each is two Hudi commits).  The same on a ``double precision`` key with NaN,
``0.0`` and ``-0.0`` among its values (:func:`support.change_model.float_keys`), generated and in the
two shapes Python's and Spark's equality got wrong (a NaN key deleted, inserted again and moved in one
batch; a key changed from ``0.0`` to ``-0.0``): both paths must compare keys as Hudi's record key does.
On the tier-0 layout (the product's default, :data:`cdc_lake.config.lake.TIER0_LAYOUT`) the compaction plan
the first commit left runs after the batches, between them, or beside the second batch's write (another
thread, as ``run``'s table-service thread does); the snapshot must equal the model after every commit
either way.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Row, SparkSession
from support.change_model import (
    INT_KEYS,
    PG_TOPIC,
    SCHEMAS,
    Change,
    Emitter,
    KeyDomain,
    Source,
    Stored,
    float_keys,
    merge_batch,
    workloads,
)
from support.trino_reader import assert_trino_reads_as_spark

from cdc_lake.apply.decoding import BadMessage, Decoded, DecodedChange, DecodeSettings, decode_messages
from cdc_lake.apply.frame import (
    LOOKUPS_COLUMN,
    MISSING_COLUMN,
    fill_from_lake,
    lake_frame,
    latest_frame,
    one_row_per_key,
)
from cdc_lake.config.lake import TIER0_LAYOUT
from cdc_lake.decode.schema import TypedSchemas
from cdc_lake.hudi.options import HudiTableSpec, WriteOperation
from cdc_lake.hudi.services import execute_compactions, service_backlog
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.columns import DELETED_COLUMN, ORDERING_COLUMN, SOFT_DELETED_COLUMN
from cdc_lake.lake.format import PlanNow
from cdc_lake.lake.layout import CompactionSpec, IndexType, TableType
from cdc_lake.lake.schema import merge_columns
from cdc_lake.lake.schema_change import WriterColumns

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def _decoded(emitter: Emitter, ranges: dict[int, tuple[int, int]]) -> list[DecodedChange]:
    settings_ = DecodeSettings(PG_TOPIC, SCHEMAS, None, False)
    records = []
    for partition, (start, end) in ranges.items():
        raw = [m.raw for m in emitter.log[partition][start:end]]
        records.extend(decode_messages(settings_, raw))
    assert not any(isinstance(r, BadMessage) for r in records)
    return [r for r in records if isinstance(r, DecodedChange)]


TIER0 = {
    "table_type": TableType(TIER0_LAYOUT.table_type),
    "index": IndexType(TIER0_LAYOUT.index),
    "compaction": CompactionSpec(
        inline=False, max_delta_commits=1, plan_io_mb=TIER0_LAYOUT.compaction.plan_io_mb
    ),
}
"""The tier-0 default layout (MERGE_ON_READ + BUCKET, compaction outside the writes, its plans' IO budget),
planning after every delta commit, so a batch may be written over a plan the previous one left pending."""

AFTER, BETWEEN, BESIDE = "after", "between", "beside"
"""Where a tier-0 example executes the plan its first commit left (:func:`_merge_as_the_model`)."""


@pytest.mark.parametrize(
    ("layout", "compaction"),
    [({}, AFTER), (TIER0, AFTER), (TIER0, BETWEEN), (TIER0, BESIDE)],
    ids=["copy-on-write", "tier0", "tier0-compacted-between", "tier0-compacted-beside"],
)
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_spark_and_hudi_merge_as_the_model_does(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    layout: dict[str, Any],
    compaction: str,
) -> None:
    _merge_generated(spark, tmp_path_factory, data, INT_KEYS, layout, compaction)


@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_spark_and_hudi_merge_float_keys_as_the_model_does(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    _merge_generated(spark, tmp_path_factory, data, float_keys("postgres"))


def _merge_generated(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    keys: KeyDomain,
    layout: dict[str, Any] | None = None,
    compaction: str = AFTER,
) -> None:
    workload = data.draw(workloads("postgres", keys), label="workload")
    ends = {p: len(log) for p, log in workload.emitter.log.items()}
    cuts = {p: data.draw(st.integers(0, end), label=f"cut p{p}") for p, end in ends.items()}
    batches = [{p: (0, c) for p, c in cuts.items()}, {p: (c, ends[p]) for p, c in cuts.items()}]
    if compaction != AFTER:  # three batches: the third is written over (or beside) the second's plan
        more = {p: data.draw(st.integers(c, ends[p]), label=f"second cut p{p}") for p, c in cuts.items()}
        batches[1:] = [{p: (c, more[p]) for p, c in cuts.items()}, {p: (m, ends[p]) for p, m in more.items()}]
    base_path = str(Path(tmp_path_factory.mktemp("model")) / "t")
    _merge_as_the_model(
        spark, base_path, workload.source, workload.emitter, batches, layout or {}, compaction
    )


@pytest.mark.parametrize("compaction", [BETWEEN, BESIDE])
def test_a_plan_executed_between_or_beside_the_writes_keeps_the_model(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, compaction: str
) -> None:
    """Eight rows inserted, then updated twice, one batch each, on the tier-0 layout: the second batch's
    logs leave a plan, executed before the third batch's write or in a thread beside it; the snapshot
    equals the model after every commit, and so does the read-optimized view once every plan ran.  (The
    generated examples above may draw batches that leave no plan; this one must execute one.)"""
    source, emitter = Source(), Emitter("postgres")
    batches: list[dict[int, tuple[int, int]]] = []
    for qty in range(3):
        step = [Change("c" if qty == 0 else "u", key, {"id": key, "qty": qty, "note": f"n{key}"})
                for key in range(1, 9)]  # fmt: skip
        starts = {p: len(log) for p, log in emitter.log.items()}
        before = {k: dict(v) for k, v in source.rows.items()}
        source.commit(step)
        emitter.emit(step, before)
        batches.append({p: (starts.get(p, 0), len(log)) for p, log in emitter.log.items()})
    executed: list[str] = []
    base_path = str(Path(tmp_path_factory.mktemp("compacted")) / "t")

    lake = _merge_as_the_model(spark, base_path, source, emitter, batches, TIER0, compaction, executed)

    assert executed, "no plan was executed between or beside the writes"
    assert {key: row["qty"] for key, (row, _) in lake.items()} == dict.fromkeys(range(1, 9), 2)


_NAN_KEY, _ZERO, _NEGATIVE_ZERO, _OTHER = 1, 2, 3, 4
"""Keys of :func:`float_keys` ("postgres"): NaN, ``0.0``, ``-0.0``, ``1.5``."""


def _float_key_shape(shape: str) -> tuple[Source, Emitter, list[dict[int, tuple[int, int]]]]:
    """A first transaction, then the rest in a second batch."""
    keys = float_keys("postgres")
    if shape == "nan":
        old = {"id": keys.values[_NAN_KEY], "qty": 0, "note": "toasted:old"}
        new = {**old, "qty": 1, "note": "toasted:new"}
        moved = Change("c", _OTHER, {**new, "id": keys.values[_OTHER]}, moved_from=_NAN_KEY,
                       toast_unchanged=True)
        steps = [[Change("c", _NAN_KEY, old)], [Change("d", _NAN_KEY, None)], [Change("c", _NAN_KEY, new)],
                 [moved]]
    else:
        row = {"id": keys.values[_ZERO], "qty": 0, "note": "toasted:0"}
        moved = Change("c", _NEGATIVE_ZERO, {**row, "id": keys.values[_NEGATIVE_ZERO]}, moved_from=_ZERO,
                       toast_unchanged=True)
        steps = [[Change("c", _ZERO, row)], [moved]]
    source, emitter = Source(), Emitter("postgres", keys=keys)
    first: dict[int, int] = {}
    for number, step in enumerate(steps):
        before = {k: dict(v) for k, v in source.rows.items()}
        source.commit(step)
        emitter.emit(step, before)
        if number == 0:
            first = {p: len(log) for p, log in emitter.log.items()}
    ends = {p: len(log) for p, log in emitter.log.items()}
    batches = [{p: (0, c) for p, c in first.items()}, {p: (c, ends[p]) for p, c in first.items()}]
    return source, emitter, batches


@pytest.mark.parametrize("shape", ["nan", "zero"])
def test_float_keys_merge_as_hudis_record_key_tells_them_apart(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, shape: str
) -> None:
    """``nan``: a NaN key with a TOASTed note in the lake, then deleted, inserted again and moved to 1.5 in
    one batch: 1.5 takes the re-inserted row's note.  ``zero``: key ``0.0`` moved to ``-0.0``: the lake
    holds only ``-0.0``, with the note of ``0.0``'s stored row.  Spark's equality takes ``-0.0`` for
    ``0.0``: before, the Spark steps kept the create only and ``0.0``'s row stayed."""
    source, emitter, batches = _float_key_shape(shape)
    base_path = str(Path(tmp_path_factory.mktemp("float_keys")) / "t")
    lake = _merge_as_the_model(spark, base_path, source, emitter, batches)
    expected = {_OTHER: "toasted:new"} if shape == "nan" else {_NEGATIVE_ZERO: "toasted:0"}
    assert {key: row["note"] for key, (row, _) in lake.items()} == expected


def test_a_moved_row_never_takes_its_values_from_a_chunk_row_read_after_the_move(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Key 2 with a TOASTed note in the lake, moved to 6 (the note unchanged), key 2 inserted again without
    a note, then a Postgres incremental snapshot chunk of every row; one batch.  Key 6 keeps key 2's note
    on both paths: a chunk row at the snapshot position takes its place after the changes of its key
    Kafka holds before it (before, the Spark steps and the driver gave key 6 the null note of key 2's
    chunk row read after the move).  The unit suite holds the chunk read before the move too."""
    row = {"id": 2, "qty": 0, "note": "toasted:2"}
    move = [Change("c", 6, {**row, "id": 6}, moved_from=2, toast_unchanged=True)]
    again = [Change("c", 2, {"id": 2, "qty": 1, "note": None})]
    source, emitter = Source(), Emitter("postgres")
    first: dict[int, int] = {}
    for step in [[Change("c", 2, row)], move, again, None]:
        if step is None:
            emitter.read_chunk({k: dict(v) for k, v in source.rows.items()}, 3)
        else:
            before = {k: dict(v) for k, v in source.rows.items()}
            source.commit(step)
            emitter.emit(step, before)
        first = first or {p: len(log) for p, log in emitter.log.items()}
    ends = {p: len(log) for p, log in emitter.log.items()}
    batches = [{p: (0, c) for p, c in first.items()}, {p: (c, ends[p]) for p, c in first.items()}]
    base_path = str(Path(tmp_path_factory.mktemp("chunk")) / "t")
    lake = _merge_as_the_model(spark, base_path, source, emitter, batches)
    assert {key: row["note"] for key, (row, _) in lake.items()} == {2: None, 6: "toasted:2"}


def _comparable(rows: list[Row]) -> list[str]:
    """Rows as text, so that two NaNs (equal to nothing) and the two zeros (equal) compare as Hudi's
    record key does."""
    return sorted(repr(tuple(row)) for row in rows)


def _merge_as_the_model(
    spark: SparkSession,
    base_path: str,
    source: Source,
    emitter: Emitter,
    batches: list[dict[int, tuple[int, int]]],
    layout: dict[str, Any] | None = None,
    compaction: str = AFTER,
    executed: list[str] | None = None,
) -> Stored:
    """Each batch through the model, both paths of the frame and a Hudi upsert; the table after the last.

    ``layout`` (HudiTableSpec's table type, index, compaction; default COPY_ON_WRITE + GLOBAL_BLOOM): on a
    MERGE_ON_READ table whose writes only plan compaction, the snapshot equals the model after every
    commit whatever plans are pending, and after every plan is executed (one more planned over every
    file slice with logs) the read-optimized view, what Trino reads, equals it too.  ``compaction`` says
    where the pending plans run before that: ``BETWEEN`` the batches (the read-optimized view then equals
    the model too: a plan of ``plan_io_mb`` takes every file group here, each under 1 MB), ``BESIDE`` each
    later batch's write, in a thread, or only ``AFTER`` the batches.  The instants of the plans executed
    between or beside the writes are added to ``executed``."""
    keys = emitter.keys
    writer = WriterColumns.of(TypedSchemas(SCHEMAS, {}).get_schema(keys.pg_value_id))
    columns = merge_columns(None, writer.struct).columns
    spec = HudiTableSpec(table_name="model_t", base_path=base_path, record_key_fields=("id",),
                         ordering_field=ORDERING_COLUMN, **(layout or {}))
    expected: Stored = {}
    exists = False
    done = executed if executed is not None else []
    for ranges in batches:
        changes = _decoded(emitter, ranges)
        if not changes:
            continue
        service: _Beside | None = None
        if exists and compaction == BETWEEN:
            done += _compact_between(spark, spec, expected, keys)
        elif exists and compaction == BESIDE:
            service = _Beside(spark, spec)
        expected = merge_batch(changes, expected, exists=exists, keys=keys)
        fill = sorted({name for c in changes for name in c.unavailable})
        stored = read_table(spark, base_path) if fill and exists else None
        moves = sum(1 for c in changes if c.unavailable and (c.op == "c" or c.moved_from is not None))
        applied_at = dt.datetime.now(tz=dt.UTC)
        paths = []
        decoded: list[Decoded] = list(changes)
        for records in (spark.sparkContext.parallelize(decoded, 2), decoded):
            latest = latest_frame(spark, records, columns, {}, ("id",), fill, moves)
            if stored is not None:
                latest = fill_from_lake(latest, stored, ("id",), fill)
            paths.append(lake_frame(latest, columns, applied_at, soft_deletes=False))
        rows, on_driver = paths
        spark_rows, driver_rows = _comparable(rows.collect()), _comparable(on_driver.collect())
        assert spark_rows == driver_rows, "the Spark and driver paths differ"
        unique = one_row_per_key(columns, ("id",), stored)
        write_batch(spark, spec, rows, WriteOperation.UPSERT, {}, unique_keys=unique)
        exists = True
        stored = read_table(spark, base_path)
        assert DELETED_COLUMN not in stored.columns or stored.where(f"`{DELETED_COLUMN}`").count() == 0
        lake = _rows_by_key(stored.collect(), keys)
        assert lake == expected, f"Spark+Hudi {lake}\nmodel {expected}\nsource {source.rows}"
        if service is not None:
            done += service.join()
            assert _snapshot(spark, base_path, keys) == expected, "the snapshot after the compaction beside"
    if exists and spec.table_type is TableType.MERGE_ON_READ:
        execute_compactions(spark, spec, plan=PlanNow.EVERY_FILE_GROUP)
        assert service_backlog(spark, base_path).pending_plans == 0
        assert _read_optimized(spark, base_path, keys) == expected
    if exists:
        assert_trino_reads_as_spark(spark, base_path)
    return expected


def _rows_by_key(rows: list[Row], keys: KeyDomain) -> Stored:
    """Lake rows as the model holds them; fails on a key held twice."""
    held = {keys.key(r["id"]): ({"id": keys.values[keys.key(r["id"])], "qty": r["qty"], "note": r["note"]},
                                r[ORDERING_COLUMN]) for r in rows}  # fmt: skip
    assert len(rows) == len(held), f"a key is in the lake twice: {rows}"
    return held


def _snapshot(spark: SparkSession, base_path: str, keys: KeyDomain) -> Stored:
    return _rows_by_key(read_table(spark, base_path).collect(), keys)


def _read_optimized(spark: SparkSession, base_path: str, keys: KeyDomain) -> Stored:
    """What a read-optimized reader (Trino) sees: the base files only."""
    reader = spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")
    return _rows_by_key(reader.load(base_path).collect(), keys)


def _compact_between(
    spark: SparkSession, spec: HudiTableSpec, expected: Stored, keys: KeyDomain
) -> tuple[str, ...]:
    """Execute the plans the commits so far left; the base files then hold the model's rows (each file
    group is under 1 MB, so a plan within ``plan_io_mb`` takes every one with logs)."""
    instants = execute_compactions(spark, spec)
    backlog = service_backlog(spark, spec.base_path)
    assert backlog.pending_plans == 0 and backlog.uncompacted_since is None, backlog
    assert _read_optimized(spark, spec.base_path, keys) == expected
    assert _snapshot(spark, spec.base_path, keys) == expected
    return instants


class _Beside(threading.Thread):
    """The pending plans executed in a thread while the writer commits, as ``run``'s table-service thread
    does; :meth:`join` gives their instants or raises what the execution raised."""

    def __init__(self, spark: SparkSession, spec: HudiTableSpec) -> None:
        super().__init__(name="compaction-beside")
        self._spark, self._spec = spark, spec
        self._instants: tuple[str, ...] = ()
        self._failure: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self._instants = execute_compactions(self._spark, self._spec)
        except BaseException as exc:  # raised in the writer's thread by join
            self._failure = exc

    def join(self, timeout: float | None = None) -> tuple[str, ...]:  # type: ignore[override]
        super().join(timeout)
        if self._failure is not None:
            raise AssertionError(f"the compaction beside the write failed: {self._failure!r}")
        return self._instants


def test_a_moved_row_whose_old_key_the_lake_lacks_takes_its_own_stored_row(spark: SparkSession) -> None:
    # Issue 34 review 1: a bootstrap snapshot read key 2 after key 1 moved to it; the catch-up's create of
    # key 2 names key 1's stored row for its unchanged TOASTed note, and the lake never held key 1.
    latest = spark.createDataFrame(
        [
            (2, 5, None, ["note"], [(1,), (2,)]),  # moved from 1, not in the lake: its own (the snapshot's)
            (4, 6, None, ["note"], [(3,), (4,)]),  # moved from 3, which the lake holds: the old key's row
            (6, 7, None, ["note"], [(5,), (6,)]),  # moved from 5, lacking; its own row is soft-deleted: null
            (8, 8, None, ["note"], [(8,)]),  # not moved, absent from the lake: null
        ],
        f"id int, qty int, note string, {MISSING_COLUMN} array<string>, "
        f"{LOOKUPS_COLUMN} array<struct<id: int>>",
    )
    stored = spark.createDataFrame(
        [(2, 0, "toasted:2", False), (3, 0, "toasted:3", False), (4, 0, "stale:4", False),
         (6, 0, "deleted:6", True)],
        f"id int, qty int, note string, {SOFT_DELETED_COLUMN} boolean",
    )

    filled = fill_from_lake(latest, stored, ("id",), ["note"])

    notes = {r["id"]: r["note"] for r in filled.collect()}
    assert notes == {2: "toasted:2", 4: "toasted:3", 6: None, 8: None}, notes
