"""`cdc-lake stack up|down|status|kafka|trino`: the local stack every test and the demo run against.

``kafka`` and ``trino`` run Kafka's and Trino's own command-line tools pointed at the stack, with the
tool's exit code.

The services (and the drivers and boto3 they use) are imported when a command runs, not for ``--help``.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from cdc_lake.cli.context import get_config
from cdc_lake.cli.output import emit_json
from cdc_lake.exceptions import StackError

if TYPE_CHECKING:
    from cdc_lake.stack.manager import LocalStack
    from cdc_lake.stack.service import ServiceStatus


def _local_stack(ctx: click.Context, with_services: tuple[str, ...] = ()) -> LocalStack:
    from cdc_lake.stack.manager import LocalStack

    return LocalStack(get_config(ctx, allow_default=True).stack, with_services)


def _print_statuses(statuses: list[ServiceStatus]) -> None:
    """One row of short values per service, then each service's address and log as whole lines.

    Addresses and log paths never go into cells: at 80 columns a cell would cut them into fragments.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(soft_wrap=False)
    table = Table(title="cdc-lake local stack")
    for column in ("service", "state", "detail"):
        table.add_column(column, overflow="fold")
    for status in statuses:
        state = (
            "[green]healthy[/green]"
            if status.healthy
            else ("[yellow]unhealthy[/yellow]" if status.running else "[red]stopped[/red]")
        )
        table.add_row(Text(status.name), state, Text(status.detail))
    console.print(table)
    for status in statuses:
        for line in (status.name, f"  address: {status.address}", f"  log: {status.log}"):
            console.print(Text(line), soft_wrap=True)


@click.group()
def stack() -> None:
    """Run the local stack on 127.0.0.1: Postgres and MariaDB (each with a replica), Kafka (KRaft),
    Kafka Connect with Debezium, a Confluent-API schema registry and an S3-compatible store.

    Everything is installed on first use from Debian packages, Maven Central and the Go proxy,
    and lives in one data directory (`stack.data_dir`, default .cdc-lake/stack).
    """


@stack.command()
@click.option(
    "--with",
    "with_services",
    multiple=True,
    metavar="SERVICE",
    help="Also run an optional service: trino (a SQL reader of the lake; needs Java 24+).",
)
@click.option("--json", "as_json", is_flag=True, help="Print statuses and timings as JSON.")
@click.pass_context
def up(ctx: click.Context, with_services: tuple[str, ...], as_json: bool) -> None:
    """Install what is missing, start what is not running, wait until every service is healthy."""
    from rich.console import Console

    local = _local_stack(ctx, with_services)
    console = Console(stderr=True)
    began = time.monotonic()
    with console.status("starting the local stack") as spinner:
        timings = local.up(progress=lambda message: spinner.update(message))
    statuses = local.status()
    if as_json:
        emit_json({"services": [asdict(s) for s in statuses], "timings": asdict(timings)})
    else:
        _print_statuses(statuses)
        click.echo(
            f"stack up in {time.monotonic() - began:.0f}s "
            f"(install {timings.install_seconds:.0f}s, start {timings.start_seconds:.0f}s)"
        )
    unhealthy = [s.name for s in statuses if not s.healthy]
    if unhealthy:
        raise StackError(f"unhealthy after start: {', '.join(unhealthy)}")


@stack.command()
@click.option("--json", "as_json", is_flag=True, help='Print {"stopped": [SERVICE, ...]} instead of a line.')
@click.pass_context
def down(ctx: click.Context, as_json: bool) -> None:
    """Stop the services this stack started (data is kept)."""
    stopped = _local_stack(ctx).down()
    if as_json:
        emit_json({"stopped": stopped})
    else:
        click.echo(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@stack.command()
@click.option("--json", "as_json", is_flag=True, help="Print statuses as JSON.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Report each service: running, healthy, address, log file. Exits 1 if any is not healthy."""
    statuses = _local_stack(ctx).status()
    if as_json:
        emit_json([asdict(s) for s in statuses])
    else:
        _print_statuses(statuses)
    if not all(s.healthy for s in statuses):
        ctx.exit(1)


@stack.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("tool")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def kafka(ctx: click.Context, tool: str, args: tuple[str, ...]) -> None:
    """Run Kafka's TOOL against the stack's broker (--bootstrap-server is set): consumer-groups,
    topics, get-offsets or console-consumer, as kafka-TOOL.sh would.

    Example: cdc-lake stack kafka consumer-groups --describe --all-groups
    """
    import subprocess

    from cdc_lake.stack.tools import kafka_tool_argv

    argv = kafka_tool_argv(_local_stack(ctx).layout, tool, args)
    ctx.exit(subprocess.run(argv, check=False).returncode)


@stack.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def trino(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Run Trino's client against the stack's Trino (up --with trino), catalog hudi: lake tables are
    hudi.DATABASE.TABLE, DATABASE being catalog.hive.database.

    Example: cdc-lake stack trino --execute "show tables from hudi.lake"
    """
    import subprocess

    from cdc_lake.stack.tools import trino_cli_argv

    settings = get_config(ctx, allow_default=True).stack
    argv = trino_cli_argv(_local_stack(ctx).layout, settings.trino.java_home, args)
    ctx.exit(subprocess.run(argv, check=False).returncode)
