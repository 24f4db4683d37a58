"""Which tables ``cdc-lake bootstrap`` works on: named ones, or a source's (--all-pending: pending ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lake.config import Config
from cdc_lake.exceptions import BootstrapError, UnknownTableError
from cdc_lake.state import StateStore, TableState
from cdc_lake_bootstrap.run import BootstrapRequest, select_tables


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config.model_validate({
        "state_store": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
        "sources": {
            "pg": {
                "engine": "postgres",
                "primary": {"port": 5432, "database": "app", "user": "cdc"},
                "tables": [{"name": "s.a"}, {"name": "s.b"}, {"name": "s.c"}, {"name": "s.d"}],
            }
        },
    })


@pytest.fixture
def store(config: Config) -> StateStore:
    opened = StateStore.open(config.state_store.url)
    opened.upsert_source("pg", "postgres", ["cdc-lake.pg"])
    for name in ("a", "b", "c"):
        opened.upsert_table(f"pg.s.{name}", "pg", 1, f"/lake/pg/s/{name}")
    opened.transition("pg.s.b", TableState.BOOTSTRAPPING)
    opened.transition("pg.s.c", TableState.BOOTSTRAPPING)
    opened.transition("pg.s.c", TableState.CATCHING_UP)
    return opened


def _names(config: Config, store: StateStore, request: BootstrapRequest) -> list[str]:
    return [table.qualified_name(source) for source, table in select_tables(config, store, request)]


def test_named_tables_in_the_given_order(config: Config, store: StateStore) -> None:
    request = BootstrapRequest(tables=("pg.s.c", "pg.s.a", "pg.s.c"))
    assert _names(config, store, request) == ["pg.s.c", "pg.s.a"]


def test_all_pending_picks_onboarded_pending_and_interrupted(config: Config, store: StateStore) -> None:
    assert _names(config, store, BootstrapRequest(source="pg", all_pending=True)) == ["pg.s.a", "pg.s.b"]


def test_a_source_without_all_pending_needs_every_table_onboarded(config: Config, store: StateStore) -> None:
    with pytest.raises(UnknownTableError, match=r"pg\.s\.d is not onboarded"):
        select_tables(config, store, BootstrapRequest(source="pg"))


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (BootstrapRequest(), "name the tables to bootstrap, or give --source"),
        (BootstrapRequest(tables=("pg.s.a",), source="pg"), "not both"),
        (BootstrapRequest(tables=("pg.s.a",), all_pending=True), "--all-pending applies to --source only"),
    ],
)
def test_requests_that_make_no_sense(
    config: Config, store: StateStore, request_: BootstrapRequest, message: str
) -> None:
    with pytest.raises(BootstrapError, match=message):
        select_tables(config, store, request_)
