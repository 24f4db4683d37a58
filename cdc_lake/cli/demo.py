"""``cdc-lake demo``: the whole flow on the local stack, with the commands an operator would run."""

from __future__ import annotations

from pathlib import Path

import click

from cdc_lake.cli.context import get_config
from cdc_lake.cli.output import emit_json


@click.command()
@click.option(
    "--seconds",
    type=click.IntRange(min=10),
    default=60,
    show_default=True,
    help="How long changes stream while `cdc-lake run` applies them.",
)
@click.option(
    "--rows",
    type=click.IntRange(min=1),
    default=20_000,
    show_default=True,
    help="Rows in the source table before onboarding (bootstrapped from the replica).",
)
@click.option(
    "--work-dir",
    type=click.Path(path_type=Path),
    default=Path(".cdc-lake/demo"),
    show_default=True,
    help="Where the demo writes its config, state store and lake (replaced on every run).",
)
@click.option(
    "--json", "as_json", is_flag=True,
    help="Print the final comparison as JSON on stdout; the steps go to stderr.",
)
@click.pass_context
def demo(ctx: click.Context, seconds: int, rows: int, work_dir: Path, as_json: bool) -> None:
    """Run the whole flow on the local stack: start it, create a Postgres table, onboard it,
    bootstrap it from the replica, stream inserts/updates/deletes through Debezium and Kafka into
    a Hudi table while `cdc-lake run` applies them with freshness shown, then compare lake and source.
    """
    from cdc_lake.demo import DemoSettings, run_demo

    settings = DemoSettings(seed_rows=rows, stream_seconds=seconds)
    summary = run_demo(
        get_config(ctx, allow_default=True), work_dir, settings, lambda text: click.echo(text, err=as_json)
    )
    if as_json:
        emit_json(summary)
