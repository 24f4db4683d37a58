"""cdc-lake's Python daemon in local mode: pyspark's, with the decoding imported before it forks workers.

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


def test_a_local_sessions_python_daemon_is_cdc_lakes() -> None:
    assert spark_conf(Spark(), Lake(), [])["spark.python.daemon.module"] == "cdc_lake.spark.daemon"
    mine = {"spark.python.daemon.module": "pyspark.daemon"}
    assert spark_conf(Spark(conf=mine), Lake(), [])["spark.python.daemon.module"] == "pyspark.daemon"


def test_a_clusters_executors_keep_pysparks_daemon() -> None:
    """Executors without cdc-lake could not start cdc-lake's daemon: `cdc-lake spark check` names the
    missing environment by the worker's "No module named 'cdc_lake'" (test_spark_standalone.py)."""
    cluster = Spark(master="spark://127.0.0.1:17077")
    assert "spark.python.daemon.module" not in spark_conf(cluster, Lake(), [])
    submitted = {"spark.master": "local[2]"}
    assert "spark.python.daemon.module" not in spark_conf(Spark(), Lake(), [], submitted)


def test_the_daemon_imports_the_decoding_and_skips_what_it_cannot() -> None:
    code = (
        "import sys; from cdc_lake.spark import daemon; "
        "failed = daemon.preload((*daemon.PRELOADED, 'cdc_lake.no_such_module')); "
        "print(failed, all(name in sys.modules for name in daemon.PRELOADED))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["['cdc_lake.no_such_module']", "True"]
    assert daemon.PRELOADED == ("cdc_lake.apply.decoding", "cdc_lake.kafka.reader")
