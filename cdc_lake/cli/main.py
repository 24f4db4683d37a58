"""``cdc-lake``: the command group and every verb of the CLI contract.

Each verb imports its stage (and the output helpers that name its types) only when
it runs: ``--help`` loads none of Spark, SQLAlchemy, Alembic, boto3, the database
drivers or the Kafka client (tests/unit/cli/test_cli_imports.py), and a verb pays only
for what it uses.  ``stack`` and ``demo`` live in their own modules, and the bootstrap
stage's verbs (``bootstrap``, ``validate``, ``rebootstrap``) come from the stage
itself, registered as an entry point (:mod:`cdc_lake.cli.stages`).  Errors are one
line with the exit code of their exception class (``cdc_lake.exceptions``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cdc_lake.cli.context import CliContext, applier_factory, config_file, get_config, repair_factory
from cdc_lake.cli.group import CdcLakeGroup
from cdc_lake.cli.output import emit_json
from cdc_lake.cli.stages import BOOTSTRAP, bootstrap_stage
from cdc_lake.exceptions import ConfigError, HealthCheckError
from cdc_lake.logging_setup import configure_logging
from cdc_lake.onboard import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_lake.apply.commands import Background
    from cdc_lake.apply.runner import TableOutcome
    from cdc_lake.config import Config
    from cdc_lake.onboard.control import Action
    from cdc_lake.state.records import TableInfo
    from cdc_lake.state.store import StateStore


@click.group(
    cls=CdcLakeGroup,
    lazy_subcommands={
        "stack": "cdc_lake.cli.stack:stack",
        "demo": "cdc_lake.cli.demo:demo",
        "spark": "cdc_lake.cli.spark:spark",
    },
    stage_subcommands={name: BOOTSTRAP for name in ("bootstrap", "validate", "repair", "rebootstrap")},
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
    "--after-failover",
    is_flag=True,
    help="Postgres, after `offboard SOURCE` and with the config on the promoted primary: keep the tables' "
    "lake copies and go on from a new slot; then `repair` each table (docs/runbooks/position-lost.md).",
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
    after_failover: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Onboard SOURCE: check readiness, create its publication, register and start its Debezium connectors.

    Tier-0 tables get a connector (and Postgres slot) of their own. Re-running changes nothing;
    adding tables to the config and re-running adds them. Tables end up PENDING_BOOTSTRAP
    (with --after-failover: CATCHING_UP with their lake copies, a repair pending).
    """
    from cdc_lake.capture.secrets import password_env
    from cdc_lake.cli.onboard_output import render_checks, render_onboard_report, render_plan
    from cdc_lake.onboard.preflight import raise_for_failures
    from cdc_lake.onboard.run import OnboardRequest, execute_onboarding, plan_onboarding

    config = get_config(ctx)
    request = OnboardRequest(
        source=config.source(source).name,
        password_env=password_env(config_file(ctx), source),
        tables=tables,
        replica_identity_full=replica_identity_full,
        timeout=timeout,
        after_failover=after_failover,
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
    from cdc_lake.capture.secrets import password_env
    from cdc_lake.cli.onboard_output import render_offboard_report
    from cdc_lake.onboard.offboard import OffboardRequest, source_of
    from cdc_lake.onboard.offboard import offboard as offboard_target

    config = get_config(ctx)
    source = config.source(source_of(target)).name
    request = OffboardRequest(
        target=target,
        password_env=password_env(config_file(ctx), source),
        drop_slot=drop_slot,
        timeout=timeout,
    )
    report = offboard_target(config, request)
    if as_json:
        emit_json(report.to_json())
    else:
        render_offboard_report(report)


@cli.group()
def connectors() -> None:
    """Inspect and control the Debezium connectors of onboarded sources in Kafka Connect."""


@connectors.command("status")
@click.argument("source", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def connectors_status(ctx: click.Context, source: str | None, as_json: bool) -> None:
    """Show connector and task states (of SOURCE, or of every onboarded source), with failure traces."""
    from cdc_lake.cli.onboard_output import render_connector_statuses
    from cdc_lake.onboard.control import statuses

    rows = statuses(get_config(ctx), source)
    if as_json:
        emit_json(rows)
    else:
        render_connector_statuses(rows)


def _control_command(action: Action, done: str, summary: str) -> None:
    """Add ``connectors ACTION SOURCE [--json]``: ``action`` every connector of SOURCE, one line each."""

    @connectors.command(action, help=summary)
    @click.argument("source")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of lines.")
    @click.pass_context
    def command(ctx: click.Context, source: str, as_json: bool) -> None:
        from cdc_lake.onboard.control import control

        names = control(get_config(ctx), source, action)
        if as_json:
            emit_json([{"source": source, "connector": name, "action": action} for name in names])
            return
        for name in names:
            click.echo(f"{done} {name}")


_control_command("pause", "paused", "Pause the connectors of SOURCE (a slot keeps WAL until they resume).")
_control_command("resume", "resumed", "Resume the paused connectors of SOURCE.")
_control_command("restart", "restarted", "Restart the connectors of SOURCE and their failed tasks.")


@cli.command()
@click.option("--once", is_flag=True, help="Catch up to the end offsets seen now, then exit.")
@click.option("--tables", multiple=True, metavar="TABLE", help="Apply only these tables (repeatable).")
@click.option("--tier", type=click.IntRange(min=0), help="Apply only tables of this tier.")
@click.option(
    "--parallel", type=click.IntRange(min=1), default=4, show_default=True,
    help="How many tables apply at once (one Spark application).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per table outcome (JSON Lines).")
@click.pass_context
def apply(
    ctx: click.Context, once: bool, tables: tuple[str, ...], tier: int | None, parallel: int, as_json: bool
) -> None:
    """Apply change events from Kafka to the Hudi tables, one Hudi commit per batch.

    With --once, each table catches up to the end offsets seen at start and the command exits,
    non-zero if any table failed.  Without it, the chosen tables apply continuously like `run`.
    """
    from cdc_lake.apply.commands import apply_once_command, describe, run_command

    config = get_config(ctx)
    _warm_decoding()
    render = _json_line if as_json else describe
    if once:
        apply_once_command(config, tables, tier, parallel, click.echo, render=render)
    else:
        run_command(
            config, tables, tier, parallel, click.echo, render=render, note=_note(as_json),
            on_schema_change=bootstrap_stage().schema_change_handler(config, applier_factory()),
        )


_warming: list[bool] = []


def _warm_decoding() -> None:
    """Once the applier's session starts (when a table has something to apply), start a Python worker
    and import the decoding in it while the driver plans the first batch
    (:func:`cdc_lake.spark.session.warm_python_workers`); registered once per process."""
    from cdc_lake.spark import session
    from cdc_lake.spark.daemon import PRELOADED

    if not _warming:
        _warming.append(True)
        session.after_start(lambda spark: session.warm_python_workers(spark, PRELOADED))


def _json_line(outcome: TableOutcome) -> str:
    import json

    from cdc_lake.apply.commands import outcome_json

    return json.dumps(outcome_json(outcome))


def _note(as_json: bool) -> Callable[[str], None]:
    """Where progress notes go: stdout for people, stderr when stdout carries JSON."""
    return lambda text: click.echo(text, err=as_json)


@cli.command()
@click.option(
    "--parallel", type=click.IntRange(min=1), default=4, show_default=True,
    help="How many tables apply at once (one Spark application).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per table outcome (JSON Lines).")
@click.pass_context
def run(ctx: click.Context, parallel: int, as_json: bool) -> None:
    """Run continuously: tier-0 tables apply without pause, other tiers at their interval.

    Freshness and lag are recorded per table for `status`; Prometheus metrics are served on
    monitoring.metrics_port (0: none).  SIGTERM or Ctrl-C lets running batches finish, then exits.
    """
    from cdc_lake.apply.commands import describe, run_command
    from cdc_lake.ops.metrics import serve

    config = get_config(ctx)
    _warm_decoding()

    def serve_metrics() -> None:
        if config.monitoring.metrics_port:
            port = serve(config, with_applier=True, bootstrap_rows=_bootstrap_rows)
            _note(as_json)(f"metrics on http://{config.monitoring.metrics_host}:{port}/metrics")

    def validator(spark: SparkSession, store: StateStore, tables: Sequence[str]) -> Background:
        return bootstrap_stage().validator(config, spark, store, tables, repair_factory())

    run_command(
        config, (), None, parallel, click.echo, serve_metrics=serve_metrics,
        render=_json_line if as_json else describe, note=_note(as_json),
        on_schema_change=bootstrap_stage().schema_change_handler(config, applier_factory()),
        background=validator,
    )


@cli.command()
@click.argument("tables", nargs=-1, metavar="[TABLE]...")
@click.option("--schedule", is_flag=True, help="Plan a compaction of every file slice with logs first.")
@click.option(
    "--every",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Keep looking every SECONDS beside `run`, until SIGTERM or Ctrl-C (for compaction.executor: job).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per table (JSON Lines).")
@click.pass_context
def compact(
    ctx: click.Context, tables: tuple[str, ...], schedule: bool, every: float | None, as_json: bool
) -> None:
    """Execute the pending compaction plans of MERGE_ON_READ tables, as a job outside `run`.

    Only for lake.compaction.inline: false (the writers schedule plans; `run` executes them too, unless
    compaction.executor is job).  A table's applier in another process skips it while its plans execute,
    unless lake.format_options names a lock provider shared by processes (docs/hudi.md#table-services).
    Exits non-zero if any failed; with --every, failed looks are logged and retried.
    """
    import json
    import time

    from cdc_lake.apply.commands import compact_command, describe_services, services_json

    if schedule and every is not None:
        raise ConfigError("--schedule plans every file slice once; it does not go with --every")
    config = get_config(ctx)
    if as_json:
        compact_command(
            config, tables, schedule, click.echo,
            render=lambda outcome: json.dumps(services_json(outcome, time.time())), note=_note(as_json),
            every=every,
        )
    else:
        compact_command(config, tables, schedule, click.echo, render=describe_services, every=every)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Show every onboarded table: state, tier, lake path, last commit, applied offsets, freshness, lag.

    The Kafka lag is measured now, as `lag` measures it; --json also names the consumer group the
    table's applied offsets are committed to (for Kafka's own lag tools).

    Exits non-zero when a table needs an operator, the most urgent kind deciding the code: 4 when
    a table is FAILED (docs/runbooks/table-failed.md), else 5 when one stopped in SCHEMA_CHANGED, else
    6 when one is possibly diverged (docs/schema-changes.md); the error line names every such table.
    """
    from cdc_lake.cli.output import render_status
    from cdc_lake.state.status import status_error, table_statuses
    from cdc_lake.state.store import StateStore

    config = get_config(ctx)
    with StateStore.open_existing(config.state_store.url) as store:
        statuses = table_statuses(store)
        if statuses:
            # Imported only with tables to measure: the Kafka client is heavy.
            from cdc_lake.kafka.groups import group_id
            from cdc_lake.ops.lag import with_kafka_lag

            statuses, unmeasured = with_kafka_lag(config, statuses)
            if unmeasured:
                click.echo(f"warning: {unmeasured}; lag as the applier last measured it", err=True)
        if as_json:
            stage = bootstrap_stage()
            emit_json([
                {
                    **row.to_json(),
                    "consumer_group": group_id(row.name, row.lake_base_path),
                    "bootstrap": stage.progress(store, row.name, row.state),
                }
                for row in statuses
            ])
        else:
            render_status(statuses)
    error = status_error(statuses)
    if error is not None:
        raise error


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a line.")
@click.pass_context
def migrate(ctx: click.Context, as_json: bool) -> None:
    """Create the state store, or upgrade its schema to this version of cdc-lake.

    Read-only commands (status, lag, metrics, connectors status) never do: they stop with an error
    naming this command.  The writing commands (onboard, bootstrap, apply, run, ...) migrate too; on a
    shared store, migrate once while no older cdc-lake writes to it.
    """
    from sqlalchemy.engine import make_url

    from cdc_lake.state.migrate import HEAD_REVISION
    from cdc_lake.state.store import StateStore

    url = get_config(ctx).state_store.url
    store, before = StateStore.migrate(url)
    store.close()
    shown = make_url(url).render_as_string(hide_password=True)
    if as_json:
        emit_json({"state_store": shown, "revision": HEAD_REVISION, "was": before})
    elif before is None:
        click.echo(f"state store {shown}: created at schema revision {HEAD_REVISION}")
    elif before == HEAD_REVISION:
        click.echo(f"state store {shown}: already at schema revision {HEAD_REVISION}")
    else:
        click.echo(f"state store {shown}: upgraded from schema revision {before} to {HEAD_REVISION}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@click.pass_context
def lag(ctx: click.Context, as_json: bool) -> None:
    """Show how far behind each part is: slots/binlogs, read replicas, connectors, Kafka, the lake.

    Exits 4 when a threshold of the config's `monitoring` section is breached (the same conditions
    as the alert rules of `cdc-lake alerts render`), 0 when all are met.
    """
    from cdc_lake.cli.ops_output import render_lag
    from cdc_lake.ops.alerts import breaches
    from cdc_lake.ops.lag import collect_lag
    from cdc_lake.ops.metrics import lag_samples

    config = get_config(ctx)
    report = collect_lag(config)
    found = breaches(lag_samples(report), config)
    if as_json:
        emit_json({**report.to_json(), "breaches": [b.to_json() for b in found]})
    else:
        render_lag(report, found, click.echo)
    if found:
        names = sorted({b.alert for b in found})
        raise HealthCheckError(f"{len(found)} thresholds breached: {', '.join(names)}")


@cli.command()
@click.option(
    "--port", type=click.IntRange(0, 65535), help="Serve on this port (default: monitoring.metrics_port)."
)
@click.option("--once", is_flag=True, help="Print the metrics once (Prometheus text format) and exit.")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the samples as JSON.")
@click.pass_context
def metrics(ctx: click.Context, port: int | None, once: bool, as_json: bool) -> None:
    """Serve the lag metrics for Prometheus at http://HOST:PORT/metrics until stopped (or print them once).

    For schedulers and hosts where `cdc-lake run` does not run; `run` serves the same gauges
    plus its applier counters.
    """
    from prometheus_client import generate_latest

    from cdc_lake.ops.metrics import registry_for, serve

    config = get_config(ctx)
    if once:
        registry = registry_for(config, with_applier=False, bootstrap_rows=_bootstrap_rows)
        if as_json:
            emit_json([
                {"name": s.name, "labels": s.labels, "value": s.value}
                for family in registry.collect()
                for s in family.samples
            ])
        else:
            click.echo(generate_latest(registry).decode(), nl=False)
        return
    if as_json:
        raise ConfigError("--json needs --once (the server speaks the Prometheus text format)")
    bound = serve(config, with_applier=False, bootstrap_rows=_bootstrap_rows, port=port)
    address = f"http://{config.monitoring.metrics_host}:{bound}/metrics"
    click.echo(f"serving metrics on {address}; stop with Ctrl-C")
    from threading import Event

    try:
        Event().wait()
    except KeyboardInterrupt:
        click.echo("stopped")


def _bootstrap_rows(store: StateStore, info: TableInfo) -> int:
    """Rows the current (or last) bootstrap of ``info``'s table wrote, for the metrics."""
    found = bootstrap_stage().progress(store, info.qualified_name, info.state)
    return 0 if found is None else int(found["rows_written"])


@cli.group()
def alerts() -> None:
    """Prometheus alert rules generated from the config's monitoring thresholds."""


@alerts.command("render")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file (default: stdout).",
)
@click.option(
    "--runbook-base-url",
    metavar="URL",
    help="Where docs/runbooks is published, for the rules' runbook_url (default: "
    "monitoring.runbook_base_url).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the rules as JSON instead of YAML.")
@click.pass_context
def alerts_render(
    ctx: click.Context, output: Path | None, runbook_base_url: str | None, as_json: bool
) -> None:
    """Write the Prometheus alerting rules for the config's thresholds (per tier) as YAML.

    Each rule links its runbook page under monitoring.runbook_base_url (or --runbook-base-url); one
    of them is required.
    """
    import yaml

    from cdc_lake.ops.alerts import render_rules

    text = render_rules(get_config(ctx), runbook_base_url)
    if as_json:
        emit_json(yaml.safe_load(text))
        return
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text)
    click.echo(f"wrote {output}")


@cli.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (name, path, markdown) instead.")
def runbook(name: str | None, as_json: bool) -> None:
    """Print the runbook page NAME (as messages name it: NAME.md, docs/runbooks/NAME.md), or list them."""
    from cdc_lake.ops.alerts import RUNBOOKS, runbook_name, runbook_names, runbook_page

    if name is None:
        names = runbook_names()
        if as_json:
            emit_json([{"name": page, "path": f"{RUNBOOKS}/{page}.md"} for page in names])
        else:
            click.echo("\n".join(names))
        return
    text = runbook_page(name)
    if as_json:
        page = runbook_name(name)
        emit_json({"name": page, "path": f"{RUNBOOKS}/{page}.md", "markdown": text})
    else:
        click.echo(text)


@cli.command()
@click.argument("table", metavar="[TABLE]", required=False)
@click.option("--list", "listing", is_flag=True, help="List the quarantined messages (of TABLE if given).")
@click.option(
    "--replay", is_flag=True, help="Apply TABLE's quarantined message at --partition/--offset after a fix."
)
@click.option("--partition", type=click.IntRange(min=0), help="Kafka partition.")
@click.option("--offset", type=click.IntRange(min=0), help="Kafka offset.")
@click.option("--reason", help="Why it is skipped (recorded with the copy).")
@click.option("--no-decode", is_flag=True, help="With --list: show keys as lengths, never ask the registry.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@click.pass_context
def quarantine(
    ctx: click.Context,
    table: str | None,
    listing: bool,
    replay: bool,
    partition: int | None,
    offset: int | None,
    reason: str | None,
    no_decode: bool,
    as_json: bool,
) -> None:
    """Skip one bad message of TABLE: copy it to the quarantine, record why, keep applying.

    `quarantine TABLE --partition P --offset O --reason TEXT`: the message (key and value bytes,
    topic and its id, partition, offset) is kept in the state store's quarantined_messages table; the
    next Hudi commit over it lists it in its metadata; the table is marked possibly diverged until
    `rebootstrap` (or a clean `validate`) clears it.

    `quarantine --list [TABLE]`: every quarantined message with the key it carried (decoded with the
    schema registry, else its length), its reason and when, and its replay if it was replayed.

    `quarantine --replay TABLE --partition P --offset O`: after fixing the cause (a column_types
    override, ...), apply the quarantined message to the table's current copy as one Hudi commit at its
    original ordering value (a later change of its key in the lake wins), under the apply lock, and
    record the replay; refused in one line, nothing written, when it cannot (docs/schema-changes.md).
    """
    from cdc_lake.apply.quarantine import QuarantineRequest, describe, list_lines

    config = get_config(ctx)
    if listing:
        from cdc_lake.decode.registry import registry_client
        from cdc_lake.state.store import StateStore

        with StateStore.open_existing(config.state_store.url) as store:
            messages = store.quarantined(table)
        lookup = None if no_decode or not messages else registry_client(config)
        if as_json:
            emit_json(describe(messages, lookup))
        else:
            click.echo("\n".join(list_lines(messages, lookup)) or "no quarantined messages")
        return
    if replay:
        _replay(config, table, partition, offset, reason, as_json)
        return
    if table is None or partition is None or offset is None or reason is None:
        given = {"TABLE": table, "--partition": partition, "--offset": offset, "--reason": reason}
        missing = ", ".join(name for name, value in given.items() if value is None)
        raise ConfigError(f"quarantine needs {missing} (or --list)")
    from cdc_lake.apply.quarantine import quarantine as quarantine_message

    kept = quarantine_message(config, QuarantineRequest(table, partition, offset, reason))
    if as_json:
        emit_json(describe([kept])[0])
        return
    click.echo(
        f"{kept.table}: quarantined topic {kept.topic!r} partition {kept.partition} offset {kept.offset}; "
        "the table is possibly diverged until `cdc-lake rebootstrap` or a clean `cdc-lake validate`"
    )


def _replay(
    config: Config, table: str | None, partition: int | None, offset: int | None, reason: str | None,
    as_json: bool,
) -> None:
    """``quarantine --replay``: apply one quarantined message after a fix, or say in one line why not."""
    from cdc_lake.apply.quarantine import ReplayRequest, describe, replay

    if reason is not None:
        raise ConfigError("quarantine --replay takes no --reason (the quarantine recorded it)")
    if table is None or partition is None or offset is None:
        given = {"TABLE": table, "--partition": partition, "--offset": offset}
        missing = ", ".join(name for name, value in given.items() if value is None)
        raise ConfigError(f"quarantine --replay needs {missing}")
    done = replay(config, ReplayRequest(table, partition, offset))
    if as_json:
        emit_json({**describe([done.message])[0], "changes": done.changes})
        return
    kept = done.message
    what = f"commit {kept.replay_commit}" if kept.replay_commit else "nothing written (key deleted later)"
    click.echo(f"{kept.table}: replayed partition {kept.partition} offset {kept.offset}: {what}")


def main() -> None:
    """Entry point of the ``cdc-lake`` script.

    The group catches every CdcLakeError: it prints ``error: <message>`` on one
    line to stderr and exits with the error's exit code.
    """
    cli(prog_name="cdc-lake")
