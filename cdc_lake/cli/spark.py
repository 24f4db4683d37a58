"""`cdc-lake spark jars|pack-env|entrypoint`: what spark-submit needs to run cdc-lake on a cluster.

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
import pyspark

from cdc_lake import jvm
from cdc_lake.cli.context import get_config
from cdc_lake.cli.output import emit_json


@click.group()
def spark() -> None:
    """Print what spark-submit needs to run cdc-lake on a cluster (docs/deploy.md)."""


def package_coordinates() -> list[str]:
    """The Maven coordinates of the jars cdc-lake's Spark jobs need, as ``--packages`` takes them."""
    return [f"{a.group}:{a.artifact}:{a.version}" for a in jvm.spark_jars(pyspark.__version__).artifacts]


@spark.command()
@click.option(
    "--coordinates", is_flag=True, help="Print Maven coordinates (for --packages) instead of jar paths."
)
@click.pass_context
def jars(ctx: click.Context, coordinates: bool) -> None:
    """Print the driver's jars, comma-separated, for spark-submit's --jars (or --packages).

    The paths are the config's `spark.jars`, or the Hudi bundle, spark-avro, hadoop-aws, the
    Kafka source and the JDBC drivers, resolved through Maven once into the cache (nothing when
    `spark.conf` sets spark.jars.packages).
    """
    if coordinates:
        click.echo(",".join(package_coordinates()))
        return
    from cdc_lake.spark.session import driver_jars

    settings = get_config(ctx, allow_default=True).spark
    click.echo(",".join(str(jar) for jar in driver_jars(settings)))


@spark.command("pack-env")
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
def pack_env(output: Path, as_json: bool) -> None:
    """Pack cdc-lake and its dependencies into OUTPUT (.tar.gz or .tar) for spark.archives.

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
def entrypoint() -> None:
    """Print the Python file spark-submit runs as cdc-lake (its arguments are cdc-lake's)."""
    import cdc_lake.__main__ as main_module

    click.echo(main_module.__file__)
