"""How ``onboard``, ``offboard`` and ``connectors`` print for people: rich tables and plain lines.

Tables fit the terminal without cutting a name (:func:`cdc_lake.cli.output.print_table`); a connector
config is printed as JSON whose lines are never wrapped, so it can be pasted whatever the width.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cdc_lake.cli.output import Column, print_table
from cdc_lake.onboard.offboard import OffboardReport
from cdc_lake.onboard.run import OnboardPlan, OnboardReport
from cdc_lake.redaction import mask_mapping
from cdc_lake.sources.checks import CheckResult, Outcome

_OUTCOME_STYLE = {Outcome.PASS: "green", Outcome.WARN: "yellow", Outcome.FAIL: "bold red"}
_OUTCOMES = (Column("connector", identifier=True), Column("outcome", identifier=True))
"""The columns of what onboard and offboard did to each connector."""
_TABLE_FRAME_WIDTH = 10
"""Columns a three-column rich table spends on its four borders and each cell's padding."""


def _console() -> Console:
    return Console(soft_wrap=False)


def _table(title: str, columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> None:
    print_table(_console(), title, columns, list(rows))


def render_checks(source: str, checks: Sequence[CheckResult]) -> None:
    """One line per preflight check (name, result, what was found), then each problem whole.

    The table's cells never wrap: what a passed check found is cut to the terminal's width, and what a
    failed or warning check found, with its fix, is printed below the table as whole lines, never as
    cells that 80 columns would cut into fragments.
    """
    console = _console()
    name_width = max((len(check.name) for check in checks), default=len("check"))
    result_width = len("result")
    table = Table(title=f"preflight: {source}")
    table.add_column("check", no_wrap=True, min_width=name_width)
    table.add_column("result", no_wrap=True, min_width=result_width)
    # Rich shrinks every no-wrap column to fit (to nothing, at worst): the detail gets what is left.
    rest = console.width - name_width - result_width - _TABLE_FRAME_WIDTH
    table.add_column("detail", no_wrap=True, overflow="ellipsis", max_width=max(rest, len("detail")))
    problems = [check for check in checks if check.outcome is not Outcome.PASS]
    for check in checks:
        result = Text(check.outcome.value.upper(), style=_OUTCOME_STYLE[check.outcome])
        detail = "see below" if check in problems else check.detail
        table.add_row(Text(check.name), result, Text(detail))
    console.print(table)
    for check in problems:
        lines = [f"{check.outcome.value.upper()} {check.name}: {check.detail}"]
        if check.fix:
            lines.append(f"  fix: {check.fix}")
        for line in lines:
            console.print(Text(line), soft_wrap=True)


def render_plan(plan: OnboardPlan) -> None:
    """The connectors a dry run would register (configs redacted) and the changes it would make."""
    rows = [
        (
            connector.name,
            "0" if connector.tier0 else "shared",
            ", ".join(connector.capture.table_names),
            connector.capture.ids.describe(),
            connector.heartbeat_topic,
        )
        for connector in plan.connectors
    ]
    columns = (
        Column("connector", identifier=True),
        Column("tier", priority=2),
        Column("tables", identifier=True),
        Column("slot", priority=1, identifier=True),
        Column("heartbeat topic", priority=3, identifier=True),
    )
    _table("connectors", columns, rows)
    for connector in plan.connectors:
        render_connector_config(connector.name, plan.configs[connector.name])
    _lines("dry run, would change:", plan.planned_changes(), "dry run: nothing would change")


def render_connector_config(name: str, config: Mapping[str, str]) -> None:
    """``config`` (secrets masked) as indented JSON, its lines never wrapped: it pastes as printed."""
    console = _console()
    console.print(f"connector config {name}:", markup=False, highlight=False)
    dump = json.dumps(mask_mapping(config), indent=2)
    console.print(dump, markup=False, highlight=False, soft_wrap=True)


def _lines(title: str, lines: Sequence[str], empty: str | None = None) -> None:
    console = _console()
    if lines or empty is not None:
        console.print(title if lines else empty, markup=False, highlight=False)
    for line in lines:
        console.print(f"  - {line}", markup=False, highlight=False)


def render_onboard_report(report: OnboardReport) -> None:
    """Connectors and what this run changed (nothing, on a re-run)."""
    _table(f"connectors: {report.source}", _OUTCOMES, sorted(report.connectors.items()))
    _lines("changed:", report.actions, "nothing changed: the source was already onboarded as configured")
    _lines("warnings:", report.warnings)


def render_offboard_report(report: OffboardReport) -> None:
    """Connectors touched, what changed, and warnings about kept slots."""
    _table(f"offboard: {report.target}", _OUTCOMES, sorted(report.connectors.items()))
    _lines("changed:", report.actions, "nothing changed")
    _lines("warnings:", report.warnings)


def render_connector_statuses(rows: Sequence[Mapping[str, Any]]) -> None:
    """One row per connector with its task states; failed traces below the table."""
    console = _console()
    if not rows:
        console.print("No onboarded connectors: run cdc-lake onboard SOURCE.", markup=False, highlight=False)
        return
    table_rows = [
        (
            str(row["source"]),
            str(row["name"]),
            str(row["state"]),
            " ".join(f"{task['id']}:{task['state']}" for task in row["tasks"]) or "-",
            str(row["worker"] or "-"),
        )
        for row in rows
    ]
    columns = (
        Column("source", priority=2, identifier=True),
        Column("connector", identifier=True),
        Column("state"),
        Column("tasks", priority=1, identifier=True),
        Column("worker", priority=3, identifier=True),
    )
    _table("connectors", columns, table_rows)
    for row in rows:
        traces = [row.get("trace"), *(task.get("trace") for task in row["tasks"])]
        for trace in filter(None, traces):
            first = str(trace).strip().splitlines()[0]
            console.print(f"{row['name']}: {first}", markup=False, highlight=False)
