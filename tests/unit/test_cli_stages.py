"""The bootstrap stage reaches the command line by its entry point, and its absence is one clear line."""

from __future__ import annotations

from importlib.metadata import EntryPoints

import click
import pytest
from click.testing import CliRunner

from cdc_lake.cli import stages
from cdc_lake.cli.main import cli
from cdc_lake.cli.stages import BOOTSTRAP, STAGE_GROUP, bootstrap_stage
from cdc_lake.exceptions import StageNotInstalledError

STAGE_VERBS = ("bootstrap", "validate", "rebootstrap")


def test_the_installed_package_registers_the_bootstrap_stage_with_its_commands() -> None:
    stage = bootstrap_stage()

    assert set(stage.commands) == set(STAGE_VERBS)
    assert all(isinstance(command, click.Command) for command in stage.commands.values())
    assert callable(stage.progress)


@pytest.mark.parametrize("verb", STAGE_VERBS)
def test_stage_verbs_run_from_the_registered_stage(verb: str) -> None:
    result = CliRunner().invoke(cli, [verb, "--help"])

    assert result.exit_code == 0, result.output
    assert f"Usage: cli {verb}" in result.stdout


@pytest.fixture
def no_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on an install whose bootstrap package registers nothing."""
    monkeypatch.setattr(stages, "entry_points", lambda **_: EntryPoints(()))


@pytest.mark.usefixtures("no_stage")
def test_a_missing_stage_is_one_line_naming_what_to_install() -> None:
    with pytest.raises(StageNotInstalledError) as raised:
        bootstrap_stage()

    message = str(raised.value)
    assert "\n" not in message
    assert f"no {BOOTSTRAP!r} entry point in group {STAGE_GROUP}" in message
    assert "pip install cdc-lake" in message


@pytest.mark.usefixtures("no_stage")
def test_without_the_stage_its_verbs_are_not_listed_and_say_what_to_install() -> None:
    with click.Context(cli) as ctx:
        names = set(cli.list_commands(ctx))
    result = CliRunner().invoke(cli, ["bootstrap", "--source", "pg"])

    assert not names & set(STAGE_VERBS)
    assert "status" in names
    assert result.exit_code == StageNotInstalledError.exit_code
    assert result.stderr.strip().startswith("error: the bootstrap stage is not installed")
    assert len(result.stderr.strip().splitlines()) == 1
