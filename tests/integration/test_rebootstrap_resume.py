"""A re-bootstrap killed mid-way resumes where it stopped, or rolls back with ``--abort``.

Engine-agnostic (the copy is a bootstrap, whose resume both engines test in their bootstrap tests), so
it runs on Postgres only: a re-bootstrap process is SIGKILLed after the copy's first commit; running
the command again finishes the copy without writing any partition twice and switches; a second one,
killed the same way, is rolled back by ``--abort``: its path and copy row are gone, the table is
untouched and LIVE.

CI-sized: 15 000 rows in 2 500-row partitions plan six partitions, one per Spark slot in a commit, so
the copy is several commits (three on the 2-core local session) and the kill after the first leaves
more for the resumed run; more rows prove nothing more here (``benchmarks/bootstrap_bench.py`` measures
size).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    commit_runs,
    kill_after_first_commit,
    onboard,
    postgres_db,
    write_db_config,
)
from support.common import cli_run, load
from support.second_reader import second_reader_rows

from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import RebootstrapPhase
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

ROWS = 15_000
_KILLABLE = """
import sys
from pathlib import Path

from cdc_lake_bootstrap import partition_copy, partitions, rebootstrap
from cdc_lake_bootstrap.progress import LineView
from cdc_lake.apply.runner import ApplyRunner
from cdc_lake.config import load_config

partitions.SINGLE_PARTITION_ROWS = 1000
partitions.ROWS_PER_PARTITION = 2500
partition_copy.PARTITIONS_PER_COMMIT_PER_SLOT = 1
config = load_config(Path(sys.argv[1]))
rebootstrap.rebootstrap_tables(config, [sys.argv[2]], "killed", LineView(print), ApplyRunner.for_config)
"""


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def test_a_killed_rebootstrap_resumes_and_another_is_rolled_back(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(
        "create table public.resumed (id bigint primary key, val text)",
        f"insert into public.resumed select g, 'v' || g from generate_series(1, {ROWS}) g",
        "analyze public.resumed",
    )
    config_path = write_db_config(tmp_path, db, [{"name": "resumed"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("resumed")
    config = load(config_path)
    assert cli_run(config_path, "bootstrap", table, "--apply").exit_code == 0
    old_path = config.lake.table_base_path(table)

    kill_after_first_commit(config_path, f"{table}~v2", script=_KILLABLE, argument=table)
    db.execute("update public.resumed set val = 'changed' where id <= 10")
    resumed = cli_run(config_path, "rebootstrap", table)

    assert resumed.exit_code == 0, resumed.stderr
    commits = commit_runs(config_path, f"{table}~v2")
    indexes = sorted(i for group in commits for i in group)
    assert len(commits) > 1 and indexes == sorted(set(indexes)), "no partition written twice"
    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "resumed", base_path=f"{old_path}__v2") == ROWS
    source = {int(r["id"]): r["val"] for r in db.rows("resumed", ("id",))}
    assert {int(r["id"]): r["val"] for r in second_reader_rows(f"{old_path}__v2", ["id", "val"])} == source

    kill_after_first_commit(config_path, f"{table}~v3", script=_KILLABLE, argument=table)
    aborted = cli_run(config_path, "rebootstrap", table, "--abort")

    assert aborted.exit_code == 0, aborted.stderr
    assert not Path(f"{old_path}__v3").exists()
    with StateStore.open(config.state_store.url) as store:
        assert store.get_table(f"{table}~v3") is None
        info = store.require_table(table)
        assert (info.state, info.lake_base_path) == (TableState.LIVE, f"{old_path}__v2")
        phases = [r.phase for r in store.rebootstraps(table)]
        assert phases == [RebootstrapPhase.SWITCHED, RebootstrapPhase.ABORTED]
