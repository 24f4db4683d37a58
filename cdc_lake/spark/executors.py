"""What Python the executors run: one small job whose tasks report their interpreter and cdc_lake.

Decoding and Kafka range reads run in Python workers on the executors, so every executor needs an
interpreter that imports the driver's version of ``cdc_lake`` (the packed environment of
``cdc-lake spark pack-env``, or an image that has it).  :func:`probe_executors` runs ``tasks``
tasks, each reporting its worker's interpreter, ``sys.prefix``, Python version and where it
imported ``cdc_lake`` from; :func:`check_executors` turns a failure to import, or a version other
than the driver's, into one line naming ``spark.pyspark.python``, the setting that chose the
interpreter.  ``cdc-lake spark check`` prints the result.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from importlib import metadata

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

import cdc_lake
from cdc_lake.exceptions import ConfigError

PYTHON_SETTING = "spark.pyspark.python"


@dataclass(frozen=True)
class ExecutorPython:
    """The Python one task ran in: its host, interpreter, prefix, version and ``cdc_lake``."""

    host: str
    executable: str
    prefix: str
    python_version: str
    cdc_lake_version: str
    cdc_lake_path: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _python_here() -> ExecutorPython:
    return ExecutorPython(
        host=socket.gethostname(),
        executable=sys.executable,
        prefix=sys.prefix,
        python_version=".".join(map(str, sys.version_info[:3])),
        cdc_lake_version=metadata.version("cdc-lake"),
        cdc_lake_path=cdc_lake.__path__[0],
    )


def _report(_rows: Iterable[int]) -> Iterator[ExecutorPython]:
    """A task's body: runs in the executor's Python worker (unpickling it imports ``cdc_lake``)."""
    yield _python_here()


def _first_python_error(error: Py4JJavaError) -> str:
    """The Python exception line of a failed task, e.g. ``ModuleNotFoundError: No module named 'x'``."""
    lines = [line.strip() for line in str(error.java_exception).splitlines()]
    found = [line for line in lines if line.split(":", 1)[0].endswith(("Error", "Exception"))]
    python = [line for line in found if not line.startswith(("org.", "java.", "py4j."))]
    return (python or found or [lines[0] if lines else "unknown error"])[0]


def probe_executors(spark: SparkSession, tasks: int) -> list[ExecutorPython]:
    """Run ``tasks`` tasks and return what each one's Python worker reported, distinct entries only."""
    conf = spark.sparkContext.getConf()
    python = conf.get(PYTHON_SETTING) or conf.get("spark.executorEnv.PYSPARK_PYTHON") or "python3"
    try:
        found = spark.sparkContext.parallelize(range(tasks), tasks).mapPartitions(_report).collect()
    except Py4JJavaError as exc:
        raise ConfigError(
            f"{PYTHON_SETTING}: the executors' Python ({python}) cannot run cdc-lake's tasks: "
            f"{_first_python_error(exc)}; ship the environment (cdc-lake spark pack-env, docs/deploy.md)"
        ) from None
    return sorted(set(found), key=lambda p: (p.host, p.prefix, p.executable))


def check_executors(spark: SparkSession, tasks: int) -> list[ExecutorPython]:
    """:func:`probe_executors`, refusing executors whose cdc_lake or Python differs from the driver's."""
    driver = _python_here()
    found = probe_executors(spark, tasks)
    for executor in found:
        if (executor.cdc_lake_version, executor.python_version) != (
            driver.cdc_lake_version,
            driver.python_version,
        ):
            raise ConfigError(
                f"{PYTHON_SETTING}: executor {executor.host} runs cdc-lake {executor.cdc_lake_version} "
                f"on Python {executor.python_version} ({executor.executable}), the driver cdc-lake "
                f"{driver.cdc_lake_version} on Python {driver.python_version}; pack the driver's "
                "environment (cdc-lake spark pack-env)"
            )
    return found
