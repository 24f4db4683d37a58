"""The bootstrap and the applier on a real Spark standalone cluster (the stack's master and worker).

The commands run as separate processes with ``spark.master: spark://127.0.0.1:17077``: the driver is
the cdc-lake process, the executors (and the Python workers that decode) run under the stack's
``spark-worker`` process, jars reach them through the driver.  The master's status page proves both
applications ran there; the lake ends equal to the source, read with Spark+Hudi and hudi-rs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bootstrap_support import (
    SourceDb,
    assert_hudi_rs_equals_source,
    assert_lake_equals_source,
    cli_run,
    load,
    postgres_db,
    state_of,
    wait_streamed,
    write_config,
)
from pyspark.sql import SparkSession

from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.spark import EXECUTOR_MEMORY
from cdc_lake.state.lifecycle import TableState

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ITEMS = """
create table public.items (id bigint primary key, val text, n integer);
insert into public.items select g, 'v' || g, g from generate_series(1, 300) g;
"""
COMMAND_TIMEOUT = 420


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def _cdc_lake(config_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``cdc-lake --config CONFIG ARGS...`` as its own process (its own Spark driver)."""
    return subprocess.run(
        [sys.executable, "-m", "cdc_lake", "--config", str(config_path), *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def test_bootstrap_and_apply_run_on_a_standalone_cluster(
    spark: SparkSession, local_stack: LocalStack, db: SourceDb, tmp_path: Path
) -> None:
    app_name = f"cdc-lake-standalone-{db.suffix}"
    master = local_stack.spark_master
    db.execute(ITEMS)
    config_path = write_config(
        tmp_path,
        db,
        [{"name": "items"}],
        str(tmp_path / "lake"),
        spark={
            "master": master.url,
            "app_name": app_name,
            "conf": {
                "spark.executor.memory": EXECUTOR_MEMORY,
                "spark.cores.max": 1,
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            },
        },
    )
    config = load(config_path)
    table = db.qualified("items")
    onboarded = cli_run(config_path, "onboard", db.source)
    assert onboarded.exit_code == 0, onboarded.stderr or onboarded.output

    bootstrapped = _cdc_lake(config_path, "bootstrap", table, "--json")
    assert bootstrapped.returncode == 0, bootstrapped.stderr
    assert json.loads(bootstrapped.stdout)[0]["state"] == "CATCHING_UP"

    db.execute(
        "update public.items set val = 'changed', n = -n where id <= 40",
        "delete from public.items where id between 100 and 120",
        "insert into public.items select g, 'new', g from generate_series(301, 330) g",
    )
    wait_streamed(config, table)
    deadline = time.monotonic() + COMMAND_TIMEOUT
    while state_of(config, table) is not TableState.LIVE:
        applied = _cdc_lake(config_path, "apply", "--once", "--tables", table)
        assert applied.returncode == 0, applied.stderr
        assert time.monotonic() < deadline, f"{table} not LIVE"

    ran_here = [app for app in master.cluster_status()["completedapps"] if app["name"] == app_name]
    assert len(ran_here) >= 2, "bootstrap and apply did not run on the standalone master"
    assert all(app["state"] == "FINISHED" and app["cores"] >= 1 for app in ran_here)

    assert assert_lake_equals_source(spark, config, db, "items") == 309
    assert_hudi_rs_equals_source(config, db, "items", ("id", "val", "n"))
