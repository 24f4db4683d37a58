"""Batch cuts inside groups of events sharing one stream position, on each engine, end exact.

Issue 20 measured 94 of 150 rows missing after ``\\copy`` of 100 rows into a 50-row Postgres table, a
primary-key update of 3 rows and ``apply.batch_max_events: 7``: every row of one COPY heap page shares
one change LSN (and so do a key change's delete and create), and the re-send skip dropped the rest of
each group a batch ended in.  Here the same shape, smaller (40 rows loaded into 10, about 10 commits;
a bulk load: COPY on Postgres, one multi-row INSERT on MariaDB, whose rows share one GTID; primary-key
updates; a transaction deleting, re-inserting and updating one key) is applied in batches of 7, so
cuts fall inside every such group, and the lake must equal the source, read with Spark+Hudi and the
second reader.  The exhaustive sweep of cuts is ``tests/unit/apply/test_apply_model.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.apply import (
    Capture,
    assert_lake_matches,
    per_engine_capture,
    record_catching_up,
    workload_config,
)

from cdc_lake.apply.runner import ApplyRunner, TableOutcome
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.service import DEMO_DATABASE
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

capture = per_engine_capture()

SEEDED, LOADED, MOVED = 10, 40, 3
BATCH = 7


def _bulk_load(capture: Capture, first: int, count: int) -> None:
    """``count`` rows from key ``first`` in one statement: COPY (Postgres), a multi-row INSERT (MariaDB)."""
    if capture.engine == "postgres":
        table = f'"{capture.schema}"."{capture.table}"'
        statement = f"copy {table} (id, region, amount, note, big) from stdin"
        with (
            capture.stack.postgres_primary.connect(DEMO_DATABASE) as conn,
            conn.cursor() as cur,
            cur.copy(statement) as copy,  # type: ignore[arg-type]
        ):
            for key in range(first, first + count):
                copy.write_row((key, ("eu", "us")[key % 2], f"{key}.25", f"c{key}", f"big-{key}"))
        return
    table = f"`{capture.schema}`.`{capture.table}`"
    keys = range(first, first + count)
    values = [v for key in keys for v in (key, ("eu", "us")[key % 2], f"{key}.25", f"c{key}", f"big-{key}")]
    placeholders = ", ".join(["(%s, %s, %s, %s, %s)"] * count)
    capture.execute((f"insert into {table} values {placeholders}", values))


def test_cuts_inside_shared_positions_lose_nothing(
    spark: SparkSession, capture: Capture, local_stack: LocalStack, tmp_path: Path
) -> None:
    config = workload_config(tmp_path / "cdc-lake.yaml", local_stack, capture, batch_max_events=BATCH)
    record_catching_up(config)
    quote = '"' if capture.engine == "postgres" else "`"
    table = f"{quote}{capture.schema}{quote}.{quote}{capture.table}{quote}"
    _bulk_load(capture, 1, SEEDED)
    _bulk_load(capture, SEEDED + 1, LOADED)
    capture.execute(
        f"update {table} set id = id + 1000000 where id between 20 and {19 + MOVED}",
        f"update {table} set note = 'moved' where id > 1000000",
    )
    if capture.engine == "postgres":
        capture.execute(
            "begin",
            f"delete from {table} where id = 7",
            f"insert into {table} values (7, 'us', 7.5, 'again', 'big-7')",
            f"update {table} set amount = 8.5 where id = 7",
            "commit",
        )
    else:
        capture.execute(
            "start transaction",
            f"delete from {table} where id = 7",
            f"insert into {table} values (7, 'us', 7.5, 'again', 'big-7')",
            f"update {table} set amount = 8.5 where id = 7",
            "commit",
        )
    # Messages: the rows, 3 key changes (delete, tombstone, create) and their updates, the transaction
    # (delete, tombstone, insert, update).
    expected = SEEDED + LOADED + 3 * MOVED + MOVED + 4
    capture.wait_for(expected)

    outcomes: list[TableOutcome] = []
    (target,) = select_targets(config)
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config)
        while True:
            outcomes.append(runner.step(target))
            assert outcomes[-1].error is None, outcomes[-1].error
            if not outcomes[-1].offsets:
                break

    assert sum(o.batches for o in outcomes) >= expected // BATCH
    rows = assert_lake_matches(spark, capture, config.lake.table_base_path(capture.qualified_name))
    assert len(rows) == SEEDED + LOADED
