"""`cdc-lake spark jars|pack-env|entrypoint|check`: what spark-submit needs to run cdc-lake on a cluster.

A cdc-lake command is a Spark driver.  It starts its own driver JVM from the ``spark`` config, or
runs under ``spark-submit`` (client or cluster deploy mode), whose command line then decides the
master, the jars and the executors' Python (``cdc_lake.spark.session``).  These commands print the
pieces of that command line (docs/deploy.md):

    spark-submit --master yarn --packages "$(cdc-lake spark jars --coordinates)" \\
        --archives cdc-lake-env.tar.gz#environment \\
        --conf spark.pyspark.python=./environment/bin/python \\
        "$(cdc-lake spark entrypoint)" --config cdc-lake.yaml apply --once
"""

from __future__ import annotations

from pathlib import Path

import click

import cdc_lake
from cdc_lake.cli.context import get_config
from cdc_lake.cli.output import emit_json


@click.group()
def spark() -> None:
    """Print what spark-submit needs to run cdc-lake on a cluster (docs/deploy.md)."""


def package_coordinates(lake_format: str) -> list[str]:
    """The Maven coordinates of the jars cdc-lake's Spark jobs need with the lake format ``lake_format``,
    as ``--packages`` takes them."""
    import pyspark

    from cdc_lake import jvm

    jars = jvm.spark_jars(pyspark.__version__, lake_format)
    return [f"{a.group}:{a.artifact}:{a.version}" for a in jars.artifacts]


@spark.command()
@click.option(
    "--coordinates", is_flag=True, help="Print Maven coordinates (for --packages) instead of jar paths."
)
@click.option(
    "--excludes",
    is_flag=True,
    help="Print the group:artifact pairs for --exclude-packages that go with --packages.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object holding the list instead.")
@click.pass_context
def jars(ctx: click.Context, coordinates: bool, excludes: bool, as_json: bool) -> None:
    """Print the driver's jars, comma-separated, for spark-submit's --jars (or --packages).

    The paths are the config's `spark.jars`, or the lake format's jars, spark-avro, hadoop-aws, the
    Kafka source and the JDBC drivers, resolved through Maven once into the cache (nothing when
    `spark.conf` sets spark.jars.packages).  --coordinates prints the same set as Maven
    coordinates, --excludes what Spark's resolver must leave out of their dependencies (the Spark
    distribution ships it) to get the same classpath.  --json prints {"jars"|"coordinates"|"excludes": [...]}.
    """
    if coordinates and excludes:
        raise click.UsageError("--coordinates and --excludes: pass one of them")
    if coordinates:
        kind, found = "coordinates", package_coordinates(get_config(ctx, allow_default=True).lake.format)
    elif excludes:
        from cdc_lake.jvm import SPARK_PACKAGES_EXCLUDES

        kind, found = "excludes", list(SPARK_PACKAGES_EXCLUDES)
    else:
        from cdc_lake.spark.session import driver_jars

        config = get_config(ctx, allow_default=True)
        kind, found = "jars", [str(jar) for jar in driver_jars(config.spark, config.lake.format)]
    if as_json:
        emit_json({kind: found})
    else:
        click.echo(",".join(found))


@spark.command("pack-env")
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
def pack_env(output: Path, as_json: bool) -> None:
    """Pack cdc-lake and its dependencies into OUTPUT (.tar.gz or .tgz) for spark.archives.

    The executors run ./environment/bin/python from it; they need the same Python version at
    the same path as this interpreter (pyspark comes from their Spark installation).
    """
    from cdc_lake.spark.pack import pack_environment

    packed = pack_environment(output)
    conf = packed.spark_conf()
    if as_json:
        emit_json(
            {
                "path": str(packed.path),
                "bytes": packed.bytes,
                "files": packed.files,
                "distributions": list(packed.distributions),
                "spark_conf": conf,
            }
        )
        return
    click.echo(
        f"packed {len(packed.distributions)} distributions ({packed.files} files, "
        f"{packed.bytes / 1e6:.1f} MB) into {packed.path}"
    )
    click.echo("ship it to the executors with (a URI they can reach: hdfs://, s3a://, file://):")
    for key, value in conf.items():
        click.echo(f"  {key}: {value}")


@spark.command()
@click.option("--json", "as_json", is_flag=True, help='Print {"entrypoint": PATH} instead of the path.')
def entrypoint(as_json: bool) -> None:
    """Print the Python file spark-submit runs as cdc-lake (its arguments are cdc-lake's)."""
    # The package's __main__.py, found beside the package rather than imported: it imports the CLI.
    path = str(Path(cdc_lake.__file__).with_name("__main__.py"))
    if as_json:
        emit_json({"entrypoint": path})
    else:
        click.echo(path)


@spark.command()
@click.option("--tasks", type=click.IntRange(min=1), default=2, show_default=True, help="Tasks to run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@click.pass_context
def check(ctx: click.Context, tasks: int, as_json: bool) -> None:
    """Run a small job and print the Python each executor ran it in (interpreter, prefix, cdc_lake).

    Fails naming spark.pyspark.python when the executors cannot import cdc_lake or run another
    version of it or of Python than the driver.  Run it the way the other commands run (its own
    driver from the config, or under spark-submit) before the first bootstrap on a cluster.
    """
    from cdc_lake.spark import get_spark
    from cdc_lake.spark.executors import check_executors

    config = get_config(ctx)
    found = check_executors(get_spark(config.spark, config.lake), tasks)
    if as_json:
        emit_json([executor.as_dict() for executor in found])
        return
    for executor in found:
        click.echo(f"{executor.host}: Python {executor.python_version}, cdc-lake {executor.cdc_lake_version}")
        click.echo(f"  interpreter: {executor.executable}")
        click.echo(f"  prefix:      {executor.prefix}")
        click.echo(f"  cdc_lake:    {executor.cdc_lake_path}")
