"""A re-bootstrap and the catalogs: the switch moves the Glue entry (moto's in-process Glue), and no path
an entry still names is deleted, so a switch whose catalog update failed or was cut short never leaves
catalog readers on a removed path."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from moto import mock_aws
from pyspark.sql.types import LongType, StructField, StructType
from support.caught_up import CaughtUpApplier

from cdc_lake.catalog.glue import GlueCatalog
from cdc_lake.catalog.sync import CatalogSync
from cdc_lake.config import Config, load_config
from cdc_lake.exceptions import CatalogError, RebootstrapError
from cdc_lake.hudi.format import HudiFormat
from cdc_lake.kafka.offsets import TopicState
from cdc_lake.lake.checkpoint import Checkpoint, Origin
from cdc_lake.lake.format import CommitInfo
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import Rebootstrap, RebootstrapPhase
from cdc_lake.state.store import StateStore, versioned_path
from cdc_lake_bootstrap import rebootstrap
from cdc_lake_bootstrap.rebootstrap import copy_target, remove_old_paths

TABLE = "pg.public.orders"
TOPIC = "pg.public.orders"
ENTRY = "glue table lake.pg_public_orders"
COLUMNS = StructType([StructField("id", LongType())])


@dataclass(frozen=True)
class _Table:
    schema: StructType


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Config]:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "testing")
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(
        f"state_store:\n  url: sqlite:///{tmp_path}/state.db\nlake:\n  base_path: {tmp_path}/lake\n"
        "catalog:\n  glue:\n    database: lake\n    region: us-east-1\n"
        "sources:\n  pg:\n    engine: postgres\n    primary: {port: 1, database: d, user: u}\n"
        "    tables:\n      - name: public.orders\n"
    )
    with mock_aws():
        yield load_config(path)


@pytest.fixture
def removed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``HudiFormat.remove`` was asked to delete (no Spark); the lake reads give ``COLUMNS``."""
    paths: list[str] = []
    monkeypatch.setattr(rebootstrap, "get_spark", lambda spark, lake: None)
    monkeypatch.setattr(HudiFormat, "remove", lambda lake, path: paths.append(path))
    monkeypatch.setattr(HudiFormat, "read", lambda lake, path: _Table(COLUMNS))
    return paths


def _glue(config: Config) -> CatalogSync:
    catalog = CatalogSync.for_config(config)
    assert catalog is not None
    return catalog


@pytest.fixture
def copying(config: Config) -> Iterator[Rebootstrap]:
    """A LIVE table registered in Glue at its configured path, and a caught-up re-bootstrap copy."""
    configured = config.lake.table_base_path(TABLE)
    with StateStore.open(config.state_store.url) as store:
        store.upsert_source("pg", "postgres", ["cdc-lake-pg"])
        store.upsert_table(TABLE, "pg", 1, configured)
        for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
            store.transition(TABLE, state)
        record = store.start_rebootstrap(TABLE, "test", lambda version: versioned_path(configured, version))
        store.upsert_table(record.copy_name, "pg", 1, record.new_path)
        for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
            store.transition(record.copy_name, state)
    _glue(config).register(TABLE, configured, COLUMNS, [])
    yield record


def _switch(config: Config, record: Rebootstrap, monkeypatch: pytest.MonkeyPatch) -> None:
    metadata = Checkpoint(TOPIC, {0: 4}, 1000, Origin.WATERMARK).metadata().to_dict()
    commit = CommitInfo("20260202000000000", "commit", None, "BULK_INSERT", metadata)
    monkeypatch.setattr(HudiFormat, "latest_commit", lambda lake, path, **_: commit)
    monkeypatch.setattr(rebootstrap, "topic_state", lambda servers, topic, extra: TopicState("id", {}))
    with StateStore.open(config.state_store.url) as store:
        target = copy_target(config, TABLE, record)
        rebootstrap._switch(config, store, None, TABLE, record, target, CaughtUpApplier)  # type: ignore[arg-type]


def _phases(config: Config) -> list[RebootstrapPhase]:
    with StateStore.open(config.state_store.url) as store:
        return [r.phase for r in store.rebootstraps(TABLE)]


@pytest.mark.usefixtures("removed")
def test_the_switch_moves_the_glue_entry_to_the_new_copy(
    config: Config, copying: Rebootstrap, monkeypatch: pytest.MonkeyPatch
) -> None:
    _switch(config, copying, monkeypatch)

    glue = _glue(config)
    assert glue.entries_at(TABLE, copying.new_path) == [ENTRY]
    assert glue.entries_at(TABLE, copying.old_path) == []


def test_remove_old_keeps_a_path_the_catalog_still_names_until_the_entry_moves(
    config: Config, copying: Rebootstrap, removed: list[str]
) -> None:
    with StateStore.open(config.state_store.url) as store:  # the switch, then a crash before the catalog
        store.switch_rebootstrap(TABLE, copying.version, dt.timedelta(0))

    with pytest.raises(RebootstrapError) as refused:
        remove_old_paths(config, now=True)

    assert str(refused.value).startswith(
        f"table {TABLE}: {ENTRY} still points at the old path {copying.old_path}; not removed ("
    )
    assert f"cdc-lake apply --once --tables {TABLE}" in str(refused.value)
    assert removed == []
    assert _phases(config) == [RebootstrapPhase.SWITCHED]

    _glue(config).register(TABLE, copying.new_path, COLUMNS, [])  # what the applier's next batch does
    (result,) = remove_old_paths(config, now=True)

    assert (result.action, removed) == ("removed", [copying.old_path])
    assert _phases(config) == [RebootstrapPhase.REMOVED]


@pytest.mark.usefixtures("removed")
def test_a_catalog_failure_after_the_switch_says_the_entry_did_not_move_and_how_to_move_it(
    config: Config, copying: Rebootstrap, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> str:
        raise CatalogError(f"table {TABLE}: glue catalog lake.pg_public_orders: AccessDenied")

    monkeypatch.setattr(GlueCatalog, "sync", refuse)

    with pytest.raises(RebootstrapError) as failed:
        _switch(config, copying, monkeypatch)

    message = str(failed.value)
    assert message.startswith(f"table {TABLE}: switched to {copying.new_path}, but a catalog entry still ")
    assert "AccessDenied" in message and f"cdc-lake apply --once --tables {TABLE}" in message
    assert "\n" not in message
    assert _phases(config) == [RebootstrapPhase.SWITCHED]
    assert _glue(config).entries_at(TABLE, copying.old_path) == [ENTRY]
