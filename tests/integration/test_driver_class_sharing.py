"""A real driver JVM writes the class-sharing archive at its exit, and the next driver maps it.

Issue 36 item 7 (:mod:`cdc_lake.spark.class_sharing`): the first process's JVM dumps the classes it loaded
when its stdin ends; the process renames the archive into place once the JVM has exited, and the next
driver started with the same runtime and jars loads its classes from that archive ("shared objects file
(top)" in HotSpot's class-load log is the dynamic archive's layer), not from the jars.  The test gives
its drivers one jar more than the default set, so its archive is its own and is removed at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cdc_lake.config import Config
from cdc_lake.spark import class_sharing
from cdc_lake.spark.session import driver_jars

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SESSION = """
import sys
from pathlib import Path

from cdc_lake.config import Config
from cdc_lake.spark import get_spark
from cdc_lake.spark.session import driver_jars

config = Config.default(Path(sys.argv[1]))
jars = [*map(str, driver_jars(config.spark, config.lake.format)), sys.argv[2]]
spark = get_spark(config.spark.model_copy(update={"jars": jars}), config.lake)
assert spark.range(1000).selectExpr("id % 7 as k").groupBy("k").count().count() == 7
"""

SHARED = "source: shared objects file (top)"


def _driver(extra_jar: Path, env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-c", SESSION, str(Path.cwd()), str(extra_jar)], check=True, env=env, timeout=300
    )


def test_the_next_driver_loads_its_classes_from_the_first_ones_archive(tmp_path: Path) -> None:
    extra = tmp_path / "marker.jar"
    with zipfile.ZipFile(extra, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    config = Config.default(Path.cwd())
    java = class_sharing.java_executable()
    assert java is not None, "no java on the PATH or under JAVA_HOME"
    jars = [*driver_jars(config.spark, config.lake.format), str(extra)]
    local = config.spark.master.startswith("local")  # local mode: the jars on the JVM's classpath
    archive = class_sharing.folder() / f"{class_sharing.archive_key(java, jars, on_classpath=local)}.jsa"
    assert not archive.exists()
    try:
        _driver(extra, dict(os.environ))
        assert archive.is_file() and archive.stat().st_size > 10_000_000
        assert not list(archive.parent.glob(f"{archive.stem}.*.partial"))
        assert not (archive.parent / f"{archive.stem}.lock").exists()

        log = tmp_path / "classes.log"
        options = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -Xlog:class+load=info:file={log}".strip()
        _driver(extra, {**os.environ, "SPARK_SUBMIT_OPTS": options})
        lines = log.read_text().splitlines()
        shared = [line for line in lines if SHARED in line]
        # Spark, Hadoop and Hudi classes mapped from the archive, not read from their jars.
        assert len(shared) > 5_000, f"{len(shared)} of {len(lines)} classes from the archive"
        assert any(" org.apache.spark.SparkContext " in line for line in shared)
        assert any(" org.apache.hudi." in line for line in shared)
    finally:
        archive.unlink(missing_ok=True)
