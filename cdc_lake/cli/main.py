"""``cdc-lake``: the command group and every verb of the CLI contract.

Verbs whose implementation lands in a later issue exist already, with their
arguments, and exit with code 3 saying so.  ``stack`` and ``demo`` live in
their own modules and are imported only when used.
"""

from __future__ import annotations

from pathlib import Path

import click

from cdc_lake.cli.context import CliContext, get_config
from cdc_lake.cli.group import CdcLakeGroup
from cdc_lake.cli.output import emit_json, render_status
from cdc_lake.exceptions import NotImplementedYetError
from cdc_lake.logging_setup import configure_logging
from cdc_lake.state.status import table_statuses
from cdc_lake.state.store import StateStore

ONBOARDING_ISSUE = "the onboarding issue"
BOOTSTRAP_ISSUE = "the bootstrap issue"
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
@click.option("--dry-run", is_flag=True, help="Check and print what would be done, change nothing.")
def onboard(source: str, tables: tuple[str, ...], dry_run: bool) -> None:
    """Onboard SOURCE: check readiness, create slot and publication, register its Debezium connector.

    Not implemented yet: arrives with the onboarding issue.
    """
    raise _not_implemented("onboard", ONBOARDING_ISSUE)


@cli.command()
@click.argument("target", metavar="SOURCE|TABLE")
def offboard(target: str) -> None:
    """Stop replicating a source or one table (source.schema.table); the lake copy is kept.

    Not implemented yet: arrives with the onboarding issue.
    """
    raise _not_implemented("offboard", ONBOARDING_ISSUE)


@cli.group()
def connectors() -> None:
    """Inspect and control the Debezium connectors in Kafka Connect.

    Not implemented yet: arrives with the onboarding issue.
    """


@connectors.command("status")
@click.argument("source", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def connectors_status(source: str | None, as_json: bool) -> None:
    """Show connector and task states (of SOURCE, or all).

    Not implemented yet: arrives with the onboarding issue.
    """
    raise _not_implemented("connectors status", ONBOARDING_ISSUE)


@connectors.command("pause")
@click.argument("source")
def connectors_pause(source: str) -> None:
    """Pause the connectors of SOURCE.

    Not implemented yet: arrives with the onboarding issue.
    """
    raise _not_implemented("connectors pause", ONBOARDING_ISSUE)


@connectors.command("resume")
@click.argument("source")
def connectors_resume(source: str) -> None:
    """Resume the paused connectors of SOURCE.

    Not implemented yet: arrives with the onboarding issue.
    """
    raise _not_implemented("connectors resume", ONBOARDING_ISSUE)


@connectors.command("restart")
@click.argument("source")
def connectors_restart(source: str) -> None:
    """Restart the connectors of SOURCE and their failed tasks.

    Not implemented yet: arrives with the onboarding issue.
    """
    raise _not_implemented("connectors restart", ONBOARDING_ISSUE)


@cli.command()
@click.argument("tables", nargs=-1, metavar="[TABLE]...")
@click.option("--source", help="Bootstrap the tables of this source instead of naming them.")
@click.option("--all-pending", is_flag=True, help="With --source: only tables still PENDING_BOOTSTRAP.")
def bootstrap(tables: tuple[str, ...], source: str | None, all_pending: bool) -> None:
    """Snapshot tables from the read replica into Hudi and hand them over to the applier.

    Not implemented yet: arrives with the bootstrap issue.
    """
    raise _not_implemented("bootstrap", BOOTSTRAP_ISSUE)


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
        emit_json([table_status.to_json() for table_status in statuses])
    else:
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
