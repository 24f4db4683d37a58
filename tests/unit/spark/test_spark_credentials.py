"""The S3 keys reach the driver JVM's Hadoop configuration but no process command line (a real local JVM).

Starts one local-mode driver JVM without jars (a few seconds), the way ``get_spark`` starts it for
any cdc-lake command, in a fresh interpreter, and reads ``/proc/<pid>/cmdline`` of every process
below it: any local user can read those with ``ps``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import support
from pydantic import SecretStr
from support.processes import descendants
from support.spark_settings import S3, Lake, Spark

from cdc_lake.spark import session as spark_session
from cdc_lake.spark.session import get_spark, stop_spark

ACCESS_KEY = "AKIA-FAKE-7f3c1e"
SECRET_KEY = "fake-secret-9b1d44a0c2"


def _cmdline(pid: int) -> str:
    try:
        raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def check_in_this_process(scratch: Path) -> None:
    """Start a local driver the way ``get_spark`` does (no jars), check it, and stop its JVM."""
    spark_session.driver_jars = lambda settings, lake_format: []  # type: ignore[assignment]  # a throwaway process
    conf = {"spark.local.dir": str(scratch / "scratch"), "spark.sql.warehouse.dir": str(scratch / "wh")}
    s3 = S3(endpoint="http://127.0.0.1:9", access_key=SecretStr(ACCESS_KEY), secret_key=SecretStr(SECRET_KEY))
    settings = Spark(conf=conf, master="local[1]", app_name="cdc-lake-credentials-test", driver_memory="512m")
    driver = get_spark(settings, Lake(s3=s3))
    try:
        lines = {pid: _cmdline(pid) for pid in descendants(os.getpid())}
        assert any("java" in line and "spark" in line.lower() for line in lines.values()), lines
        leaking = {pid: line for pid, line in lines.items() if SECRET_KEY in line or ACCESS_KEY in line}
        assert leaking == {}, leaking
        hadoop = driver.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        assert hadoop.get("fs.s3a.access.key") == ACCESS_KEY
        assert hadoop.get("fs.s3a.secret.key") == SECRET_KEY
        # What Spark SQL and Hudi ship to executors is built from the session's Hadoop conf.
        assert driver._jsparkSession.sessionState().newHadoopConf().get("fs.s3a.secret.key") == SECRET_KEY
    finally:
        stop_spark()


_SCRIPT = """
import sys
from pathlib import Path
import test_spark_credentials
test_spark_credentials.check_in_this_process(Path(sys.argv[1]))
print("checked")
"""


def test_s3_keys_reach_the_hadoop_conf_but_no_command_line(tmp_path: Path) -> None:
    # A fresh interpreter: the test run's own driver JVM (the integration tests') may be running here.
    # It imports this module (from its folder) and the helpers it imports (tests/, as pytest's pythonpath).
    tests = Path(support.__file__).resolve().parents[1]
    path = [str(Path(__file__).resolve().parent), str(tests), os.environ.get("PYTHONPATH", "")]
    script = tmp_path / "check.py"
    script.write_text(_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and "checked" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
