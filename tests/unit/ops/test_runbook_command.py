"""`cdc-lake runbook`: every page an alert or a message names is shipped and printed, no config needed."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from cdc_lake.cli.main import cli
from cdc_lake.ops.alerts import ALERTS, RUNBOOKS, runbook_names

ROOT = Path(__file__).resolve().parents[3]


def test_every_page_a_message_names_is_printed_by_the_command() -> None:
    named = {alert.runbook for alert in ALERTS}
    for path in [*ROOT.joinpath("cdc_lake").rglob("*.py"), *ROOT.joinpath("bootstrap").rglob("*.py")]:
        named.update(re.findall(rf"{RUNBOOKS}/([a-z0-9-]+)\.md", path.read_text(encoding="utf-8")))

    assert named and named <= set(runbook_names())
    for page in named:
        result = CliRunner().invoke(cli, ["runbook", f"{RUNBOOKS}/{page}.md"])
        assert result.exit_code == 0, result.output
        assert result.output.startswith("#"), result.output[:200]


def test_the_command_lists_the_pages_and_names_them_when_one_is_unknown() -> None:
    listed = CliRunner().invoke(cli, ["runbook"])
    unknown = CliRunner().invoke(cli, ["runbook", "no-such-page"])

    assert listed.exit_code == 0
    assert listed.output.split() == runbook_names()
    assert unknown.exit_code == 2
    assert unknown.stderr.count("\n") == 1
    assert "no runbook 'no-such-page'" in unknown.stderr and "table-failed" in unknown.stderr
