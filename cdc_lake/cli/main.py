"""``cdc-lake``: the command group and every verb of the CLI contract.

Verbs whose implementation lands in a later issue exist already, with their
arguments, and exit with code 3 saying so.  ``stack`` and ``demo`` live in
their own modules and are imported only when used.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cdc_lake.cli.context import CliContext, get_config
from cdc_lake.cli.group import CdcLakeGroup
from cdc_lake.cli.onboard_output import (
    render_checks,
    render_connector_statuses,
    render_offboard_report,
    render_onboard_report,
    render_plan,
)
from cdc_lake.cli.output import emit_json, render_status
from cdc_lake.config import find_config
from cdc_lake.exceptions import ConfigError, NotImplementedYetError
from cdc_lake.logging_setup import configure_logging
from cdc_lake.onboard.control import Action, control, statuses
from cdc_lake.onboard.offboard import OffboardRequest, source_of
from cdc_lake.onboard.offboard import offboard as offboard_target
from cdc_lake.onboard.preflight import raise_for_failures
from cdc_lake.onboard.run import DEFAULT_TIMEOUT, OnboardRequest, execute_onboarding, plan_onboarding
from cdc_lake.onboard.secrets import password_env
from cdc_lake.state.status import table_statuses
from cdc_lake.state.store import StateStore

OPERATIONS_ISSUE = "the operations issue"


def _not_implemented(verb: str, issue: str) -> NotImplementedYetError:
    return NotImplementedYetError(f"cdc-lake {verb} is not implemented yet: it arrives with {issue}")


@click.group(
    cls=CdcLakeGroup,
    lazy_subcommands={"stack": "cdc_lake.cli.stack:stack", "demo": "cdc_lake.cli.demo:demo"},
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Config file (default: ./cdc-lake.yaml).",
)
@click.option("-v", "--verbose", count=True, help="Log INFO (-v) or DEBUG (-vv) to stderr.")
@click.version_option(package_name="cdc-lake")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, verbose: int) -> None:
    """Replicate Postgres and MySQL/MariaDB tables into an Apache Hudi lakehouse through Debezium CDC.

    Tables are named source.schema.table (MySQL/MariaDB: source.database.table).
    """
    configure_logging(verbose)
    ctx.obj = CliContext(config_path=config_path, verbosity=verbose)


@cli.command()
@click.argument("source")
@click.option(
    "--tables",
    multiple=True,
    metavar="SCHEMA.TABLE",
    help="Onboard only these tables (repeatable; default: every table of SOURCE in the config).",
)
@click.option("--dry-run", is_flag=True, help="Check and print the connector configs, change nothing.")
@click.option(
    "--replica-identity-full",
    is_flag=True,
    help="Postgres: set REPLICA IDENTITY FULL where the default identity lacks old keys or TOASTed values.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for each connector to run and stream.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.pass_context
def onboard(
    ctx: click.Context,
    source: str,
    tables: tuple[str, ...],
    dry_run: bool,
    replica_identity_full: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Onboard SOURCE: check readiness, create its publication, register and start its Debezium connectors.

    Tier-0 tables get a connector (and Postgres slot) of their own. Re-running changes nothing;
    adding tables to the config and re-running adds them. Tables end up PENDING_BOOTSTRAP.
    """
    config = get_config(ctx)
    request = OnboardRequest(
        source=config.source(source).name,
        password_env=password_env(_config_file(ctx), source),
        tables=tables,
        replica_identity_full=replica_identity_full,
        timeout=timeout,
    )
    plan = plan_onboarding(config, request)
    if dry_run:
        if as_json:
            emit_json({**plan.to_json(), "dry_run": True, "would_change": plan.planned_changes()})
        else:
            render_checks(source, plan.checks)
            render_plan(plan)
        raise_for_failures(source, plan.checks)
        return
    if as_json:
        if plan.failed:
            emit_json(plan.to_json())
    else:
        render_checks(source, plan.checks)
    report = execute_onboarding(plan)
    if as_json:
        emit_json(report.to_json())
    else:
        render_onboard_report(report)


@cli.command()
@click.argument("target", metavar="SOURCE|TABLE")
@click.option(
    "--drop-slot",
    is_flag=True,
    help="Postgres: drop the slots and publications of deleted connectors (a kept slot holds WAL).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for a changed connector to run and stream.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.pass_context
def offboard(ctx: click.Context, target: str, drop_slot: bool, timeout: float, as_json: bool) -> None:
    """Stop replicating a source or one table (source.schema.table); the lake copy is kept.

    The table leaves its publication and connector; a tier-0 table's connector is deleted.
    A deleted connector's slot is kept (onboard resumes from it) unless --drop-slot: a kept
    slot holds WAL on the primary until dropped.
    """
    config = get_config(ctx)
    source = config.source(source_of(target)).name
    request = OffboardRequest(
        target=target,
        password_env=password_env(_config_file(ctx), source),
        drop_slot=drop_slot,
        timeout=timeout,
    )
    report = offboard_target(config, request)
    if as_json:
        emit_json(report.to_json())
    else:
        render_offboard_report(report)


def _config_file(ctx: click.Context) -> Path:
    """The config file the command loaded (``get_config`` has already required one)."""
    found = find_config((ctx.find_object(CliContext) or CliContext()).config_path)
    if found is None:
        raise ConfigError("no config file: pass --config PATH")
    return found


@cli.group()
def connectors() -> None:
    """Inspect and control the Debezium connectors of onboarded sources in Kafka Connect."""


@connectors.command("status")
@click.argument("source", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def connectors_status(ctx: click.Context, source: str | None, as_json: bool) -> None:
    """Show connector and task states (of SOURCE, or of every onboarded source), with failure traces."""
    rows = statuses(get_config(ctx), source)
    if as_json:
        emit_json(rows)
    else:
        render_connector_statuses(rows)


def _control(ctx: click.Context, source: str, action: Action, done: str) -> None:
    for name in control(get_config(ctx), source, action):
        click.echo(f"{done} {name}")


@connectors.command("pause")
@click.argument("source")
@click.pass_context
def connectors_pause(ctx: click.Context, source: str) -> None:
    """Pause the connectors of SOURCE (their slots keep WAL until they resume)."""
    _control(ctx, source, "pause", "paused")


@connectors.command("resume")
@click.argument("source")
@click.pass_context
def connectors_resume(ctx: click.Context, source: str) -> None:
    """Resume the paused connectors of SOURCE."""
    _control(ctx, source, "resume", "resumed")


@connectors.command("restart")
@click.argument("source")
@click.pass_context
def connectors_restart(ctx: click.Context, source: str) -> None:
    """Restart the connectors of SOURCE and their failed tasks."""
    _control(ctx, source, "restart", "restarted")


@cli.command()
@click.argument("tables", nargs=-1, metavar="[TABLE]...")
@click.option("--source", help="Bootstrap the tables of this source instead of naming them.")
@click.option(
    "--all-pending",
    is_flag=True,
    help="With --source: only tables awaiting bootstrap (PENDING_BOOTSTRAP, or interrupted BOOTSTRAPPING).",
)
@click.option(
    "--apply",
    "apply_backlog",
    is_flag=True,
    help=(
        "Then apply each table's backlog here until it is LIVE (batch by batch, taking turns with a "
        "running `cdc-lake run` through the table's apply lock)."
    ),
)
@click.option(
    "--parallel", type=click.IntRange(min=1), default=1, show_default=True,
    help=(
        "How many tables bootstrap at once (one Spark application); above 1, the watermarks and the "
        "replica wait of a source's tables are also taken once for all of them."
    ),
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of results instead of lines.")
@click.pass_context
def bootstrap(
    ctx: click.Context,
    tables: tuple[str, ...],
    source: str | None,
    all_pending: bool,
    apply_backlog: bool,
    parallel: int,
    as_json: bool,
) -> None:
    """Snapshot tables from the read replica into Hudi and hand them over to the applier.

    Saves the watermark (Kafka end offsets) first, waits for the replica to pass it, reads key-range
    partitions in parallel with Spark JDBC and bulk-inserts them; the table becomes CATCHING_UP once
    Debezium has streamed past the snapshot, and LIVE when the applier has caught up.  An interrupted
    or failed bootstrap resumes where it stopped when run again.
    """
    from bootstrap.parallel import bootstrap_concurrently
    from bootstrap.progress import BarView, LineView, ProgressView
    from bootstrap.run import BootstrapRequest, bootstrap_tables

    config = get_config(ctx)
    request = BootstrapRequest(tables, source, all_pending, apply_backlog)
    view: ProgressView
    if sys.stderr.isatty() and not as_json:
        view = BarView()
    else:
        view = LineView(lambda line: click.echo(line, err=as_json))
    try:
        if parallel > 1:
            results = bootstrap_concurrently(config, request, view, parallel)
        else:
            results = bootstrap_tables(config, request, view)
    finally:
        view.close()
    if as_json:
        emit_json([
            {
                "table": r.table,
                "state": r.state.value,
                "rows": r.rows,
                "partitions": r.partitions,
                "seconds": round(r.seconds, 3),
                "rows_per_second": None if r.rows_per_second is None else round(r.rows_per_second, 1),
                "note": r.note,
            }
            for r in results
        ])
        return
    if not results:
        click.echo("no tables to bootstrap")
    for r in results:
        rate = "" if r.rows_per_second is None else f" ({r.rows_per_second:,.0f} rows/s)"
        click.echo(f"{r.table}: {r.state.value}: {r.rows:,} rows in {r.seconds:.1f}s{rate}; {r.note}")


@cli.command()
@click.option("--once", is_flag=True, help="Catch up to the end offsets seen now, then exit.")
@click.option("--tables", multiple=True, metavar="TABLE", help="Apply only these tables (repeatable).")
@click.option("--tier", type=click.IntRange(min=0), help="Apply only tables of this tier.")
@click.option(
    "--parallel", type=click.IntRange(min=1), default=4, show_default=True,
    help="How many tables apply at once (one Spark application).",
)
@click.pass_context
def apply(ctx: click.Context, once: bool, tables: tuple[str, ...], tier: int | None, parallel: int) -> None:
    """Apply change events from Kafka to the Hudi tables, one Hudi commit per batch.

    With --once, each table catches up to the end offsets seen at start and the command exits,
    non-zero if any table failed.  Without it, the chosen tables apply continuously like `run`.
    """
    from cdc_lake.apply.commands import apply_once_command, run_command

    config = get_config(ctx)
    if once:
        apply_once_command(config, tables, tier, parallel, click.echo)
    else:
        run_command(config, tables, tier, parallel, click.echo)


@cli.command()
@click.option(
    "--parallel", type=click.IntRange(min=1), default=4, show_default=True,
    help="How many tables apply at once (one Spark application).",
)
@click.pass_context
def run(ctx: click.Context, parallel: int) -> None:
    """Run continuously: tier-0 tables apply without pause, other tiers at their interval.

    Freshness and lag are recorded per table for `status`.  SIGTERM or Ctrl-C lets running batches
    finish, then exits.
    """
    from cdc_lake.apply.commands import run_command

    run_command(get_config(ctx), (), None, parallel, click.echo)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Show every onboarded table: state, tier, lake path, last commit, applied offsets, freshness."""
    config = get_config(ctx)
    with StateStore.open(config.state_store.url) as store:
        statuses = table_statuses(store)
        if as_json:
            from bootstrap.progress import bootstrap_status

            emit_json([
                {**row.to_json(), "bootstrap": bootstrap_status(store, row.name, row.state)}
                for row in statuses
            ])
            return
    render_status(statuses)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def lag(as_json: bool) -> None:
    """Show replication slot / binlog lag and Kafka consumer lag per source and table.

    Not implemented yet: arrives with the operations issue.
    """
    raise _not_implemented("lag", OPERATIONS_ISSUE)


@cli.command()
@click.argument("tables", nargs=-1, required=True, metavar="TABLE...")
def validate(tables: tuple[str, ...]) -> None:
    """Compare row counts and checksums of tables between the source and the lake.

    Not implemented yet: arrives with the operations issue.
    """
    raise _not_implemented("validate", OPERATIONS_ISSUE)


@cli.command()
@click.argument("tables", nargs=-1, required=True, metavar="TABLE...")
def rebootstrap(tables: tuple[str, ...]) -> None:
    """Discard the lake copy of tables and bootstrap them again (lost slot, breaking schema change).

    Not implemented yet: arrives with the operations issue.
    """
    raise _not_implemented("rebootstrap", OPERATIONS_ISSUE)


def main() -> None:
    """Entry point of the ``cdc-lake`` script.

    The group catches every CdcLakeError: it prints ``error: <message>`` on one
    line to stderr and exits with the error's exit code.
    """
    cli(prog_name="cdc-lake")
