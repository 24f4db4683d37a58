"""MariaDB to Hudi through Debezium and the applier: every mapped type, moves, deletes, re-inserts.

Two table setups: COPY_ON_WRITE with GLOBAL_BLOOM and hard deletes, and MERGE_ON_READ (inline
compaction every two delta commits) with the record-level index and soft deletes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apply_support import (
    Capture,
    assert_lake_matches,
    config_dict,
    lake_rows,
    mariadb_capture,
    onboard,
    write_config,
)
from pyspark.sql import SparkSession

from cdc_lake.apply.runner import ApplyRunner, apply_once
from cdc_lake.config import Config
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1200)]

DDL = """
create table {table} (
    id bigint primary key, region varchar(8) not null, ti tinyint, si smallint, mi mediumint, i int,
    bi bigint, ubi bigint unsigned, amount decimal(12, 2), f float, dbl double, flag tinyint(1), b1 bit(1),
    code char(5), name varchar(40), note text, data blob, vb varbinary(16), d date, t time(6),
    dtm datetime(6), ts timestamp(6) null, y year, doc json, mood enum('happy', 'sad', 'meh'),
    tags set('a', 'b', 'c')
)
"""
COLUMNS = (
    "id, region, ti, si, mi, i, bi, ubi, amount, f, dbl, flag, b1, code, name, note, data, vb, d, t, dtm, "
    "ts, y, doc, mood, tags"
)
REGIONS = ("eu", "us", "apac")
# Every update must change the row: MySQL/MariaDB log no event for an update that changes nothing.
NEXT_REGION = "case region when 'eu' then 'us' when 'us' then 'apac' else 'eu' end"
SETUPS: dict[str, dict[str, Any]] = {
    "cow-bloom-hard": {"table_type": "COPY_ON_WRITE", "index": "GLOBAL_BLOOM"},
    "mor-rli-soft": {
        "table_type": "MERGE_ON_READ",
        "index": "RECORD_INDEX",
        "soft_deletes": True,
        "compaction": {"inline": True, "max_delta_commits": 2},
    },
}


def _row(key: int, rng: random.Random, version: int = 0) -> tuple[object, ...]:
    """Values for every column; every fifth row leaves the nullable ones null."""
    if key % 5 == 0:
        return (key, rng.choice(REGIONS), *([None] * 24))
    return (
        key,
        rng.choice(REGIONS),
        rng.randint(-128, 127),
        rng.randint(-32768, 32767),
        rng.randint(-8388608, 8388607),
        rng.randint(-(2**31), 2**31 - 1),
        rng.randint(-(2**63), 2**63 - 1),
        rng.choice([0, 2**64 - 1, rng.randint(0, 2**64 - 1)]),
        f"{rng.randint(-(10**10), 10**10) / 100:.2f}",
        rng.choice([1.5, -2.25, 0.1]),
        rng.random() * 1e9,
        rng.randint(0, 1),
        rng.randint(0, 1),
        f"c{key:03d}",
        f"name-{key}-{version}",
        "note with 'quotes' and ünïcode" * (1 + key % 3),
        bytes([key % 256, 0, 255]),
        bytes([1, 2, key % 256]),
        f"{1900 + key % 200}-02-28",
        rng.choice(["-838:59:59", "12:34:56.5", "00:00:00"]),
        f"2024-03-{1 + key % 28:02d} 12:34:56.654321",
        f"2024-03-{1 + key % 28:02d} 01:02:03.5",
        1901 + key % 254,
        json.dumps({"k": key, "list": [1, 2]}),
        rng.choice(["happy", "sad", "meh"]),
        rng.choice(["a", "a,c", "", "a,b,c"]),
    )


def _insert(capture: Capture, rows: list[tuple[object, ...]]) -> None:
    placeholders = ", ".join(["%s"] * 26)
    capture.execute(
        *[(f"insert into `{capture.table}` ({COLUMNS}) values ({placeholders})", row) for row in rows]
    )


@pytest.fixture
def capture(local_stack: LocalStack) -> Iterator[Capture]:
    with mariadb_capture(local_stack, DDL) as captured:
        yield captured


def _apply(spark: SparkSession, config: Config) -> None:
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config)
        outcomes = apply_once(runner, select_targets(config), workers=2)
    assert [o.error for o in outcomes] == [None]


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_mariadb_changes_end_equal_in_the_lake(
    spark: SparkSession, capture: Capture, local_stack: LocalStack, tmp_path: Path, setup: str
) -> None:
    rng = random.Random(11)
    soft = bool(SETUPS[setup].get("soft_deletes"))
    config = write_config(
        tmp_path / "cdc-lake.yaml",
        config_dict(
            local_stack,
            [capture],
            str(tmp_path / "lake"),
            f"sqlite:///{tmp_path}/state.db",
            tables={capture.qualified_name: {"partition_by": ["region"]}},
            lake=SETUPS[setup],
            apply={"batch_max_events": 35},
        ),
    )
    onboard(config)
    base_path = config.lake.table_base_path(capture.qualified_name)

    _insert(capture, [_row(key, rng) for key in range(1, 101)])
    capture.wait_for(100)
    _apply(spark, config)

    before = capture.end_offset()
    table = f"`{capture.table}`"
    changes: list[str | tuple[str, list[object]]] = []
    changes += [
        (f"update {table} set amount = amount + 1, name = %s where id = %s", [f"u-{k}", k])
        for k in range(2, 50, 4)
    ]
    changes += [(f"update {table} set region = {NEXT_REGION} where id = %s", [k]) for k in range(1, 30, 3)]
    changes += [
        (f"update {table} set note = %s where id = %s", [f"{n}-{k}", k])
        for n in ("one", "two")
        for k in (7, 8)
    ]
    changes += [(f"delete from {table} where id = %s", [k]) for k in range(50, 62)]
    capture.execute(*changes)
    _insert(capture, [_row(key, rng, version=1) for key in (50, 55, 61)])
    capture.wait_for(before + 12 + 10 + 4 + 12 * 2 + 3)
    _apply(spark, config)

    lake = assert_lake_matches(spark, capture, base_path, ("doc",), ("ts",), live_only=soft)
    if soft:
        flagged = [r for r in lake_rows(spark, base_path) if r["_cdc_deleted"]]
        assert sorted(r["id"] for r in flagged) == sorted(set(range(50, 62)) - {50, 55, 61})
        # A soft-deleted row keeps its last values (MariaDB's before image is complete).
        assert all(r["_cdc_op"] == "d" and r["name"] is not None for r in flagged if r["id"] % 5)
    else:
        assert not any(r["_cdc_deleted"] for r in lake)
