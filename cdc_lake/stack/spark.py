"""A Spark standalone cluster on loopback: one master and one worker process, from the installed pyspark.

What a real cluster adds over ``local[N]``: the driver (the cdc-lake command) and the executors run
in different JVMs, tasks and the Python workers that decode run under the worker, and jars reach the
executors through the driver's file server.  ``spark.master: spark://127.0.0.1:17077`` points a
config at it.  Small heaps: the worker offers one core and 1 GiB to executors.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import pyspark

from cdc_lake.stack.service import HOST, Service, StackLayout

WORKER_CORES = 1
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "768m"
"""What a config running on this cluster asks per executor (``spark.executor.memory``)."""


def spark_home() -> Path:
    """The Spark distribution the pyspark package ships (``bin/spark-class``, ``jars/``)."""
    return Path(pyspark.__file__).parent


def _daemon_env(layout: StackLayout) -> dict[str, str]:
    return {
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_WORKER_DIR": str(layout.path("spark", "work")),
        "SPARK_LOG_DIR": str(layout.path("logs")),
    }


def _json_status(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as response:
        loaded: dict[str, Any] = json.load(response)
    return loaded


class SparkMaster(Service):
    """The standalone master; its JSON status page lists workers and applications."""

    name = "spark-master"

    @property
    def url(self) -> str:
        """What ``spark.master`` is set to for this cluster."""
        return f"spark://{HOST}:{self.layout.ports.spark_master}"

    @property
    def status_url(self) -> str:
        return f"http://{HOST}:{self.layout.ports.spark_master_ui}/json/"

    def address(self) -> str:
        return self.url

    def install(self) -> None:
        (spark_home() / "bin" / "spark-class").chmod(0o755)

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        self.process.start(
            [
                str(spark_home() / "bin" / "spark-class"),
                "org.apache.spark.deploy.master.Master",
                "--host",
                HOST,
                "--port",
                str(self.layout.ports.spark_master),
                "--webui-port",
                str(self.layout.ports.spark_master_ui),
            ],
            env=_daemon_env(self.layout),
        )

    def cluster_status(self) -> dict[str, Any]:
        """The master's status document (workers, active and completed applications)."""
        return _json_status(self.status_url)

    def healthy(self) -> bool:
        return self.cluster_status().get("status") == "ALIVE"


class SparkWorker(Service):
    """One worker registered with the master, offering :data:`WORKER_CORES` and :data:`WORKER_MEMORY`."""

    name = "spark-worker"

    def __init__(self, layout: StackLayout, master: SparkMaster) -> None:
        super().__init__(layout)
        self.master = master

    def address(self) -> str:
        return f"http://{HOST}:{self.layout.ports.spark_worker_ui}"

    @property
    def work_dir(self) -> Path:
        """Where each executor runs: ``APP_ID/EXECUTOR_ID/`` (its jars, unpacked archives and logs)."""
        return self.layout.path("spark", "work")

    def worker_status(self) -> dict[str, Any]:
        """The worker's status document: ``executors`` and ``finishedexecutors``, each with its ``appid``."""
        return _json_status(f"{self.address()}/json/")

    def install(self) -> None:
        self.master.install()

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        work = self.work_dir
        work.mkdir(parents=True, exist_ok=True)
        self.process.start(
            [
                str(spark_home() / "bin" / "spark-class"),
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                HOST,
                "--webui-port",
                str(self.layout.ports.spark_worker_ui),
                "--cores",
                str(WORKER_CORES),
                "--memory",
                WORKER_MEMORY,
                "--work-dir",
                os.fspath(work),
                self.master.url,
            ],
            env=_daemon_env(self.layout),
        )

    def healthy(self) -> bool:
        """A worker ALIVE at the master whose UI got its own port: Spark moves a UI to the next port
        when another process holds it, and ``worker_status`` would then read that process's page."""
        workers = self.master.cluster_status().get("workers", [])
        port = f":{self.layout.ports.spark_worker_ui}"
        return any(
            worker.get("state") == "ALIVE" and str(worker.get("webuiaddress", "")).endswith(port)
            for worker in workers
        )
