"""One SparkSession (local[2], 1 GB driver, Hudi bundle) shared by every Spark test in the process.

``tests/integration/conftest.py`` builds its session-scoped ``spark`` fixture on
:func:`shared_spark`.  The first caller's settings win: the session is
process-wide (see :func:`cdc_lake.spark.get_spark`).

The session's JVM runs the serial garbage collector (:data:`TEST_JVM_OPTIONS`): on two cores shared by
two test processes G1's concurrent threads cost more than they save.  Measured on the apply suites
(``test_apply_behaviors.py`` and ``test_apply_redelivery.py`` in one process, CPU seconds of the
session's JVM from ``/proc``): 403 s with G1 (of them 57 s in GC threads), 349 s with the serial
collector (32 s).  Stopping the JIT at C1 as well saved more in that 8-minute run (317 s) but loses
in a 40-minute test process, where C2's compilations pay off (its compiled code cut the executor
threads' time from 157 s to 111 s), so C2 stays.  The Spark drivers tests start as subprocesses live a
minute or two, where C1 wins (``test_demo.py``: the machine's CPU 208 s -> 157 s): they run
:data:`SUBPROCESS_JVM_OPTIONS` (``tests/integration/conftest.py`` hands them over).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from cdc_lake.lake.format import DEFAULT_FORMAT
from cdc_lake.spark import get_spark
from cdc_lake.spark.session import DriverLife, S3SettingsLike

TEST_JVM_OPTIONS = "-XX:+UseSerialGC"
"""The test session's JVM options (see the module docstring)."""
SUBPROCESS_JVM_OPTIONS = f"-XX:TieredStopAtLevel=1 {TEST_JVM_OPTIONS}"
"""The JVM options of the Spark drivers tests start as subprocesses (see the module docstring)."""


@dataclass(frozen=True)
class LocalSparkSettings:
    """The ``spark`` settings the tests run with: the config defaults for a 2-core machine."""

    conf: Mapping[str, object]
    master: str = "local[2]"
    app_name: str = "cdc-lake-tests"
    driver_memory: str = "1g"
    jars: Sequence[str] = field(default_factory=tuple)
    class_data_sharing: bool = True


@dataclass(frozen=True)
class LocalLakeSettings:
    """The lake settings the session needs: the format and an optional S3-compatible store."""

    s3: S3SettingsLike | None = None
    format: str = DEFAULT_FORMAT


def shared_spark(tmp_root: Path, s3: S3SettingsLike | None = None) -> SparkSession:
    """Start (or return) the process-wide session, keeping Spark's scratch files under ``tmp_root``."""
    conf = {
        "spark.sql.warehouse.dir": str(tmp_root / "warehouse"),
        "spark.local.dir": str(tmp_root / "scratch"),
        "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
    }
    # The test process lives the whole run: it maps the class-sharing archive, a CLI driver writes it.
    return get_spark(LocalSparkSettings(conf=conf), LocalLakeSettings(s3=s3), life=DriverLife.SERVICE)
