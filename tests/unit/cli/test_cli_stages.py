"""The bootstrap stage reaches the command line by the entry point its package registers."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from cdc_lake.cli.main import cli
from cdc_lake.cli.stages import bootstrap_stage

STAGE_VERBS = ("bootstrap", "validate", "repair", "rebootstrap")


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

