"""Every ``cdc-lake …`` command the runbooks and docs/operations.md tell an operator to run exists.

Commands are taken from inline code (`` `cdc-lake …` ``) and code blocks (indented or fenced) of
docs/runbooks/*.md and docs/operations.md.  Each must name a real (sub)command whose options all
exist, and that command's ``--help`` must run: a renamed verb or option fails here, not during an
incident.  The pages of the FAILED states name their way out as such a command.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cdc_lake.cli.main import cli
from cdc_lake.ops.alerts import ALERTS
from cdc_lake.stack.tools import KAFKA_TOOLS

ROOT = Path(__file__).resolve().parents[3]
PAGES = [*sorted((ROOT / "docs" / "runbooks").glob("*.md")), ROOT / "docs" / "operations.md"]

_INLINE = re.compile(r"`(cdc-lake [^`]+)`")


@dataclass(frozen=True)
class DocCommand:
    """One ``cdc-lake`` command line found in a page."""

    page: str
    line: int
    text: str


def doc_commands(page: Path) -> list[DocCommand]:
    """The ``cdc-lake`` command lines of ``page``: inline code spans and code-block lines."""
    found: list[DocCommand] = []
    fenced = False
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        stripped = line.strip()
        if (fenced or line.startswith("    ")) and stripped.startswith("cdc-lake "):
            found.append(DocCommand(page.name, number, stripped.split("#", 1)[0].strip()))
        elif not fenced:
            found.extend(DocCommand(page.name, number, text) for text in _INLINE.findall(line))
    return found


def resolve(text: str) -> tuple[list[str], click.Command, list[str]]:
    """The command path, the click command and the options used by the command line ``text``."""
    words = [word.strip("[]") for word in shlex.split(text)[1:]]
    command: click.Command = cli
    path: list[str] = []
    ctx = click.Context(cli)
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        sub = command.get_command(ctx, words[0])
        assert sub is not None, f"{text!r}: {' '.join(['cdc-lake', *path])} has no command {words[0]!r}"
        path.append(words.pop(0))
        command = sub
    options = [word.split("=", 1)[0] for word in words if word.startswith("-") and word != "-"]
    return path, command, options


ALL = [command for page in PAGES for command in doc_commands(page)]


def test_the_pages_name_commands() -> None:
    pages = {command.page for command in ALL}
    assert {f"{alert.runbook}.md" for alert in ALERTS} <= pages
    assert len(ALL) > 30


@pytest.mark.parametrize("command", ALL, ids=[f"{c.page}:{c.line}" for c in ALL])
def test_each_documented_command_and_option_exists(command: DocCommand) -> None:
    path, found, options = resolve(command.text)
    assert path, f"{command.page}:{command.line}: {command.text!r} names no subcommand"
    assert not isinstance(found, click.Group), f"{command.page}:{command.line}: {command.text!r} is a group"
    if any(isinstance(param.type, click.types.UnprocessedParamType) for param in found.params):
        # Kafka's or Trino's own client: the options are the tool's; the Kafka tool's name must exist.
        if path == ["stack", "kafka"]:
            tool = command.text.split("stack kafka", 1)[1].split()[0]
            assert tool in {*KAFKA_TOOLS, "TOOL"}, f"{command.page}:{command.line}: no Kafka tool {tool!r}"
        return
    known = {
        *(opt for param in found.params for opt in (*param.opts, *param.secondary_opts)),
        *cli.get_help_option_names(click.Context(cli)),
    }
    global_options = {opt for param in cli.params for opt in param.opts}
    unknown = [opt for opt in options if opt not in known and opt not in global_options]
    assert not unknown, f"{command.page}:{command.line}: {command.text!r}: no option {unknown}"


@pytest.mark.parametrize(
    "path", sorted({tuple(resolve(c.text)[0]) for c in ALL}), ids=lambda p: " ".join(p)
)
def test_each_documented_command_runs(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="cdc-lake")
    assert result.exit_code == 0, result.output
    assert "Usage: cdc-lake " + " ".join(path) in result.output


def test_the_resolver_catches_drift() -> None:
    with pytest.raises(AssertionError, match="has no command 'resart'"):
        resolve("cdc-lake connectors resart SOURCE")
    path, command, options = resolve("cdc-lake offboard SOURCE --drop-slots")
    assert path == ["offboard"] and "--drop-slots" in options
    assert "--drop-slots" not in {opt for param in command.params for opt in param.opts}


@pytest.mark.parametrize(
    "page",
    [
        "table-failed.md",
        "connector-failed.md",
        "position-lost.md",
        "schema-changed.md",
        "possibly-diverged.md",
    ],
)
def test_failed_states_name_their_way_out(page: str) -> None:
    text = (ROOT / "docs" / "runbooks" / page).read_text()
    fix = text[text.index("**Fix") :]
    assert _INLINE.search(fix), f"{page}: the fix names no cdc-lake command"
