"""``--json`` on every verb, with the same conventions: JSON on stdout, notes for people on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import cdc_lake.__main__ as main_module
from cdc_lake.cli.main import cli
from cdc_lake.ops.alerts import runbook_names


def _leaves(command: click.Command, ctx: click.Context, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    if not isinstance(command, click.Group):
        return [path]
    found = []
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        assert sub is not None, name
        found.extend(_leaves(sub, ctx, (*path, name)))
    return found


def test_every_verb_has_json() -> None:
    with click.Context(cli) as ctx:
        leaves = _leaves(cli, ctx, ())
        commands = {path: cli.get_command(ctx, path[0]) for path in leaves}

    def command_of(path: tuple[str, ...]) -> click.Command:
        found = commands[path]
        for name in path[1:]:
            assert isinstance(found, click.Group)
            found = found.commands[name]
        return found

    def passes_through(command: click.Command) -> bool:
        """A verb that hands its arguments to another program (Kafka's or Trino's client): that program's
        own output options apply (Trino's --output-format JSON), and a --json of ours would shadow them."""
        return any(isinstance(p.type, click.types.UnprocessedParamType) for p in command.params)

    missing = [
        " ".join(p)
        for p in leaves
        if not any("--json" in o.opts for o in command_of(p).params) and not passes_through(command_of(p))
    ]
    assert missing == []
    assert sum(passes_through(command_of(p)) for p in leaves) == 2, "only stack kafka and stack trino"


def _json(*args: str) -> object:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_runbook_json_lists_the_pages_and_prints_one() -> None:
    assert _json("runbook") == [
        {"name": name, "path": f"docs/runbooks/{name}.md"} for name in runbook_names()
    ]
    page = _json("runbook", "table-failed")
    assert isinstance(page, dict)
    assert page["name"] == "table-failed" and page["markdown"].startswith("#")


def test_spark_entrypoint_and_package_lists_as_json() -> None:
    assert _json("spark", "entrypoint") == {"entrypoint": main_module.__file__}
    coordinates = _json("spark", "jars", "--coordinates")
    assert isinstance(coordinates, dict) and all(c.count(":") == 2 for c in coordinates["coordinates"])
    excludes = _json("spark", "jars", "--excludes")
    assert isinstance(excludes, dict) and excludes["excludes"]


def test_stack_down_json_names_what_it_stopped(tmp_path: Path) -> None:
    # A data directory of its own: nothing of the shared stack is touched.
    config = tmp_path / "cdc-lake.yaml"
    config.write_text(f"stack:\n  data_dir: {tmp_path / 'stack'}\n", encoding="utf-8")

    assert _json("--config", str(config), "stack", "down") == {"stopped": []}


@pytest.mark.parametrize("args", [["demo", "--help"]])
def test_demo_json_is_documented(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)

    assert "--json" in result.stdout and "stderr" in result.stdout
