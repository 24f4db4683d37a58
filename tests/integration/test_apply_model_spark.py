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
A few examples in CI (each is two Hudi commits).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from support.change_model import PG_TOPIC, PG_VALUE_ID, SCHEMAS, Emitter, Source, merge_batch, workloads

from cdc_lake.apply.decoding import BadMessage, Decoded, DecodedChange, DecodeSettings, decode_messages
from cdc_lake.apply.frame import (
    LOOKUPS_COLUMN,
    MISSING_COLUMN,
    fill_from_lake,
    lake_frame,
    latest_frame,
    one_row_per_key,
)
from cdc_lake.decode.schema import TypedSchemas
from cdc_lake.hudi.options import HudiTableSpec, WriteOperation
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.columns import DELETED_COLUMN, ORDERING_COLUMN, SOFT_DELETED_COLUMN
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


@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_spark_and_hudi_merge_as_the_model_does(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    workload = data.draw(workloads("postgres"), label="workload")
    source: Source = workload.source
    emitter = workload.emitter
    writer = WriterColumns.of(TypedSchemas(SCHEMAS, {}).get_schema(PG_VALUE_ID))
    columns = merge_columns(None, writer.struct).columns
    base_path = str(Path(tmp_path_factory.mktemp("model")) / "t")
    spec = HudiTableSpec(table_name="model_t", base_path=base_path, record_key_fields=("id",),
                         ordering_field=ORDERING_COLUMN)
    ends = {p: len(log) for p, log in emitter.log.items()}
    cuts = {p: data.draw(st.integers(0, end), label=f"cut p{p}") for p, end in ends.items()}
    expected: dict[int, tuple[dict[str, object], str]] = {}
    exists = False
    for ranges in ({p: (0, c) for p, c in cuts.items()}, {p: (c, ends[p]) for p, c in cuts.items()}):
        changes = _decoded(emitter, ranges)
        if not changes:
            continue
        expected = merge_batch(changes, expected, exists=exists)
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
        assert sorted(rows.collect()) == sorted(on_driver.collect()), "the Spark and driver paths differ"
        unique = one_row_per_key(columns, ("id",), stored)
        write_batch(spark, spec, rows, WriteOperation.UPSERT, {}, unique_keys=unique)
        exists = True
        stored = read_table(spark, base_path)
        assert DELETED_COLUMN not in stored.columns or stored.where(f"`{DELETED_COLUMN}`").count() == 0
        lake = {
            r["id"]: ({"id": r["id"], "qty": r["qty"], "note": r["note"]}, r[ORDERING_COLUMN])
            for r in stored.collect()
        }
        assert stored.count() == len(lake), "a key is in the lake twice"
        assert lake == expected, f"Spark+Hudi {lake}\nmodel {expected}\nsource {source.rows}"


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
