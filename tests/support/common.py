"""What every integration test module needs: unique names, a poll, the CLI in-process, config files.

:func:`write_config` is the one writer of a config file; :func:`write_config_in` (state store and lake
in a directory, for onboarding tests) and :func:`support.bootstrap.write_db_config` (a throwaway source
database on the stack) build their data and call it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from cdc_lake.cli.main import cli
from cdc_lake.config import Config, load_config

PASSWORD_REF = "${CDC_LAKE_DB_PASSWORD:-cdc-lake-local}"
"""The password of the stack's ``cdc`` user as a config reference (the Connect worker has the variable)."""
ONE_LINE_ERROR = "error: "


def suffix() -> str:
    """A short random suffix for this run's names, so reruns against the same stack never collide."""
    return uuid.uuid4().hex[:8]


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` every half second until it holds, or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def write_config(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` as the YAML config file at ``path`` (its directory created); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(data), sort_keys=False), encoding="utf-8")
    return path


def write_config_in(directory: Path, sources: dict[str, dict[str, Any]], **sections: Any) -> Path:
    """``directory/cdc-lake.yaml`` with its own SQLite state store and lake in ``directory``, ``sources``
    and extra ``sections`` (which replace the state store and lake when named)."""
    data = {
        "state_store": {"url": f"sqlite:///{directory / 'state.db'}"},
        "lake": {"base_path": str(directory / "lake")},
        **sections,
        "sources": sources,
    }
    return write_config(directory / "cdc-lake.yaml", data)


def write_and_load(path: Path, data: Mapping[str, Any]) -> Config:
    """:func:`write_config`, then the config loaded back."""
    return load_config(write_config(path, data))


def load(config_path: Path) -> Config:
    """The config at ``config_path``."""
    return load_config(config_path)


def cli_run(config: Path, *args: str) -> Result:
    """``cdc-lake --config CONFIG ARGS...`` in-process."""
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def run_json(config: Path, *args: str) -> Any:
    """Run a command with ``--json`` that must succeed, and return its JSON output."""
    result = cli_run(config, *args, "--json")
    assert result.exit_code == 0, result.stderr or result.output
    return json.loads(result.stdout)


def assert_one_line_failure(result: Result, *fragments: str, exit_code: int = 1) -> None:
    """The command failed with one ``error:`` line on stderr containing every fragment."""
    assert result.exit_code == exit_code, result.output
    assert result.stderr.startswith(ONE_LINE_ERROR), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
