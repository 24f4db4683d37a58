"""``cdc-lake bootstrap --parallel N`` on real Debezium and the stack's Postgres replica, CI-sized.

Small tables and one larger one of a source bootstrap in one command and one Spark application:
their watermarks are taken in one batch (one primary position for all), one replica wait covers them,
tables run side by side, and each ends equal to the source after the hand-off.  Three small tables and
the larger one are more tables than ``--parallel 3`` slots, which is all those claims need; each table
costs a bootstrap commit and an applier commit, so CI stops there.
``benchmarks/scale_bench.py bootstrap`` measures the same at 100 small tables and 1M rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    postgres_db,
    write_db_config,
)
from support.common import cli_run, load

from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.run import RUN

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

SMALL_TABLES = 3
TABLE = """
create table public.{name} (
    id bigint primary key, grp int not null, val text, amount numeric(12, 2), updated timestamp(6),
    flag boolean
);
insert into public.{name}
select g, g % 10, 'v' || g, g / 7.0, timestamp '2024-01-01' + g * interval '1 second', g % 2 = 0
from generate_series(1, {rows}) g;
analyze public.{name};
"""


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def test_many_tables_bootstrap_concurrently_with_one_shared_start(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    small = [f"small_{i}" for i in range(SMALL_TABLES)]
    for index, name in enumerate(small):
        db.execute(TABLE.format(name=name, rows=10 * (index + 1)))
    db.execute(TABLE.format(name="big", rows=20_000))
    names = ["big", *small]
    config_path = write_db_config(tmp_path, db, [{"name": n} for n in names], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    config = load(config_path)
    writer = ChangeWriter(db, "big", 20_000, max_transactions=500, seed=3).start()

    result = cli_run(config_path, "bootstrap", "--source", db.source, "--parallel", "3", "--json")

    writer.stop()
    assert result.exit_code == 0, result.stderr
    outcomes = {o["table"]: o for o in json.loads(result.stdout)}
    assert set(outcomes) == {db.qualified(n) for n in names}
    assert {o["state"] for o in outcomes.values()} == {"CATCHING_UP"}
    assert outcomes[db.qualified("big")]["rows"] >= 19_000
    with StateStore.open(config.state_store.url) as store:
        watermarks = [store.get_watermark(db.qualified(n)) for n in names]
        runs = [r for n in names for r in store.list_runs(db.qualified(n)) if r.command == RUN]
    assert all(w is not None and w.replica_position_reached for w in watermarks)
    positions = {w.source_position for w in watermarks if w is not None}
    assert len(positions) == 1, f"one primary position read for the whole source, got {positions}"
    assert len(runs) == len(names)
    spans = sorted((r.started_at, r.finished_at) for r in runs)
    overlapping = sum(
        1 for (_, end), (start, _) in pairwise(spans) if end is not None and start < end
    )
    assert overlapping >= 1, f"tables ran one after another: {spans}"

    for name in names:
        apply_until_live(spark, config, db.qualified(name))
        assert assert_lake_equals_source(spark, config, db, name) >= 10


def test_parallel_bootstrap_of_nothing_pending_says_so(db: SourceDb, tmp_path: Path) -> None:
    db.execute(TABLE.format(name="alone", rows=5))
    config_path = write_db_config(tmp_path, db, [{"name": "alone"}], str(tmp_path / "lake"))
    result = cli_run(config_path, "bootstrap", "--source", db.source, "--all-pending", "--parallel", "4")
    assert result.exit_code == 0, result.stderr
    assert "no tables to bootstrap" in result.output
