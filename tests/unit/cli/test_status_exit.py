"""``cdc-lake status`` exits non-zero for every table that needs an operator: 4 for FAILED, 5 for
SCHEMA_CHANGED, 6 for possibly diverged; the most urgent wins and the one line names every table."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cdc_lake.cli.main import cli
from cdc_lake.exceptions import HealthCheckError
from cdc_lake.state import StateStore, TableState
from cdc_lake.state.status import status_error, table_statuses

FAILED, CHANGED, DIVERGED = "pg.public.failed", "pg.public.changed", "pg.public.diverged"


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(f"state_store:\n  url: sqlite:///{tmp_path}/state.db\n", encoding="utf-8")
    return path


def _store(config_file: Path) -> StateStore:
    return StateStore.open(f"sqlite:///{config_file.parent}/state.db")


def _live(store: StateStore, name: str) -> None:
    store.upsert_table(name, "pg", 1, f"/lake/{name}")
    for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
        store.transition(name, state)


def _tables(config_file: Path, *names: str) -> None:
    """LIVE tables, then FAILED / SCHEMA_CHANGED / possibly diverged as their names say."""
    with _store(config_file) as store:
        store.upsert_source("pg", "postgres")
        _live(store, "pg.public.fine")
        for name in names:
            _live(store, name)
        if FAILED in names:
            store.transition(FAILED, TableState.FAILED, "topic 'x' partition 0 offset 3: bad")
        if CHANGED in names:
            store.transition(CHANGED, TableState.SCHEMA_CHANGED, "column amount narrowed")
        if DIVERGED in names:
            store.quarantine_message(
                DIVERGED, topic="pg.public.diverged", partition=0, offset=7, reason="bad", key=None,
                value=None,
            )


def _status(config_file: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config_file), "status", *args])
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("names", "code"),
    [
        ((CHANGED,), 5),
        ((DIVERGED,), 6),
        ((CHANGED, DIVERGED), 5),
        ((FAILED, CHANGED, DIVERGED), 4),
        ((FAILED, DIVERGED), 4),
    ],
)
@pytest.mark.parametrize("as_json", [False, True])
def test_the_most_urgent_state_gives_the_exit_code(
    config_file: Path, names: tuple[str, ...], code: int, as_json: bool
) -> None:
    _tables(config_file, *names)

    exit_code, stderr = _status(config_file, *(["--json"] if as_json else []))

    assert exit_code == code, stderr
    assert stderr.startswith("error: ") and stderr.count("\n") == 1
    for name in names:
        assert name in stderr
    assert "pg.public.fine" not in stderr


def test_every_kind_is_named_in_urgency_order_with_where_to_read_on(config_file: Path) -> None:
    _tables(config_file, DIVERGED, CHANGED, FAILED)

    with _store(config_file) as store:
        error = status_error(table_statuses(store))

    assert isinstance(error, HealthCheckError) and error.exit_code == 4
    assert str(error) == (
        f"1 tables FAILED: {FAILED} (see docs/runbooks/table-failed.md); "
        f"1 tables SCHEMA_CHANGED: {CHANGED} (see docs/schema-changes.md); "
        f"1 tables possibly diverged: {DIVERGED} (see docs/schema-changes.md)"
    )


def test_healthy_tables_exit_0(config_file: Path) -> None:
    _tables(config_file)

    assert _status(config_file) == (0, "")
    with _store(config_file) as store:
        assert status_error(table_statuses(store)) is None
