"""``rebootstrap --remove-old`` deletes only old base paths that lie under ``lake.base_path``."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from cdc_lake.config import Config, LakeSettings, load_config
from cdc_lake.exceptions import RebootstrapError
from cdc_lake.hudi.format import HudiFormat
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import RebootstrapPhase
from cdc_lake.state.store import StateStore, versioned_path
from cdc_lake_bootstrap import rebootstrap
from cdc_lake_bootstrap.rebootstrap import remove_old_paths

TABLE = "pg.public.orders"


def _config(tmp_path: Path) -> Config:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(
        f"state_store:\n  url: sqlite:///{tmp_path}/state.db\nlake:\n  base_path: {tmp_path}/lake\n"
    )
    return load_config(path)


def _switched(config: Config, old_path: str) -> None:
    """A table re-bootstrapped from ``old_path`` into a new path under the lake, switched, keep time over."""
    with StateStore.open(config.state_store.url) as store:
        store.upsert_source("pg", "postgres", ["cdc-lake-pg"])
        store.upsert_table(TABLE, "pg", 1, old_path)
        new_path = versioned_path(config.lake.table_base_path(TABLE), 2)
        started = store.start_rebootstrap(TABLE, "test", lambda version: new_path)
        store.upsert_table(started.copy_name, "pg", 1, started.new_path)
        for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
            store.transition(started.copy_name, state)
        store.switch_rebootstrap(TABLE, started.version, dt.timedelta(0))


@pytest.fixture
def removed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``HudiFormat.remove`` was asked to delete (no Spark)."""
    paths: list[str] = []
    monkeypatch.setattr(rebootstrap, "get_spark", lambda spark, lake: None)
    monkeypatch.setattr(HudiFormat, "remove", lambda lake, path: paths.append(path))
    return paths


@pytest.mark.parametrize(
    "outside", ["/etc", "{lake}/../elsewhere/orders", "{lake}-other/pg/public/orders", "{lake}"]
)
def test_an_old_path_outside_the_lake_is_refused_and_kept(
    tmp_path: Path, removed: list[str], outside: str
) -> None:
    config = _config(tmp_path)
    old_path = outside.format(lake=config.lake.base_path)
    _switched(config, old_path)

    with pytest.raises(RebootstrapError) as refused:
        remove_old_paths(config, now=True)

    assert str(refused.value) == (
        f"table {TABLE}: old path {old_path} is not under lake.base_path {config.lake.base_path}; not removed"
    )
    assert removed == []
    with StateStore.open(config.state_store.url) as store:
        assert [r.phase for r in store.rebootstraps(TABLE)] == [RebootstrapPhase.SWITCHED]


def test_an_old_path_under_the_lake_is_removed(tmp_path: Path, removed: list[str]) -> None:
    config = _config(tmp_path)
    old_path = config.lake.table_base_path(TABLE)
    _switched(config, old_path)

    (result,) = remove_old_paths(config, now=True)

    assert (result.action, result.path) == ("removed", old_path)
    assert removed == [old_path]


@pytest.mark.parametrize(
    ("path", "inside"),
    [
        ("s3a://lake/tables/pg/public/orders", True),
        ("s3a://lake/tables/pg/public/orders__v2/../../../x", True),
        ("s3a://lake/tables/../other", False),
        ("s3a://lake/tables", False),
        ("s3a://lake/tables2/pg", False),
        ("s3a://other/tables/pg", False),
        ("s3://lake/tables/pg", False),
        ("/tables/pg", False),
    ],
)
def test_the_lake_holds_only_paths_below_its_base_path(path: str, inside: bool) -> None:
    assert LakeSettings(base_path="s3a://lake/tables/").holds(path) is inside
