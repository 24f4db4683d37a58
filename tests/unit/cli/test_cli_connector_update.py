"""The connector update a re-bootstrap runs is onboarding's, wired by the command line.

``bootstrap/`` never imports onboarding: ``cdc-lake rebootstrap`` takes
:func:`cdc_lake.cli.context.connector_update`, which hands onboarding's ``update_connectors`` the
password variable the config file names for the source.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from support.configs import config_file

from cdc_lake.cli.context import CliContext, connector_update
from cdc_lake.config import load_config


def _context(path: Path) -> click.Context:
    return click.Context(click.Command("rebootstrap"), obj=CliContext(config_path=path))


def test_the_update_is_onboardings_with_the_config_files_password_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = config_file(tmp_path, "${PG_PW:-local}")
    config = load_config(path)
    calls: list[tuple[object, ...]] = []

    def update(*args: object) -> list[str]:
        calls.append(args)
        return ["update connector cdc-lake.pg to capture public.t"]

    monkeypatch.setattr("cdc_lake.onboard.run.update_connectors", update)

    actions = connector_update(_context(path))(config, "pg", "public.t")

    assert actions == ["update connector cdc-lake.pg to capture public.t"]
    assert calls == [(config, "pg", "public.t", "PG_PW")]

