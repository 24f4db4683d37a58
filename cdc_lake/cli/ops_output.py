"""How ``lag`` and ``validate`` print for people: short indented lines that wrap whole, never table cells."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

from cdc_lake.cli.output import format_duration, format_seconds
from cdc_lake.ops.alerts import RUNBOOKS, Breach
from cdc_lake.ops.lag import LagReport
from cdc_lake.validation import ValidateResult

Echo = Callable[[str], None]


def format_bytes(value: int | None) -> str:
    """``1536`` as ``1.5 KiB``; None as ``-``."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


WIDTH = 80


def wrapped(echo: Echo, width: int = WIDTH) -> Echo:
    """``echo`` that wraps each line at ``width`` between words (never inside a name or path),
    continuing with the line's indentation plus two spaces."""

    def echo_wrapped(line: str) -> None:
        indent = " " * (len(line) - len(line.lstrip(" ")))
        for part in textwrap.wrap(
            line, width, subsequent_indent=indent + "  ", break_long_words=False, break_on_hyphens=False
        ) or [""]:
            echo(part)

    return echo_wrapped


def render_lag(report: LagReport, found: Sequence[Breach], echo: Echo) -> None:
    """The report by part of the pipeline, then the breached thresholds with their runbooks."""
    echo = wrapped(echo)
    echo("Captures (what each primary keeps for its connectors)")
    for row in report.captures:
        lag = row.lag
        where = f"slot {lag.slot}" if lag.slot else f"binlog {lag.position or '-'}"
        echo(f"  {row.source} / {lag.connector} ({where}, tier {row.tier})")
        parts = [lag.status]
        if lag.active is not None:
            parts.insert(0, "active" if lag.active else "INACTIVE")
        parts.append(f"retained {format_bytes(lag.retained_bytes)}")
        parts.append(f"unconfirmed {format_bytes(lag.unconfirmed_bytes)}")
        if lag.safe_bytes is not None:
            parts.append(f"safe {format_bytes(lag.safe_bytes)}")
        if lag.files_ahead_of_purge is not None:
            parts.append(f"{lag.files_ahead_of_purge} older binlogs before it")
        echo("    " + ", ".join(parts))
    if report.replicas:
        echo("Read replicas")
    for replica in report.replicas:
        delay = replica.delay
        if delay is None:
            echo(f"  {replica.source}: unreachable")
            continue
        state = "replaying" if delay.replaying else "NOT REPLAYING"
        echo(
            f"  {replica.source}: {format_bytes(delay.behind_bytes)} and "
            f"{format_seconds(delay.behind_seconds)} behind, {state}"
        )
    if report.connectors:
        echo("Connectors")
    for connector in report.connectors:
        echo(
            f"  {connector.source} / {connector.connector}: {connector.state}, "
            f"{connector.tasks} tasks, {connector.failed_tasks} failed"
        )
    echo("Tables")
    if not report.tables:
        echo("  none onboarded")
    for table in report.tables:
        lag_text = "-" if table.kafka_lag_messages is None else f"{table.kafka_lag_messages:,}"
        echo(f"  {table.table} (tier {table.tier}): {table.state}")
        echo(
            f"    kafka lag {lag_text}, freshness {format_seconds(table.freshness_seconds)}, "
            f"last commit {table.last_commit or '-'}"
        )
    for error in report.errors:
        echo(f"error: {error}")
    if not found:
        echo("All thresholds met.")
        return
    echo(f"Thresholds breached ({len(found)}); runbooks in {RUNBOOKS}/ (cdc-lake runbook NAME prints one)")
    for breach in found:
        value, threshold = (_measured(number, breach.unit) for number in (breach.value, breach.threshold))
        echo(f"  {breach.alert}: {value} (threshold {threshold})")
        echo(f"    {breach.subject()}")
        echo(f"    see {RUNBOOKS}/{breach.runbook}.md")


def _measured(value: float, unit: str) -> str:
    """A breach's value or threshold for people: a duration, binary bytes, or a count with separators
    (``--json`` keeps the numbers)."""
    if unit == "seconds":
        return format_duration(value)
    if unit == "bytes":
        return format_bytes(int(value))
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,g}"


def render_validation(result: ValidateResult, echo: Echo) -> None:
    """Counts, ranges, then each kind of difference with the keys found."""
    echo = wrapped(echo)
    verdict = "matches" if result.matches else "DIFFERS"
    echo(f"{result.table}: {verdict} (at source position {result.position or '-'}, {result.seconds:.1f}s)")
    echo(f"  rows: source {result.source_rows:,}, lake {result.lake_rows:,}")
    echo(f"  key ranges: {result.ranges:,}, differing {result.differing_ranges:,}")
    if result.compared_rows:
        echo(f"  bisected in {result.levels} range levels; {result.compared_rows:,} rows joined by key")
    if not result.caught_up:
        echo("  note: the lake had not reached the Kafka end offsets; recent changes may show as differences")
    for kind in ("missing", "extra", "different"):
        count = getattr(result, f"{kind}_count")
        if not count:
            continue
        keys: list[dict[str, object]] = getattr(result, kind)
        echo(f"  {kind} in the lake: {count:,} keys" + (f" (first {len(keys)})" if len(keys) < count else ""))
        for key in keys:
            echo("    " + ", ".join(f"{name}={value}" for name, value in key.items()))
    if result.duplicate_count:
        shown = len(result.duplicate)
        more = f" (first {shown})" if shown < result.duplicate_count else ""
        echo(f"  duplicate in the lake: {result.duplicate_count:,} keys{more}")
        for found in result.duplicate:
            named = ", ".join(f"{k}={v}" for k, v in found.items() if k != "lake_rows")
            echo(f"    {found['lake_rows']} lake rows for key {named}")
