"""``cdc-lake rebootstrap`` while the source changes and a reader polls the table.

A LIVE table, registered in both catalogs of the stack (Glue: moto's server; Hive: the Derby-backed
``hive-metastore``), is re-bootstrapped while a writer changes the source throughout and a reader
resolves the catalog table ``database.table`` in each catalog and reads what it names with both
readers (Spark+Hudi and hudi-rs), again and again: the reader never finds it missing, empty or
half-written; both catalog entries move to a new versioned path equal to the source (the state store
agrees); the old path is kept until ``rebootstrap --remove-old``.  A second re-bootstrap of the same
table while one runs is refused.

On Postgres only: the switch, the catalogs and the reader are the same for every engine, and MariaDB's
re-bootstrap (its copy read from the primary, the switch, the new copy equal to the source) runs in
test_schema_changes.py and test_schema_policies.py; both engines here cost CI 55 s more.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    wait_for_schema,
    write_db_config,
)
from support.common import cli_run, load
from support.engines import POSTGRES, StackEngine
from support.second_reader import second_reader_rows

from cdc_lake.catalog.entry import catalog_table_name
from cdc_lake.catalog.glue import GlueCatalog
from cdc_lake.catalog.hive import HiveMetastoreCatalog
from cdc_lake.config import GlueSettings, HiveMetastoreSettings
from cdc_lake.hudi.timeline import table_exists
from cdc_lake.hudi.writer import read_table
from cdc_lake.kafka.groups import group_id
from cdc_lake.lake.format import format_facts
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import LockPurpose, table_lock
from cdc_lake.state.records import RebootstrapPhase
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

ROWS = 3000
# The table is StackEngine.aware_items_ddl: ``updated`` is time-zone-aware, since hudi-rs 0.5.0 panics
# ("not yet implemented") on the Avro local-timestamp-micros a wall-clock (timestamp_ntz) column becomes.


@pytest.fixture(scope="module")
def engine() -> StackEngine:
    """Postgres (see the module's docstring)."""
    return POSTGRES


@pytest.fixture(scope="module")
def db(engine: StackEngine, local_stack: LocalStack) -> Iterator[SourceDb]:
    with engine.database(local_stack) as created:
        yield created


class Reader(threading.Thread):
    """Resolves the table in each catalog and counts its rows with both readers, until stopped."""

    def __init__(
        self, spark: SparkSession, catalogs: dict[str, Callable[[str], str | None]], table: str
    ) -> None:
        super().__init__(name="catalog-reader", daemon=True)
        self.spark, self.catalogs, self.table = spark, catalogs, table
        self.seen: list[tuple[str, str, int, int]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for catalog, location in self.catalogs.items():
                try:
                    path = location(self.table)
                    if path is None:
                        self.errors.append(f"{catalog}: the catalog table is missing")
                        continue
                    spark_rows = read_table(self.spark, path).count()
                    self.seen.append((catalog, path, spark_rows, len(second_reader_rows(path, ["id"]))))
                # Every failure to resolve or read is what the test looks for, hudi-rs panics included
                # (pyo3's PanicException is a BaseException).
                except BaseException as exc:
                    self.errors.append(f"{catalog}: {type(exc).__name__}: {exc}"[:300])
            self.stop.wait(0.2)


def _consumer_groups() -> list[str]:
    """The broker's consumer groups, as Kafka's own tool lists them on the stack."""
    listed = subprocess.run(
        [sys.executable, "-m", "cdc_lake", "stack", "kafka", "consumer-groups", "--list"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.split()


def test_rebootstrap_switches_to_an_equal_copy_without_a_gap_for_readers(
    engine: StackEngine, spark: SparkSession, db: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "rebooted"
    engine.aware_items(db, name, ROWS)
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "local")
    glue = GlueSettings(database=f"lake_{db.engine}", endpoint_url=db.stack.glue.endpoint)
    hive = HiveMetastoreSettings(uri=db.stack.hive_metastore.uri, database=f"lake_{db.engine}")
    catalog = {"glue": glue.model_dump(), "hive": hive.model_dump()}
    config_path = write_db_config(tmp_path, db, [{"name": name}], str(tmp_path / "lake"), catalog=catalog)
    onboard(config_path, db.source)
    table = db.qualified(name)
    config = load(config_path)
    old_path = config.lake.table_base_path(table)
    writer = ChangeWriter(db, name, ROWS, max_transactions=100_000, pause=0.05).start()
    wait_for_schema(config, table)
    first = cli_run(config_path, "bootstrap", table, "--apply")
    assert first.exit_code == 0, first.stderr
    catalogs = {"glue": GlueCatalog(glue).location, "hive": HiveMetastoreCatalog(hive).location}
    assert {name: location(table) for name, location in catalogs.items()} == {
        "glue": old_path,
        "hive": old_path,
    }, "published tables are registered in both catalogs"
    reader = Reader(spark, catalogs, table)
    reader.start()
    with table_lock(config.state_store.url, LockPurpose.BOOTSTRAP, table) as held:
        assert held
        refused = cli_run(config_path, "rebootstrap", table)
    assert refused.exit_code != 0 and "another bootstrap of this table is running" in refused.stderr

    result = cli_run(config_path, "rebootstrap", table, "--reason", "schema change", "--json")

    assert result.exit_code == 0, result.stderr
    [outcome] = json.loads(result.stdout)
    new_path = f"{old_path}__v2"
    assert (outcome["version"], outcome["action"], outcome["path"]) == (2, "switched", new_path)
    writer.stop()
    assert writer.transactions > 20
    apply_until_live(spark, config, table)
    assert reader.is_alive(), "the reader thread died: its last reads were not checked"
    reader.stop.set()
    reader.join()
    assert not reader.errors, reader.errors[:3]
    for catalog_name in catalogs:
        paths = {path for catalog, path, _, _ in reader.seen if catalog == catalog_name}
        assert paths == {old_path, new_path}, catalog_name
    smallest = min(min(spark_rows, rs_rows) for _, _, spark_rows, rs_rows in reader.seen)
    assert smallest >= ROWS // 2, "a reader saw an empty or partial table"
    assert {catalog_name: location(table) for catalog_name, location in catalogs.items()} == {
        "glue": new_path,
        "hive": new_path,
    }
    assert assert_lake_equals_source(spark, config, db, name, base_path=new_path) >= ROWS // 2
    source = {row["id"]: row["val"] for row in db.rows(name, ("id",))}
    assert {row["id"]: row["val"] for row in second_reader_rows(new_path, ["id", "val"])} == source, "hudi-rs"
    with StateStore.open(config.state_store.url) as store:
        info = store.require_table(table)
        assert (info.state, info.lake_base_path) == (TableState.LIVE, new_path)
        assert [t.qualified_name for t in store.list_tables()] == [table], "the copy's row is gone"
        [record] = store.rebootstraps(table)
        assert record.phase is RebootstrapPhase.SWITCHED and record.reason == "schema change"
    assert table_exists(spark, old_path), "the old path is kept for readers"
    entry = GlueCatalog(glue).client.get_table(DatabaseName=glue.database, Name=catalog_table_name(table))
    parameters = entry["Table"]["Parameters"]
    assert parameters["spark.sql.sources.provider"] == "hudi" and parameters["path"] == new_path
    columns = [c["Name"] for c in entry["Table"]["StorageDescriptor"]["Columns"]]
    meta = format_facts(config.lake.format).meta_columns
    assert columns[: len(meta)] == list(meta) and {"id", "val", "amount"} <= set(columns)

    old_group = group_id(table, old_path)
    groups = _consumer_groups()
    assert old_group not in groups and group_id(table, new_path) in groups, (
        "the old copy's group goes at the switch (before, it stayed at a stale lag until --remove-old)"
    )

    removed = cli_run(config_path, "rebootstrap", "--remove-old", "--now")

    assert removed.exit_code == 0, removed.stderr
    assert not Path(old_path).exists()
    with StateStore.open(config.state_store.url) as store:
        assert store.rebootstraps(table)[0].phase is RebootstrapPhase.REMOVED
