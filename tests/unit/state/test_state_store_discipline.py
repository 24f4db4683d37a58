"""Read-only commands never create or migrate the state store; writers and ``cdc-lake migrate`` do.

A newer CLI running ``status`` against a shared store must not migrate it under running appliers: the
read-only verbs open it with :meth:`StateStore.open_existing`, which checks the schema revision with one
plain query (no Alembic) and names ``cdc-lake migrate`` when the store is missing or older.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from cdc_lake.cli.main import cli
from cdc_lake.exceptions import StateStoreError
from cdc_lake.state import StateStore
from cdc_lake.state.migrate import HEAD_REVISION, alembic_config, stored_revision

OLDER = "0001"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/state/cdc.db"


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "cdc-lake.yaml"
    # Services nothing listens on: a read-only verb must stop at the state store.
    path.write_text(
        "state_store:\n  url: sqlite:///state/cdc.db\n"
        "kafka:\n  bootstrap_servers: 127.0.0.1:1\n"
        "kafka_connect:\n  url: http://127.0.0.1:1\n",
        encoding="utf-8",
    )
    return path


def _revision(url: str) -> str | None:
    with create_engine(url).connect() as connection:
        return stored_revision(connection)


def _store_at(url: str, revision: str) -> None:
    """A store migrated only up to ``revision`` (as an older cdc-lake left it)."""
    Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    config = alembic_config()
    with create_engine(url).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def test_the_head_revision_is_the_newest_migration_shipped() -> None:
    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


def test_open_existing_reads_a_store_at_head(url: str) -> None:
    with StateStore.open(url) as store:
        store.upsert_source("pg", "postgres")

    with StateStore.open_existing(url) as store:
        assert store.get_source("pg") is not None


def test_open_existing_never_creates_a_store(url: str, tmp_path: Path) -> None:
    with pytest.raises(StateStoreError) as caught:
        StateStore.open_existing(url)

    message = str(caught.value)
    assert message.startswith(f"state store {url}: does not exist")
    assert "cdc-lake migrate" in message and "\n" not in message
    assert not (tmp_path / "state").exists()


def test_open_existing_never_creates_the_schema_in_an_empty_database(url: str, tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    with create_engine(url).begin() as connection:
        connection.execute(text("CREATE TABLE unrelated (x INTEGER)"))

    with pytest.raises(StateStoreError, match="has no cdc-lake schema; create it with cdc-lake migrate"):
        StateStore.open_existing(url)

    assert _revision(url) is None


def test_open_existing_never_migrates_an_older_store(url: str) -> None:
    _store_at(url, OLDER)

    with pytest.raises(StateStoreError) as caught:
        StateStore.open_existing(url)

    assert str(caught.value) == (
        f"state store {url}: schema revision {OLDER}, this cdc-lake needs {HEAD_REVISION}; "
        "upgrade it with cdc-lake migrate"
    )
    assert _revision(url) == OLDER


def test_open_existing_refuses_a_store_a_newer_cdc_lake_migrated(url: str) -> None:
    StateStore.open(url).close()
    with create_engine(url).begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))

    with pytest.raises(StateStoreError, match="schema revision 9999 is newer than this cdc-lake knows"):
        StateStore.open_existing(url)


def test_migrate_upgrades_an_older_store_and_says_from_what(url: str) -> None:
    _store_at(url, OLDER)

    store, before = StateStore.migrate(url)
    store.close()
    again, unchanged = StateStore.migrate(url)
    again.close()

    assert (before, unchanged) == (OLDER, HEAD_REVISION)
    assert _revision(url) == HEAD_REVISION


@pytest.mark.parametrize(
    "args",
    [["status"], ["status", "--json"], ["lag"], ["metrics", "--once"], ["connectors", "status"]],
)
def test_read_only_verbs_never_create_the_store(args: list[str], config_file: Path) -> None:
    result = CliRunner().invoke(cli, ["--config", str(config_file), *args])

    assert result.exit_code == 1, result.output
    assert result.stderr.count("\n") == 1 and "cdc-lake migrate" in result.stderr, result.stderr
    assert not (config_file.parent / "state").exists()


@pytest.mark.parametrize("args", [["status"], ["lag"], ["metrics", "--once"], ["connectors", "status"]])
def test_read_only_verbs_never_migrate_an_older_store(args: list[str], config_file: Path) -> None:
    url = f"sqlite:///{config_file.parent}/state/cdc.db"
    _store_at(url, OLDER)

    result = CliRunner().invoke(cli, ["--config", str(config_file), *args])

    assert result.exit_code == 1, result.output
    assert "upgrade it with cdc-lake migrate" in result.stderr
    assert _revision(url) == OLDER


def test_migrate_verb_creates_then_upgrades_nothing(config_file: Path) -> None:
    runner = CliRunner()
    url = f"sqlite:///{config_file.parent}/state/cdc.db"

    created = runner.invoke(cli, ["--config", str(config_file), "migrate"])
    again = runner.invoke(cli, ["--config", str(config_file), "migrate", "--json"])

    assert created.exit_code == 0, created.stderr
    assert created.stdout == f"state store {url}: created at schema revision {HEAD_REVISION}\n"
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout) == {"state_store": url, "revision": HEAD_REVISION, "was": HEAD_REVISION}
    assert _revision(url) == HEAD_REVISION


def test_migrate_verb_upgrades_an_older_store(config_file: Path) -> None:
    url = f"sqlite:///{config_file.parent}/state/cdc.db"
    _store_at(url, OLDER)

    result = CliRunner().invoke(cli, ["--config", str(config_file), "migrate"])

    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"state store {url}: upgraded from schema revision {OLDER} to {HEAD_REVISION}\n"
    assert _revision(url) == HEAD_REVISION
