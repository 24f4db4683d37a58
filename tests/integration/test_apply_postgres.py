"""Postgres to Hudi through Debezium and the applier: every mapped type, TOAST, moves, deletes, re-inserts.

Batches are capped small so the changes span many commits and the in-batch and from-the-lake TOAST fills
both happen.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from apply_support import Capture, assert_lake_matches, config_dict, onboard, postgres_capture, write_config
from pyspark.sql import SparkSession

from cdc_lake.apply.runner import ApplyRunner, apply_once
from cdc_lake.config import Config
from cdc_lake.decode.types import UNAVAILABLE_PLACEHOLDER
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.lake.checkpoint import OFFSETS_KEY, TOPIC_KEY
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1200)]

DDL = """
create type {schema}.mood as enum ('happy', 'sad', 'meh');
create table {table} (
    id bigint primary key, region text not null, si smallint, i integer, bi bigint, r real,
    dp double precision, amount numeric(12, 2), free numeric, flag boolean, name varchar(40),
    code char(5), note text, big text, data bytea, d date, t time(6), ts timestamp(6), tstz timestamptz,
    tz timetz, dur interval, uid uuid, doc json, docb jsonb, x xml, mood {schema}.mood, tags text[],
    nums int[]
);
alter table {table} alter column big set storage external;
"""
COLUMNS = (
    "id, region, si, i, bi, r, dp, amount, free, flag, name, code, note, big, data, d, t, ts, tstz, tz, dur, "
    "uid, doc, docb, x, mood, tags, nums"
)
REGIONS = ("eu", "us", "apac")
# Every update must change the row: MySQL/MariaDB log no event for an update that changes nothing.
NEXT_REGION = "case region when 'eu' then 'us' when 'us' then 'apac' else 'eu' end"


def _big(key: int, version: int) -> str:
    """A text that Postgres stores out of line (TOAST, storage external): about 6 kB."""
    return "".join(f"{key:06d}-{version}-{i:04d}-toasted|" for i in range(300))


def _row(key: int, rng: random.Random, version: int = 0) -> tuple[object, ...]:
    """Values for every column; every fifth row leaves the nullable ones null."""
    if key % 5 == 0:
        return (key, rng.choice(REGIONS), *([None] * 26))
    return (
        key,
        rng.choice(REGIONS),
        rng.randint(-32768, 32767),
        rng.randint(-(2**31), 2**31 - 1),
        rng.randint(-(2**63), 2**63 - 1),
        rng.choice([1.5, -2.25, 0.1, 3.4e38]),
        rng.random() * 1e6,
        f"{rng.randint(-9999999999, 9999999999) / 100:.2f}",
        f"{rng.randint(-(10**12), 10**12)}.{rng.randint(0, 10**9):09d}",
        rng.random() < 0.5,
        f"name-{key}-{version}",
        f"c{key % 1000:03d}",
        "note with 'quotes' and ünïcode",
        _big(key, version) if key % 3 == 0 else "short",
        bytes([key % 256, 0, 255]),
        f"{1900 + key % 200}-02-28",
        f"{key % 24:02d}:{key % 60:02d}:59.123456",
        f"2024-03-{1 + key % 28:02d} 12:34:56.654321",
        f"2024-03-{1 + key % 28:02d} 12:34:56.5+02",
        f"{key % 24:02d}:15:00.25+05:30",
        f"{key % 30} days 04:05:06.789",
        f"a0eebc99-9c0b-4ef8-bb6d-{key:012d}",
        json.dumps({"k": key, "list": [1, 2]}),
        json.dumps({"nested": {"v": version}}),
        f"<r><k>{key}</k></r>",
        rng.choice(["happy", "sad", "meh"]),
        ["a", f"b{key}", "with,comma"],
        [key, -key, 0],
    )


def _insert(capture: Capture, rows: list[tuple[object, ...]]) -> None:
    table = f'"{capture.schema}"."{capture.table}"'
    placeholders = ", ".join(["%s"] * 28)
    capture.execute(*[(f"insert into {table} ({COLUMNS}) values ({placeholders})", row) for row in rows])


@pytest.fixture
def capture(local_stack: LocalStack) -> Iterator[Capture]:
    with postgres_capture(local_stack, DDL) as captured:
        yield captured


def _apply(spark: SparkSession, config: Config) -> None:
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config)
        outcomes = apply_once(runner, select_targets(config), workers=2)
    assert [o.error for o in outcomes] == [None]


def test_postgres_changes_end_equal_in_the_lake(
    spark: SparkSession, capture: Capture, local_stack: LocalStack, tmp_path: Path
) -> None:
    rng = random.Random(7)
    config = write_config(
        tmp_path / "cdc-lake.yaml",
        config_dict(
            local_stack,
            [capture],
            str(tmp_path / "lake"),
            f"sqlite:///{tmp_path}/state.db",
            tables={capture.qualified_name: {"tier": 0, "partition_by": ["region"]}},
            apply={"batch_max_events": 40},
        ),
    )
    onboard(config)
    base_path = config.lake.table_base_path(capture.qualified_name)
    json_columns = ("doc", "docb")

    _insert(capture, [_row(key, rng) for key in range(1, 121)])
    capture.wait_for(120)
    _apply(spark, config)
    assert_lake_matches(spark, capture, base_path, json_columns)

    table = f'"{capture.schema}"."{capture.table}"'
    before = capture.end_offset()
    changes: list[str | tuple[str, list[object]]] = []
    # Updates that leave the TOASTed column unchanged (Debezium sends its placeholder).
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
    _insert(capture, [_row(key, rng, version=1) for key in (60, 63, 66, 70, 74)])
    # New rows updated right away: the TOAST value is only in the same batch's insert.
    _insert(capture, [_row(key, rng) for key in range(200, 212)])
    capture.execute(
        *[
            (f"update {table} set flag = not coalesce(flag, false) where id = %s", [k])
            for k in range(200, 212)
        ]
    )
    expected_messages = 19 + 10 + 3 + 3 + 15 * 2 + 5 + 12 + 12
    capture.wait_for(before + expected_messages)
    _apply(spark, config)

    lake = assert_lake_matches(spark, capture, base_path, json_columns)
    assert not any(row["big"] == UNAVAILABLE_PLACEHOLDER for row in lake)
    assert {row["_cdc_op"] for row in lake} >= {"c", "u"}

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
