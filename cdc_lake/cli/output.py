"""How commands print: JSON for machines, rich tables for people (rich is imported when a table is drawn)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cdc_lake.state.status import TableStatus


def emit_json(value: object) -> None:
    """Print ``value`` as indented JSON on stdout."""
    click.echo(json.dumps(value, indent=2, sort_keys=False))


def _clock(seconds: float) -> tuple[int, int, int]:
    """Whole hours, minutes and seconds of ``seconds``."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return hours, minutes, secs


def format_seconds(seconds: float | None) -> str:
    """``95.2`` as ``1m35s`` (the two largest units, for a table cell); None as ``-``."""
    if seconds is None:
        return "-"
    hours, minutes, secs = _clock(seconds)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_duration(seconds: float) -> str:
    """Every unit of ``seconds`` that is not 0, to the second: ``1965.1`` as ``32m45s``, ``300`` as ``5m``,
    ``5400`` as ``1h30m``; under a second as it is (``0.5s``)."""
    if abs(seconds) < 1:
        return f"{seconds:g}s"
    parts = zip(_clock(abs(seconds)), "hms", strict=True)
    return ("-" if seconds < 0 else "") + "".join(f"{value}{unit}" for value, unit in parts if value)


def render_status(statuses: Sequence[TableStatus]) -> None:
    """Print one row of short values per table, then each table's lake path, offsets and last error.

    Paths and offsets are printed as whole lines below the table, never as cells: at 80 columns a
    cell would cut them into fragments.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(soft_wrap=False)
    if not statuses:
        console.print("No tables onboarded yet: run [bold]cdc-lake onboard SOURCE[/bold].")
        return
    table = Table(title="cdc-lake tables")
    for column in ("table", "state", "tier", "last commit", "freshness", "lag"):
        table.add_column(column, overflow="fold", no_wrap=column != "table")
    for status in statuses:
        cells = (
            status.name,
            status.state.value,
            str(status.tier),
            status.last_commit or "-",
            format_seconds(status.freshness_seconds),
            "-" if status.lag_messages is None else f"{status.lag_messages:,}",
        )
        # Text cells: names and paths are data, never rich markup.
        table.add_row(*(Text(cell) for cell in cells))
    console.print(table)
    for status in statuses:
        offsets = " ".join(f"{p}:{o}" for p, o in sorted(status.applied_offsets.items())) or "-"
        lines = [f"{status.name}", f"  lake: {status.lake_base_path}", f"  applied offsets: {offsets}"]
        if status.last_error:
            lines.append(f"  error: {status.last_error}")
        if status.possibly_diverged:
            lines.append(f"  possibly diverged: {status.possibly_diverged}")
        for line in lines:
            console.print(Text(line), soft_wrap=True)
