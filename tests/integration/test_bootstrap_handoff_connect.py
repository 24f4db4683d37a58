"""The hand-off when Kafka Connect cannot be reached: the bootstrap waits, then fails; nothing is published.

The bootstrap runs with ``kafka_connect.url`` pointing at a closed port (the same state store and lake
as the config that onboarded the table), and ``bootstrap.handoff_timeout_seconds`` short.  The table
must stay BOOTSTRAPPING (neither CATCHING_UP nor LIVE), the error must say what to run next, and
``status --json`` must show the failed run.  Run again with Connect reachable, the bootstrap resumes at
the hand-off and the table ends LIVE and equal to the source.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    postgres_db,
    state_of,
    write_db_config,
)
from support.common import cli_run, load
from support.second_reader import second_reader_rows

from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ITEMS = """
create table public.items (id bigint primary key, val text);
insert into public.items select g, 'v' || g from generate_series(1, 30) g;
"""


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_handoff_with_connect_unreachable_fails_without_publishing_then_resumes(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(ITEMS)
    config_path = write_db_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("items")
    unreachable = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    unreachable["kafka_connect"] = {"url": f"http://127.0.0.1:{_closed_port()}"}
    unreachable["bootstrap"]["handoff_timeout_seconds"] = 3
    cut_off = tmp_path / "connect-unreachable.yaml"
    cut_off.write_text(yaml.safe_dump(unreachable, sort_keys=False), encoding="utf-8")
    config = load(config_path)

    failed = cli_run(cut_off, "bootstrap", table)

    assert failed.exit_code == 1, failed.output
    *logged, error = failed.stderr.rstrip("\n").split("\n")
    assert error.startswith(
        f"error: table {table}: not handed off, Debezium not seen past the snapshot point"
    )
    assert "Kafka Connect unreachable" in error
    assert error.endswith(f"run cdc-lake bootstrap {table} again (it resumes at the hand-off)")
    # The wait is logged, naming the table and the snapshot point.
    assert any(
        f"WARNING cdc_lake_bootstrap.handoff {table}: hand-off waits for Debezium past" in line
        for line in logged
    )
    assert state_of(config, table) is TableState.BOOTSTRAPPING
    status = json.loads(cli_run(config_path, "status", "--json").stdout)
    [row] = [r for r in status if r["name"] == table]
    assert row["state"] == "BOOTSTRAPPING"
    assert row["bootstrap"]["phase"] == "handing off"
    assert row["bootstrap"]["last_run"]["outcome"] == "failed"
    assert "not handed off" in row["bootstrap"]["last_run"]["error"]

    db.execute(
        "update public.items set val = 'after' where id <= 5", "delete from public.items where id = 30"
    )
    resumed = cli_run(config_path, "bootstrap", table, "--json")

    assert resumed.exit_code == 0, resumed.stderr
    assert json.loads(resumed.stdout)[0]["state"] == "CATCHING_UP"
    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "items") == 29
    source = sorted((r["id"], r["val"]) for r in db.rows("items", ("id",)))
    lake = sorted(
        (r["id"], r["val"]) for r in second_reader_rows(config.lake.table_base_path(table), ("id", "val"))
    )
    assert lake == source
