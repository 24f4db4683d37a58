"""Every engine of the stack to Hudi through Debezium and the applier: every mapped type, moves, deletes,
re-inserts, and (Postgres) TOAST.

One workload runs for each engine's every-type table (support.engines.ApplyTable): inserts, updates of
values and of the partition column (the row must move, not duplicate), two updates of one key, deletes,
re-inserts of deleted keys, and new rows updated right away (for Postgres the TOASTed value is then only
in the same batch's insert).  Batches are capped small so the changes span many commits.  Table setups
are per case: Postgres with the defaults (tier 0); MariaDB COPY_ON_WRITE with GLOBAL_BLOOM and hard
deletes, and MERGE_ON_READ (inline compaction every two delta commits) with the record-level index and
soft deletes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from support.apply import (
    Capture,
    assert_lake_matches,
    config_dict,
    lake_rows,
    mariadb_capture,
    postgres_capture,
    record_catching_up,
)
from support.common import write_and_load
from support.engines import MARIADB, POSTGRES, StackEngine

from cdc_lake.apply.runner import ApplyRunner, apply_once
from cdc_lake.config import Config
from cdc_lake.decode.types import UNAVAILABLE_PLACEHOLDER
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.lake.commit_metadata import OFFSETS_KEY, TOPIC_KEY
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1200)]

# Every update must change the row: MySQL/MariaDB log no event for an update that changes nothing.
NEXT_REGION = "case region when 'eu' then 'us' when 'us' then 'apac' else 'eu' end"
SETUPS: dict[str, dict[str, Any]] = {
    "defaults": {"table": {"tier": 0}, "apply": {"batch_max_events": 40}},
    "cow-bloom-hard": {
        "lake": {"table_type": "COPY_ON_WRITE", "index": "GLOBAL_BLOOM"},
        "apply": {"batch_max_events": 35},
    },
    "mor-rli-soft": {
        "lake": {
            "table_type": "MERGE_ON_READ",
            "index": "RECORD_INDEX",
            "soft_deletes": True,
            "compaction": {"inline": True, "max_delta_commits": 2},
        },
        "apply": {"batch_max_events": 35},
    },
}
CASES = [
    pytest.param(POSTGRES, "defaults", id="postgres"),
    pytest.param(MARIADB, "cow-bloom-hard", id="mariadb-cow-bloom-hard"),
    pytest.param(MARIADB, "mor-rli-soft", id="mariadb-mor-rli-soft"),
]


@pytest.fixture
def capture(request: pytest.FixtureRequest, local_stack: LocalStack) -> Iterator[Capture]:
    engine: StackEngine = request.node.callspec.params["case_engine"]
    start = postgres_capture if engine is POSTGRES else mariadb_capture
    with start(local_stack, engine.apply_table.ddl) as captured:
        yield captured


def _insert(engine: StackEngine, capture: Capture, rows: list[tuple[object, ...]]) -> None:
    table = engine.quoted(capture.schema, capture.table)
    columns = engine.apply_table.columns
    placeholders = ", ".join(["%s"] * len(rows[0]))
    capture.execute(*[(f"insert into {table} ({columns}) values ({placeholders})", row) for row in rows])


def _apply(spark: SparkSession, config: Config) -> None:
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config)
        outcomes = apply_once(runner, select_targets(config), workers=2)
    assert [o.error for o in outcomes] == [None]


@pytest.mark.parametrize(("case_engine", "setup"), CASES)
def test_changes_end_equal_in_the_lake(
    spark: SparkSession,
    capture: Capture,
    local_stack: LocalStack,
    tmp_path: Path,
    case_engine: StackEngine,
    setup: str,
) -> None:
    engine, kind = case_engine, case_engine.apply_table
    rng = random.Random(7)
    settings = SETUPS[setup]
    soft = bool(settings.get("lake", {}).get("soft_deletes"))
    config = write_and_load(
        tmp_path / "cdc-lake.yaml",
        config_dict(
            local_stack,
            [capture],
            str(tmp_path / "lake"),
            f"sqlite:///{tmp_path}/state.db",
            tables={capture.qualified_name: {**settings.get("table", {}), "partition_by": ["region"]}},
            lake=settings.get("lake"),
            apply=settings["apply"],
        ),
    )
    record_catching_up(config)
    base_path = config.lake.table_base_path(capture.qualified_name)

    _insert(engine, capture, [kind.row(key, rng, 0) for key in range(1, 121)])
    capture.wait_for(120)
    _apply(spark, config)
    assert_lake_matches(spark, capture, base_path, kind.json_columns, kind.naive_utc_columns)

    table = engine.quoted(capture.schema, capture.table)
    before = capture.end_offset()
    changes: list[str | tuple[str, list[object]]] = []
    # Updates that leave the TOASTed column unchanged (Postgres: Debezium sends its placeholder).
    changes += [
        (f"update {table} set amount = amount + 1, name = %s where id = %s", [f"upd-{k}", k])
        for k in range(3, 60, 3)
    ]
    # Partition value changes: the row must move, not duplicate.
    changes += [(f"update {table} set region = {NEXT_REGION} where id = %s", [k]) for k in range(1, 40, 4)]
    # Two updates of one key in a row; deletes; re-inserts of deleted keys.
    changes += [(f"update {table} set note = %s where id = %s", [f"first-{k}", k]) for k in (6, 9, 12)]
    changes += [(f"update {table} set note = %s where id = %s", [f"second-{k}", k]) for k in (6, 9, 12)]
    changes += [(f"delete from {table} where id = %s", [k]) for k in range(60, 75)]
    capture.execute(*changes)
    reinserted = (60, 63, 66, 70, 74)
    _insert(engine, capture, [kind.row(key, rng, 1) for key in reinserted])
    # New rows updated right away: the TOAST value is only in the same batch's insert.
    _insert(engine, capture, [kind.row(key, rng, 0) for key in range(200, 212)])
    capture.execute(
        *[
            (f"update {table} set flag = not coalesce(flag, false) where id = %s", [k])
            for k in range(200, 212)
        ]
    )
    expected_messages = 19 + 10 + 3 + 3 + 15 * 2 + 5 + 12 + 12
    capture.wait_for(before + expected_messages)
    _apply(spark, config)

    lake = assert_lake_matches(spark, capture, base_path, kind.json_columns, kind.naive_utc_columns, soft)
    if kind.toast_column is not None:
        assert not any(row[kind.toast_column] == UNAVAILABLE_PLACEHOLDER for row in lake)
    assert {row["_cdc_op"] for row in lake} >= {"c", "u"}
    if soft:
        flagged = [r for r in lake_rows(spark, base_path) if r["_cdc_deleted"]]
        assert sorted(r["id"] for r in flagged) == sorted(set(range(60, 75)) - set(reinserted))
        # A soft-deleted row keeps its last values (MariaDB's before image is complete).
        assert all(r["_cdc_op"] == "d" and r["name"] is not None for r in flagged if r["id"] % 5)
    else:
        assert not any(r["_cdc_deleted"] for r in lake)

    commit = latest_commit(spark, base_path)
    assert commit is not None
    assert commit.metadata[TOPIC_KEY] == capture.topic
    assert json.loads(commit.metadata[OFFSETS_KEY]) == {"0": capture.end_offset()}
    with StateStore.open(config.state_store.url) as store:
        info = store.require_table(capture.qualified_name)
        assert info.state is TableState.LIVE
        assert store.get_applied_offsets(capture.qualified_name) == {0: capture.end_offset()}
        assert store.last_commit_instant(capture.qualified_name) == commit.instant
        freshness = store.get_freshness(capture.qualified_name)
        assert freshness is not None and freshness.lag_messages == 0
        assert freshness.newest_source_ts_ms is not None
