"""How commands print: JSON for machines, rich tables for people (rich is imported when a table is drawn).

A table for people fits the terminal without cutting a name (:func:`print_table`): too wide, it first
leaves out its least important columns and says which (``--json`` has every field), then wraps names
after a separator (``bench.public.`` / ``pgbench_accounts``, :func:`wrap_identifier`), never inside
one; when even that cannot fit, the table is printed wider than the terminal rather than cut.  Long
values (paths, offsets, errors) are whole lines below a table, never cells.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console

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


@dataclass(frozen=True)
class Column:
    """A column of a table for people: its header and how it gives way on a narrow terminal."""

    name: str
    priority: int = 0
    """0: always shown.  Else it may be left out, the highest number first: 2 and up before any name
    wraps, 1 only when wrapping the names is not enough."""
    identifier: bool = False
    """Its cells are names: wrapped after a separator (:func:`wrap_identifier`), never inside a name."""


_AFTER_SEPARATOR = re.compile(r"(?<=[.,/ -])")


def wrap_identifier(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width``, broken only after ``.``, ``,``, ``/``, ``-`` or a space; a
    piece longer than ``width`` stays whole on its own line."""
    lines: list[str] = []
    current = ""
    for piece in filter(None, _AFTER_SEPARATOR.split(text)):
        if current and len(current) + len(piece) > width:
            lines.append(current)
            current = piece
        else:
            current += piece
    return [*lines, current]


def _frame(columns: int) -> int:
    """Columns a rich table spends on borders (one per column and one more) and padding (two per column)."""
    return 3 * columns + 1


def print_table(
    console: Console,
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    below: Collection[str] = (),
) -> list[str]:
    """Print ``rows`` under ``columns`` within ``console.width`` without cutting a cell (module docstring).

    Returns the names of the columns left out; a note names them, but for those in ``below``, whose
    values the caller prints below the table.
    """
    from rich.table import Table
    from rich.text import Text

    def natural(i: int) -> int:
        return max([len(columns[i].name), *(len(row[i]) for row in rows)])

    def narrowest(i: int) -> int:
        if not columns[i].identifier:
            return natural(i)
        pieces = (len(piece) for row in rows for piece in _AFTER_SEPARATOR.split(row[i]))
        return max([len(columns[i].name), *pieces])

    def total(shown: list[int], width_of: dict[int, int]) -> int:
        return sum(width_of[i] for i in shown) + _frame(len(shown))

    widths = {i: natural(i) for i in range(len(columns))}
    minimums = {i: narrowest(i) for i in range(len(columns))}
    shown = list(range(len(columns)))

    def leave_out(least: int, fits: dict[int, int]) -> None:
        while total(shown, fits) > console.width:
            droppable = [i for i in shown if columns[i].priority >= least]
            if not droppable:
                return
            shown.remove(max(reversed(droppable), key=lambda i: columns[i].priority))

    leave_out(2, widths)
    leave_out(1, minimums)
    # Names give up what is still too much, the widest first, down to their longest piece.
    while total(shown, widths) > console.width:
        names = [i for i in shown if columns[i].identifier and widths[i] > minimums[i]]
        if not names:
            break
        widest = max(names, key=lambda i: widths[i])
        widths[widest] = max(minimums[widest], widths[widest] - (total(shown, widths) - console.width))
    table = Table(title=title)
    for i in shown:
        table.add_column(columns[i].name, no_wrap=True, min_width=widths[i], max_width=widths[i])
    for row in rows:
        cells = (
            "\n".join(wrap_identifier(row[i], widths[i])) if columns[i].identifier else row[i] for i in shown
        )
        # Text cells: names and paths are data, never rich markup.
        table.add_row(*(Text(cell) for cell in cells))
    console.print(table, width=max(console.width, total(shown, widths)))
    left_out = [columns[i].name for i in range(len(columns)) if i not in shown]
    unnamed = [name for name in left_out if name not in below]
    if unnamed:
        note = f"not shown at {console.width} columns: {', '.join(unnamed)} (--json has every field)"
        console.print(Text(note), soft_wrap=True)
    return left_out


def render_status(statuses: Sequence[TableStatus]) -> None:
    """Print one row of short values per table, then each table's lake path, offsets and last error.

    Paths and offsets are printed as whole lines below the table, never as cells: at 80 columns a
    cell would cut them into fragments.  So is the last commit when the table leaves its column out.
    """
    from rich.console import Console
    from rich.text import Text

    console = Console(soft_wrap=False)
    if not statuses:
        console.print("No tables onboarded yet: run [bold]cdc-lake onboard SOURCE[/bold].")
        return
    columns = (
        Column("table", identifier=True),
        Column("state"),
        Column("tier", priority=2),
        Column("last commit", priority=3),
        Column("freshness", priority=1),
        Column("lag", priority=1),
    )
    rows = [
        (
            status.name,
            status.state.value,
            str(status.tier),
            status.last_commit or "-",
            format_seconds(status.freshness_seconds),
            "-" if status.lag_messages is None else f"{status.lag_messages:,}",
        )
        for status in statuses
    ]
    left_out = print_table(console, "cdc-lake tables", columns, rows, below={"last commit"})
    for status in statuses:
        offsets = " ".join(f"{p}:{o}" for p, o in sorted(status.applied_offsets.items())) or "-"
        lines = [f"{status.name}", f"  lake: {status.lake_base_path}", f"  applied offsets: {offsets}"]
        if "last commit" in left_out:
            lines.append(f"  last commit: {status.last_commit or '-'}")
        if status.last_error:
            lines.append(f"  error: {status.last_error}")
        if status.possibly_diverged:
            lines.append(f"  possibly diverged: {status.possibly_diverged}")
        for line in lines:
            console.print(Text(line), soft_wrap=True)
