"""The ``rebootstrap`` and ``freeze`` schema policies end to end under concurrent writes (Postgres; the
``db`` fixture says why not MariaDB too).

Two LIVE tables applied by the ``run`` service (in-process, with the automatic re-bootstrap the CLI
gives it) while a writer changes each of them throughout:

- ``auto`` (``schema_changes: rebootstrap``) has a column retyped incompatibly: it stops in
  SCHEMA_CHANGED and, with no operator, is re-bootstrapped into ``<base>__v2`` and switched LIVE, equal
  to the source (both readers: Spark+Hudi and hudi-rs);
- ``frozen`` (``schema_changes: freeze`` with a frozen column list) gains a column and loses one outside
  the list: nothing changes for it (LIVE throughout, the lake keeps exactly the frozen columns, equal to
  the source on them).  Then the frozen list gains the new column and ``cdc-lake rebootstrap`` updates
  the connector first: its ``column.include.list`` names the column, and a value written to it after
  the switch reaches the new copy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from pyspark.sql import SparkSession
from support.bootstrap import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    onboard,
    postgres_db,
    wait_for_schema,
    wait_streamed,
    write_db_config,
)
from support.common import cli_run, load
from support.second_reader import second_reader_rows

from cdc_lake.apply.commands import service_for
from cdc_lake.apply.runner import ApplyRunner
from cdc_lake.config import Config
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.hudi.writer import read_table
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import RebootstrapPhase
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.rebootstrap import AutoRebootstrap

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

ROWS = 400
FROZEN = ["id", "grp", "val", "amount", "updated", "flag"]
# ``updated`` is time-zone-aware, as in test_rebootstrap.py (hudi-rs cannot read timestamp_ntz).
CREATE = (
    'create table public."{name}" (id bigint primary key, grp int not null, val text, '
    "amount numeric(12, 2), updated timestamptz(6), flag boolean, extra int)",
    'insert into public."{name}" select g, g % 10, \'v\' || g, g / 7.0, '
    "timestamp '2024-01-01' + g * interval '1 second', g % 2 = 0, g from generate_series(1, {rows}) g",
)
CHANGES = (
    'alter table public."auto" alter column "grp" type text',
    'alter table public."frozen" add column "note" text',
    'alter table public."frozen" drop column "extra"',
)
TOUCH = 'update public."{name}" set "amount" = "amount" + 1 where "id" <= 5'
NOTE = """update public."frozen" set "note" = 'noted ' || "id" where "id" <= 3"""


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    # Postgres only in CI: the policies are the applier's and the CLI's, engine-blind (what each engine's
    # DDL looks like to them, and a plain re-bootstrap of each, are test_schema_changes.py's, both
    # engines); MariaDB here cost CI 134 s.  benchmarks/schema_matrix_bench.py runs both.
    with postgres_db(local_stack) as created:
        yield created


def lake_equals_source(
    spark: SparkSession, db: SourceDb, name: str, base_path: str, columns: list[str]
) -> int:
    """Both readers find exactly the source's keys, and its ``columns`` values as text, at ``base_path``."""

    def text(rows: list[dict[str, Any]]) -> dict[int, tuple[str, ...]]:
        return {int(r["id"]): tuple(str(r[c]) for c in columns) for r in rows}

    source = text(db.rows(name, ("id",)))
    spark_rows = [r.asDict() for r in read_table(spark, base_path).select("id", *columns).collect()]
    for reader, rows in (("spark", spark_rows), ("hudi-rs", second_reader_rows(base_path, ["id", *columns]))):
        assert sorted(int(r["id"]) for r in rows) == sorted(source), f"{name}: {reader} keys differ"
        assert text(rows) == source, f"{name}: {reader} values of {columns} differ from the source"
    return len(source)


def include_lists(db: SourceDb) -> str:
    """The ``column.include.list`` of every connector of ``db``'s source, joined."""
    url = db.stack.connect.url
    names = [n for n in requests.get(f"{url}/connectors", timeout=10).json() if db.source in n]
    configs = [requests.get(f"{url}/connectors/{n}/config", timeout=10).json() for n in names]
    return ",".join(str(c.get("column.include.list", "")) for c in configs)


def wait_switched(config: Config, table: str, timeout: float = 900.0) -> str:
    """The reason of ``table``'s switched re-bootstrap; fails at once when a connector task FAILED."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
            for name in connect.list_connectors():
                for task in connect.status(name).tasks:
                    causes = [line for line in (task.trace or "").splitlines() if line.startswith("Caused")]
                    assert task.state != "FAILED", f"connector {name}: task FAILED: {causes[-1:]}"
        with StateStore.open(config.state_store.url) as store:
            records = store.rebootstraps(table)
            if records and records[-1].phase is RebootstrapPhase.SWITCHED:
                return records[-1].reason
        time.sleep(2)
    raise AssertionError(f"{table}: no automatic re-bootstrap switched within {timeout:.0f}s")


def test_rebootstrap_policy_reboots_without_an_operator_and_freeze_hides_changes(
    spark: SparkSession, db: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("auto", "frozen"):
        db.execute(*(s.format(name=name, rows=ROWS) for s in CREATE))
    tables_config = [
        {"name": "auto", "schema_changes": "rebootstrap"},
        {"name": "frozen", "schema_changes": "freeze", "columns": FROZEN},
    ]
    # The service applies tier-1 tables every 5 s (900 s by default): soon enough to see the change,
    # and each table's commits (one per round while the writers run) leave the CPU to the re-bootstrap.
    intervals = {"default_interval_seconds": {1: 5, 2: 5}}
    config_path = write_db_config(tmp_path, db, tables_config, str(tmp_path / "lake"), apply=intervals)
    onboard(config_path, db.source)
    config = load(config_path)
    auto, frozen = db.qualified("auto"), db.qualified("frozen")
    assert "note" not in include_lists(db)
    writers = [
        ChangeWriter(db, name, ROWS, max_transactions=100_000, pause=0.1).start()
        for name in ("auto", "frozen")
    ]
    for name, table in (("auto", auto), ("frozen", frozen)):
        db.execute(TOUCH.format(name=name))
        wait_for_schema(config, table)
    first = cli_run(config_path, "bootstrap", auto, frozen, "--apply")
    assert first.exit_code == 0, first.stderr

    with StateStore.open(config.state_store.url) as store:
        service = service_for(config, store, select_targets(config), workers=2, poll_seconds=1.0)
        service.runner.on_schema_change = AutoRebootstrap(config, ApplyRunner.for_config)
        running = threading.Thread(target=service.run, name="run-service", daemon=True)
        running.start()
        try:
            db.execute(*CHANGES)
            db.execute(TOUCH.format(name="auto"), TOUCH.format(name="frozen"))
            reason = wait_switched(config, auto)
        finally:
            for writer in writers:
                writer.stop()
            service.stop()
            running.join(timeout=300)
    assert not running.is_alive()
    assert reason.startswith("automatic (schema_changes: rebootstrap):") and "grp" in reason, reason
    assert writers[0].transactions > 10 and writers[1].transactions > 10

    apply_until_live(spark, config, auto)
    apply_until_live(spark, config, frozen)
    auto_path = config.lake.table_base_path(auto) + "__v2"
    frozen_path = config.lake.table_base_path(frozen)
    with StateStore.open(config.state_store.url) as store:
        assert (store.require_table(auto).state, store.require_table(auto).lake_base_path) == (
            TableState.LIVE,
            auto_path,
        )
        info = store.require_table(frozen)
        assert (info.state, info.lake_base_path, info.last_error) == (TableState.LIVE, frozen_path, None)
        assert store.rebootstraps(frozen) == []
    assert dict(read_table(spark, auto_path).dtypes)["grp"] == "string", "the copy has the new type"
    assert lake_equals_source(spark, db, "auto", auto_path, ["grp", "val"]) >= ROWS // 2
    lake_columns = [c for c in read_table(spark, frozen_path).columns if not c.startswith("_")]
    assert sorted(lake_columns) == sorted(FROZEN), "the frozen table keeps exactly its frozen columns"
    assert lake_equals_source(spark, db, "frozen", frozen_path, ["grp", "val"]) >= ROWS // 2

    data = yaml.safe_load(config_path.read_text())
    [frozen_entry] = [t for t in data["sources"][db.source]["tables"] if t["name"].endswith("frozen")]
    frozen_entry["columns"] = [*FROZEN, "note"]
    config_path.write_text(yaml.safe_dump(data, sort_keys=False))
    rebooted = cli_run(config_path, "rebootstrap", frozen, "--reason", "frozen list gained note")

    assert rebooted.exit_code == 0, rebooted.stderr
    assert "note" in include_lists(db), "the connector was not updated to the new frozen column list"
    db.execute(NOTE)
    config = load(config_path)
    apply_until_live(spark, config, frozen)
    wait_streamed(config, frozen)
    new_path = frozen_path + "__v2"
    # The writer deletes and moves keys: the source decides which of ids 1-3 still exist.
    expected = {int(r["id"]): r["note"] for r in db.rows("frozen", ("id",)) if int(r["id"]) <= 3}
    assert expected and all(str(note).startswith("noted") for note in expected.values()), expected
    notes = {r["id"]: r["note"] for r in second_reader_rows(new_path, ["id", "note"]) if r["id"] <= 3}
    assert notes == expected, notes
    spark_notes = {r["id"]: r["note"] for r in read_table(spark, new_path).where("id <= 3").collect()}
    assert spark_notes == notes
