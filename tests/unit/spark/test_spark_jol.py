"""Every JVM cdc-lake's Spark jobs run in skips JOL's attach of the HotSpot Serviceability Agent.

Issue 36 item 7: Hudi sizes the records it keeps in memory with its bundled JOL, whose first use in a
process tried to attach the Serviceability Agent (and failed: "Unable to attach Serviceability Agent"):
2.5 to 3.7 s of the first ``getObjectSize`` call in a fresh driver, 0.4 to 0.7 s with
``-Djol.skipHotspotSAAttach=true`` (same sizes), paid by every ``validate`` and ``apply --once``.  The flag
goes on the driver cdc-lake starts and on the executors of a cluster, after the user's own options.
"""

from __future__ import annotations

from support.spark_settings import Lake, Spark

from cdc_lake.spark.session import spark_conf

SKIP = "-Djol.skipHotspotSAAttach=true"
DRIVER = "spark.driver.extraJavaOptions"
EXECUTOR = "spark.executor.extraJavaOptions"


def test_the_driver_and_the_executors_skip_the_serviceability_agent() -> None:
    conf = spark_conf(Spark(), Lake(), [])
    assert conf[DRIVER].split() == [SKIP]
    assert conf[EXECUTOR].split() == [SKIP]


def test_the_users_java_options_are_kept_first_and_the_flag_given_once() -> None:
    user = {DRIVER: "-Dmine=1 -Xss4m", EXECUTOR: f"-Dtheirs=2 {SKIP}"}
    conf = spark_conf(Spark(conf=user), Lake(), [])
    assert conf[DRIVER].split() == ["-Dmine=1", "-Xss4m", SKIP]
    assert conf[EXECUTOR].split() == ["-Dtheirs=2", SKIP]


def test_under_spark_submit_the_executors_keep_the_command_lines_options() -> None:
    submitted = {"spark.master": "local[2]", EXECUTOR: "-Dfrom.command.line=1"}
    conf = spark_conf(Spark(), Lake(), [], submitted)
    assert conf[EXECUTOR].split() == ["-Dfrom.command.line=1", SKIP]
    # The driver's JVM is already running: its options are the command line's.
    assert DRIVER not in conf
