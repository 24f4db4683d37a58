"""Unchanged TOASTed arrays on Postgres (REPLICA IDENTITY DEFAULT): exact in the lake, or refused by name.

Issue 34, measured scenario 2 and review finding 2.  An update that leaves a TOASTed value unchanged
carries Debezium's unavailable-value placeholder, shaped after the column's type (a uuid array's is the
name-based UUID ``b68a35a7-...``).  Every array type with a placeholder (``uuid[]``, ``int[]``,
``bigint[]``, ``date[]``, ``text[]``, ``varchar[]``, beside ``text`` and ``bytea``) must end in the lake
equal to the source after such updates, and after a primary-key update (whose create carries the
placeholders), through both readers.  The array types Debezium 3.5 has no placeholder for
(``smallint[]``, ``boolean[]``, ``real[]``, ``double precision[]``, ``numeric[]``, ``timestamptz[]``:
the connector would stop at the first such update) are refused at onboarding, naming table and column,
unless the table gets REPLICA IDENTITY FULL.  What Debezium sends per type is recorded by
``dev/record_debezium_messages.py postgres_toast_arrays`` (tests/unit/data/recorded/).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.apply import Capture, assert_lake_matches, config_dict, postgres_capture, record_catching_up
from support.bootstrap import SourceDb, postgres_db, write_db_config
from support.common import cli_run, write_and_load

from cdc_lake.apply.runner import ApplyRunner, apply_once
from cdc_lake.config import Config
from cdc_lake.decode.types import UNAVAILABLE_UUID
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

# Each column with a value over the TOAST threshold (stored EXTERNAL: out of line, uncompressed) for row k.
EXACT = {
    "a_uuid": ("uuid[]", "array(select md5((i + {k})::text)::uuid from generate_series(1, 300) i)"),
    "a_int": ("integer[]", "array(select i + {k} from generate_series(1, 2000) i)"),
    "a_big": ("bigint[]", "array(select (i + {k}) * 1000000000000 from generate_series(1, 1000) i)"),
    "a_date": ("date[]", "array(select date '2024-01-01' + i + {k} from generate_series(1, 2000) i)"),
    "a_text": ("text[]", "array(select 'element-' || (i + {k}) from generate_series(1, 500) i)"),
    "a_vc": (
        "varchar(40)[]",
        "array(select ('vc-' || (i + {k}))::varchar(40) from generate_series(1, 500) i)",
    ),
    "big": ("text", "repeat('{k}-0123456789abcdef', 400)"),
    "by": ("bytea", "decode(repeat('deadbeef', 2000 + {k}), 'hex')"),
}
DDL = (
    "create table {table} (id int primary key, n int, "
    + ", ".join(f"{name} {kind}" for name, (kind, _) in EXACT.items())
    + "); alter table {table} "
    + ", ".join(f"alter column {name} set storage external" for name in EXACT)
)
ROWS = 12


@pytest.fixture
def capture(local_stack: LocalStack) -> Iterator[Capture]:
    with postgres_capture(local_stack, DDL) as captured:
        yield captured


def _apply(spark: SparkSession, config: Config) -> None:
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config)
        outcomes = apply_once(runner, select_targets(config), workers=1)
    assert [o.error for o in outcomes] == [None]


def test_unchanged_toasted_arrays_with_a_placeholder_stay_exact(
    spark: SparkSession, capture: Capture, local_stack: LocalStack, tmp_path: Path
) -> None:
    config = write_and_load(
        tmp_path / "cdc-lake.yaml",
        config_dict(local_stack, [capture], str(tmp_path / "lake"), f"sqlite:///{tmp_path}/state.db"),
    )
    record_catching_up(config)
    base_path = config.lake.table_base_path(capture.qualified_name)
    table = f'"{capture.schema}"."{capture.table}"'
    names = ", ".join(EXACT)
    capture.execute(
        *(
            f"insert into {table} (id, n, {names}) select {k}, 0, "
            + ", ".join(value.format(k=k) for _, value in EXACT.values())
            for k in range(1, ROWS + 1)
        )
    )
    capture.wait_for(ROWS)
    _apply(spark, config)
    assert_lake_matches(spark, capture, base_path)

    before = capture.end_offset()
    # Every row updated leaving its TOASTed values unchanged (placeholders), some twice in one batch;
    # one row moved to a new key (delete + tombstone + a create carrying the placeholders).
    capture.execute(
        f"update {table} set n = n + 1",
        f"update {table} set n = n + 1 where mod(id, 3) = 0",
        f"update {table} set id = 100 where id = 2",
    )
    capture.wait_for(before + ROWS + ROWS // 3 + 3)
    _apply(spark, config)

    lake = assert_lake_matches(spark, capture, base_path)
    assert [UNAVAILABLE_UUID] not in [row["a_uuid"] for row in lake]
    assert {row["id"] for row in lake} == {*range(1, ROWS + 1), 100} - {2}


@pytest.fixture
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def test_toastable_arrays_without_a_placeholder_are_refused_at_onboarding_by_name(
    db: SourceDb, tmp_path: Path
) -> None:
    db.execute(
        "create table public.arrays (id int primary key, a_s smallint[], a_bool boolean[], a_r real[], "
        "a_dp double precision[], a_num numeric[], a_tstz timestamptz[], a_uuid uuid[], a_int int[], "
        "a_plain smallint[])",
        "alter table public.arrays alter column a_plain set storage plain",
    )
    config = write_db_config(tmp_path, db, [{"name": "arrays"}], str(tmp_path / "lake"))

    refused = cli_run(config, "onboard", db.source, "--dry-run", "--json")

    assert refused.exit_code != 0, refused.output
    [check] = [c for c in json.loads(refused.stdout)["checks"] if c["check"] == "TOASTed arrays"]
    assert check["outcome"] == "fail"
    assert check["detail"].endswith(
        "public.arrays (a_s (int2[]), a_bool (bool[]), a_r (float4[]), a_dp (float8[]), a_num (numeric[]), "
        "a_tstz (timestamptz[]))"
    ), check["detail"]
    assert "--replica-identity-full" in check["fix"]

    # REPLICA IDENTITY FULL makes them exact: Debezium takes the value from the old row.
    full = cli_run(config, "onboard", db.source, "--dry-run", "--replica-identity-full", "--json")
    [check] = [c for c in json.loads(full.stdout)["checks"] if c["check"] == "TOASTed arrays"]
    assert check["outcome"] == "pass", check
