"""cdc-lake's Python daemon: pyspark's, with the executors' decoding imported before it forks workers.

Issue 36 item 7: each Python worker of ``apply``'s decode job imported cdc-lake's decoding itself (about
0.7 s in a fresh interpreter, ``python -X importtime``); forked from a daemon that imported it first, a
worker starts with it.  A module the daemon cannot import is left to the worker, which reports it where
the job fails.
"""

from __future__ import annotations

import subprocess
import sys

from support.spark_settings import Lake, Spark

from cdc_lake.spark import daemon
from cdc_lake.spark.session import spark_conf


def test_the_sessions_python_daemon_is_cdc_lakes() -> None:
    assert spark_conf(Spark(), Lake(), [])["spark.python.daemon.module"] == "cdc_lake.spark.daemon"
    mine = {"spark.python.daemon.module": "pyspark.daemon"}
    assert spark_conf(Spark(conf=mine), Lake(), [])["spark.python.daemon.module"] == "pyspark.daemon"


def test_the_daemon_imports_the_decoding_and_skips_what_it_cannot() -> None:
    code = (
        "import sys; from cdc_lake.spark import daemon; "
        "failed = daemon.preload((*daemon.PRELOADED, 'cdc_lake.no_such_module')); "
        "print(failed, all(name in sys.modules for name in daemon.PRELOADED))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["['cdc_lake.no_such_module']", "True"]
    assert daemon.PRELOADED == ("cdc_lake.apply.decoding", "cdc_lake.kafka.reader")
