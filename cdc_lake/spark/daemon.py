"""The Python daemon of cdc-lake's local-mode Spark applications: pyspark's own, with the decoding imported
before it forks a worker (``spark.python.daemon.module``, set by :func:`cdc_lake.spark.session.spark_conf`
for a local master only: :data:`~cdc_lake.spark.session.LOCAL_PYTHON_DAEMON`).

Every Python worker of an executor is forked from its daemon, so a module the daemon imported is in every
worker from its start: ``apply``'s decode job no longer imports cdc-lake's decoding in each new worker
(about 0.7 s in a fresh interpreter, issue 36 item 7).  Importing creates no thread or connection, so
forking after it is safe.  A module that fails to import here is left to the worker, which imports it
again and fails the task with the cause.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

PRELOADED = ("cdc_lake.apply.decoding", "cdc_lake.kafka.reader")
"""What the executors' Python workers import to read and decode a batch."""


def preload(modules: Sequence[str] = PRELOADED) -> list[str]:
    """Import ``modules``; the names of those that failed."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # the worker imports it again and reports the cause with its task
            failed.append(name)
    return failed


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()  # type: ignore[no-untyped-call]
