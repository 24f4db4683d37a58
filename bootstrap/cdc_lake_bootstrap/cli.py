"""The bootstrap stage's commands: ``bootstrap``, ``validate``, ``repair`` and ``rebootstrap``.

They are registered with the ``cdc-lake`` command line through :mod:`cdc_lake_bootstrap.stage` (the
``cdc_lake.stages`` entry point), so the CLI never imports this package.  Each command imports its
stage modules only when it runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cdc_lake.cli.context import applier_factory, connector_update, get_config, repair_factory
from cdc_lake.cli.output import emit_json
from cdc_lake.exceptions import ConfigError, HealthCheckError


@click.command()
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
    from cdc_lake_bootstrap.parallel import bootstrap_concurrently
    from cdc_lake_bootstrap.progress import BarView, LineView, ProgressView
    from cdc_lake_bootstrap.run import BootstrapRequest, bootstrap_tables

    config = get_config(ctx)
    request = BootstrapRequest(tables, source, all_pending, apply_backlog)
    view: ProgressView
    if sys.stderr.isatty() and not as_json:
        view = BarView()
    else:
        view = LineView(lambda line: click.echo(line, err=as_json))
    try:
        if parallel > 1:
            results = bootstrap_concurrently(config, request, view, parallel, applier_factory())
        else:
            results = bootstrap_tables(config, request, view, applier_factory())
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


@click.command()
@click.argument("tables", nargs=-1, required=True, metavar="TABLE...")
@click.option("--buckets", type=click.IntRange(min=1), default=256, show_default=True,
              help="Key ranges whose counts and checksums are compared.")
@click.option("--partitions", type=click.IntRange(min=1), default=8, show_default=True,
              help="At most this many parallel range queries on the replica (by the table's estimated "
              "size: one up to 50,000 rows).")
@click.option("--catch-up-timeout", type=click.FloatRange(min=0), default=300.0, show_default=True,
              help="Seconds to wait for the lake to reach the Kafka end offsets.")
@click.option("--max-keys", type=click.IntRange(min=1), default=20, show_default=True,
              help="Keys listed per kind of difference.")
@click.option("--older-than", type=click.IntRange(min=1), metavar="SECONDS",
              help="Compare only rows untouched for this long (needs --updated-column).")
@click.option("--updated-column", metavar="COLUMN", help="The column holding each row's last change time.")
@click.option("--leaf-rows", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Bisect differing ranges until they hold at most this many rows, then join by key.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of results instead of lines.")
@click.pass_context
def validate(
    ctx: click.Context,
    tables: tuple[str, ...],
    buckets: int,
    partitions: int,
    catch_up_timeout: float,
    max_keys: int,
    older_than: int | None,
    updated_column: str | None,
    leaf_rows: int,
    as_json: bool,
) -> None:
    """Reconcile tables between the read replica and the lake: counts, range checksums, then keys.

    Waits for the replica and the lake to pass the primary's position now, compares row counts and
    checksums over key ranges, bisects the ranges that differ, and names the missing, extra and
    different keys in them.  Exits 4 when any table differs.
    """
    from cdc_lake.spark import start_spark

    if (older_than is None) != (updated_column is None):
        raise ConfigError("--older-than and --updated-column go together")
    config = get_config(ctx)
    for name in tables:
        config.table(name)
    # The driver JVM comes up while the rest is imported and the state store opened.
    starting = start_spark(config.spark, config.lake)
    from cdc_lake.cli.ops_output import render_validation
    from cdc_lake.state.store import StateStore
    from cdc_lake_bootstrap.validate import ValidateOptions, validate_table

    options = ValidateOptions(
        buckets, partitions, catch_up_timeout, max_keys, older_than, updated_column, leaf_rows
    )
    with StateStore.open(config.state_store.url) as store:
        spark = starting.result()
        results = [validate_table(spark, config, store, name, options) for name in tables]
        for result in results:
            # A clean comparison at a common point proves the copy exact: a quarantine's mark goes.
            if result.matches and result.caught_up and store.require_table(result.table).possibly_diverged:
                store.clear_possibly_diverged(result.table)
    if as_json:
        emit_json([r.to_json() for r in results])
    else:
        for result in results:
            render_validation(result, click.echo)
    differing = [r.table for r in results if not r.matches]
    if differing:
        raise HealthCheckError(f"the lake differs from the source for {', '.join(differing)}")


@click.command()
@click.argument("table", metavar="TABLE")
@click.option(
    "--keys", "keys_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The keys to repair: a `cdc-lake validate --json` output, or a JSON list of key objects "
    "(default: validate the table first and repair what it finds).",
)
@click.option("--resume", is_flag=True, help="Finish the table's interrupted repair (its keys are recorded).")
@click.option("--dry-run", is_flag=True, help="Say per key what the repair would do; write nothing.")
@click.option("--max-keys", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Refuse more keys than this (a table differing that much wants `cdc-lake rebootstrap`).")
@click.option("--partitions", type=click.IntRange(min=1), default=8, show_default=True,
              help="At most this many parallel range queries on the replica.")
@click.option("--catch-up-timeout", type=click.FloatRange(min=0), default=300.0, show_default=True,
              help="Without --keys: seconds the validation waits for the lake to reach Kafka's end.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON result instead of lines.")
@click.pass_context
def repair(
    ctx: click.Context,
    table: str,
    keys_file: Path | None,
    resume: bool,
    dry_run: bool,
    max_keys: int,
    partitions: int,
    catch_up_timeout: float,
    as_json: bool,
) -> None:
    """Make the keys where TABLE's lake copy differs from its source exact, without copying the table.

    Reads those keys' rows from the read replica while the table's apply lock is held, waits until
    Debezium has streamed past that read, and writes them with the changes Kafka holds up to there in one
    commit: each key ends in its source state, and later changes apply after it.  A lake row the commit
    could not replace (a higher ordering value) is removed first; if the repair stops between the two
    commits, the table is FAILED until `cdc-lake repair TABLE --resume`.
    """
    from cdc_lake.spark import start_spark

    if resume and keys_file is not None:
        raise ConfigError("--resume repairs the recorded keys: give --keys without it")
    config = get_config(ctx)
    config.table(table)
    starting = start_spark(config.spark, config.lake)
    from cdc_lake.state.store import StateStore
    from cdc_lake_bootstrap.repair import RepairOptions, repair_table
    from cdc_lake_bootstrap.validate import ValidateOptions

    validate_options = ValidateOptions(
        partitions=partitions, catch_up_timeout=catch_up_timeout, max_keys=max_keys
    )
    options = RepairOptions(keys_file, resume, dry_run, max_keys, validate_options)
    with StateStore.open(config.state_store.url) as store:
        spark = starting.result()
        result = repair_table(spark, config, store, table, options, repair_factory()(spark, store, config))
    if as_json:
        emit_json(result.to_json())
        return
    if result.dry_run:
        for action in result.actions:
            key = ", ".join(f"{k}={v}" for k, v in action.items() if k != "action")
            click.echo(f"{action['action']:<7} {key}")
        rows = f"{result.source_rows} source row(s)"
        click.echo(f"{table}: {result.keys} key(s), {rows}; nothing written (--dry-run)")
        return
    if result.above_fork:
        click.echo(f"{table}: {result.above_fork} key(s) sort above the failover's fork: repaired too")
    if not result.keys:
        click.echo(f"{table}: nothing to repair")
        return
    click.echo(
        f"{table}: {result.keys} key(s) repaired ({result.source_rows} source row(s) read at "
        f"{result.point}), "
        f"with {result.changes} change(s) of {result.offsets} offset(s), commit {result.commit} "
        f"({result.seconds:.1f}s)"
    )


@click.command()
@click.argument("tables", nargs=-1, metavar="[TABLE]...")
@click.option("--reason", default="operator request", show_default=True, help="Recorded with the run.")
@click.option("--abort", is_flag=True, help="Roll back the unfinished re-bootstrap of TABLE instead.")
@click.option(
    "--remove-old", is_flag=True,
    help="Remove previous base paths kept past lake.old_copy_keep_hours (no TABLE).",
)
@click.option("--now", is_flag=True, help="With --remove-old: do not wait for the keep time.")
@click.option(
    "--from-primary", is_flag=True,
    help="Read the copy from the primary, not the replica (a replica whose rows differ, e.g. a MySQL "
    "uuid() default it computed itself; the copy's reads load the primary).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of lines.")
@click.pass_context
def rebootstrap(
    ctx: click.Context,
    tables: tuple[str, ...],
    reason: str,
    abort: bool,
    remove_old: bool,
    now: bool,
    from_primary: bool,
    as_json: bool,
) -> None:
    """Copy tables afresh into a new versioned base path and switch to it once caught up.

    The way out of FAILED and SCHEMA_CHANGED, and of a BOOTSTRAPPING table whose hand-off was refused
    (its copy is never published). The table stays readable (and applied if it can be) at
    its old path meanwhile; the switch of path, offsets and state is atomic. Killed, run it again to
    resume, or --abort to roll back. The old path is kept for lake.old_copy_keep_hours, then
    `rebootstrap --remove-old` removes it.
    """
    from cdc_lake_bootstrap.progress import LineView
    from cdc_lake_bootstrap.rebootstrap import abort_rebootstraps, rebootstrap_tables, remove_old_paths

    config = get_config(ctx)
    if remove_old == bool(tables):
        raise ConfigError("name the tables to re-bootstrap (or --abort), or give --remove-old alone")
    if now and not remove_old:
        raise ConfigError("--now applies to --remove-old only")
    if from_primary and (remove_old or abort):
        raise ConfigError("--from-primary applies to a re-bootstrap only, not --remove-old or --abort")
    if remove_old:
        results = remove_old_paths(config, now)
    elif abort:
        results = abort_rebootstraps(config, tables)
    else:
        view = LineView(lambda line: click.echo(line, err=as_json))
        try:
            results = rebootstrap_tables(
                config, tables, reason, view, applier_factory(), connector_update(ctx), from_primary
            )
        finally:
            view.close()
    if as_json:
        emit_json([r.to_json() for r in results])
        return
    if not results:
        click.echo("nothing to do")
    for r in results:
        click.echo(f"{r.table}: v{r.version} {r.action}: {r.path} ({r.seconds:.1f}s)")
