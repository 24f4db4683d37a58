"""The S3 keys reach the driver JVM's Hadoop configuration but no process command line (a real local JVM).

Starts one local-mode driver JVM without jars (a few seconds), the way ``get_spark`` starts it for
any cdc-lake command, and reads ``/proc/<pid>/cmdline`` of every process below this one: any local
user can read those with ``ps``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.spark_settings import S3, Lake, Spark
from pydantic import SecretStr
from pyspark import SparkContext
from pyspark.sql import SparkSession

from cdc_lake.spark import session as spark_session
from cdc_lake.spark.session import get_spark, stop_spark

ACCESS_KEY = "AKIA-FAKE-7f3c1e"
SECRET_KEY = "fake-secret-9b1d44a0c2"


def _descendants(root: int) -> list[int]:
    """Every live process below ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, pending = [], [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[SparkSession]:
    """A local driver started by ``get_spark`` (no jars: nothing runs on it), stopped with its JVM."""
    if SparkContext._gateway is not None:
        pytest.fail("a driver JVM is already running in this process: this test needs to start its own")
    monkeypatch.setattr(spark_session, "driver_jars", lambda settings: [])
    conf = {"spark.local.dir": str(tmp_path / "scratch"), "spark.sql.warehouse.dir": str(tmp_path / "wh")}
    s3 = S3(endpoint="http://127.0.0.1:9", access_key=SecretStr(ACCESS_KEY), secret_key=SecretStr(SECRET_KEY))
    settings = Spark(conf=conf, master="local[1]", app_name="cdc-lake-credentials-test", driver_memory="512m")
    session = get_spark(settings, Lake(s3=s3))
    try:
        yield session
    finally:
        stop_spark()
        gateway = SparkContext._gateway
        assert gateway is not None
        proc = gateway.proc  # type: ignore[attr-defined]
        gateway.shutdown()
        proc.stdin.close()  # the JVM exits when its stdin closes
        proc.wait(timeout=60)
        SparkContext._gateway = None
        SparkContext._jvm = None


def test_s3_keys_reach_the_hadoop_conf_but_no_command_line(driver: SparkSession) -> None:
    lines = {pid: _cmdline(pid) for pid in _descendants(os.getpid())}
    assert any("java" in line and "spark" in line.lower() for line in lines.values()), lines

    leaking = {pid: line for pid, line in lines.items() if SECRET_KEY in line or ACCESS_KEY in line}

    assert leaking == {}
    hadoop = driver.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    assert hadoop.get("fs.s3a.access.key") == ACCESS_KEY
    assert hadoop.get("fs.s3a.secret.key") == SECRET_KEY
    # What Spark SQL and Hudi ship to executors is built from the session's Hadoop conf.
    assert driver._jsparkSession.sessionState().newHadoopConf().get("fs.s3a.secret.key") == SECRET_KEY
