"""The Spark properties the shared session is built with (no JVM needed)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.etree import ElementTree

import pytest
from support.spark_settings import S3, Lake, Spark

from cdc_lake.exceptions import ConfigError
from cdc_lake.lake.format import format_facts
from cdc_lake.spark import session
from cdc_lake.spark.session import PRODUCT_REQUIRED_CONF, launch_conf, quiet_conf, spark_conf


def test_local_session_has_the_formats_settings_and_small_footprint() -> None:
    conf = spark_conf(Spark(), Lake(), ["/jars/hudi.jar", "/jars/aws.jar"])
    for key, value in {**format_facts(Lake().format).spark_conf, **PRODUCT_REQUIRED_CONF}.items():
        assert conf[key] == value
    assert conf["spark.master"] == "local[2]"
    assert conf["spark.driver.memory"] == "1g"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.jars"] == "/jars/hudi.jar,/jars/aws.jar"
    assert not any(key.startswith("spark.hadoop.fs.s3a.") for key in conf)


def test_the_session_schedules_fairly_with_the_pools_the_package_ships() -> None:
    """``run``'s table-service jobs and its continuous validation's go to pools of their own
    (``TABLE_SERVICES_POOL``, ``VALIDATION_POOL``) of the fair scheduler, whose pools are the wheel's
    ``fairscheduler.xml``; a user conf may choose FIFO again."""
    conf = spark_conf(Spark(), Lake(), [])
    assert conf["spark.scheduler.mode"] == "FAIR"
    pools = ElementTree.parse(conf["spark.scheduler.allocation.file"]).getroot()
    weights = {pool.get("name"): pool.findtext("weight") for pool in pools.iter("pool")}
    assert weights == {"default": "2", session.TABLE_SERVICES_POOL: "1", session.VALIDATION_POOL: "1"}
    fifo = spark_conf(Spark(conf={"spark.scheduler.mode": "FIFO"}), Lake(), [])
    assert fifo["spark.scheduler.mode"] == "FIFO"


def test_user_conf_overrides_defaults_but_not_requirements() -> None:
    conf = spark_conf(Spark(conf={"spark.sql.shuffle.partitions": 8, "spark.ui.enabled": True}), Lake(), [])
    assert conf["spark.sql.shuffle.partitions"] == "8"
    assert conf["spark.ui.enabled"] == "true"
    assert "spark.jars" not in conf
    java = {"spark.serializer": "org.apache.spark.serializer.JavaSerializer"}
    with pytest.raises(ConfigError, match=r"^spark\.conf\.spark\.serializer: the lake format \(hudi\) needs"):
        spark_conf(Spark(conf=java), Lake(), [])
    legacy = {"spark.sql.avro.datetimeRebaseModeInRead": "LEGACY"}
    with pytest.raises(ConfigError, match=r"^spark\.conf\.spark\.sql\.avro\.\w+: cdc-lake needs 'CORRECTED'"):
        spark_conf(Spark(conf=legacy), Lake(), [])


def test_s3a_settings_for_an_http_endpoint() -> None:
    conf = spark_conf(Spark(), Lake(s3=S3()), [])
    s3a = {k.removeprefix("spark.hadoop.fs.s3a."): v for k, v in conf.items() if "fs.s3a." in k}
    assert s3a["endpoint"] == "http://127.0.0.1:17070"
    assert s3a["connection.ssl.enabled"] == "false"
    assert s3a["path.style.access"] == "true"
    assert s3a["endpoint.region"] == "us-east-1"
    assert s3a["access.key"] == "AKIA-TEST"
    assert s3a["secret.key"] == "s3cr3t-value"
    assert s3a["aws.credentials.provider"].endswith("SimpleAWSCredentialsProvider")


def test_s3a_without_keys_leaves_the_default_credential_chain() -> None:
    conf = spark_conf(Spark(), Lake(s3=S3(endpoint="https://s3.example", access_key=None)), [])
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert "spark.hadoop.fs.s3a.access.key" not in conf
    assert "spark.hadoop.fs.s3a.aws.credentials.provider" not in conf


def test_quiet_conf_keeps_the_users_driver_java_options(tmp_path: Path) -> None:
    conf = quiet_conf({"spark.driver.extraJavaOptions": "-Dmine=1"}, tmp_path / "log4j2.properties")

    options = conf["spark.driver.extraJavaOptions"].split()
    assert options[0] == "-Dmine=1"
    assert f"-Dlog4j2.configurationFile=file:{tmp_path / 'log4j2.properties'}" in options
    assert "-Djdk.attach.allowAttachSelf=true" in options


def test_the_driver_command_line_gets_no_credentials() -> None:
    user_secret = "spark.hadoop.fs.s3a.session.token"
    conf = spark_conf(Spark(conf={user_secret: "t0ken-value"}), Lake(s3=S3()), ["/jars/hudi.jar"])

    launched = launch_conf(conf)

    assert not {"AKIA-TEST", "s3cr3t-value", "t0ken-value"} & set(launched.values())
    assert "spark.hadoop.fs.s3a.access.key" not in launched
    assert "spark.hadoop.fs.s3a.secret.key" not in launched
    assert user_secret not in launched
    # Everything else starts the JVM as before: master, memory, jars, the S3A endpoint.
    assert launched["spark.master"] == "local[2]"
    assert launched["spark.jars"] == "/jars/hudi.jar"
    assert launched["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:17070"


@pytest.mark.parametrize("master", ["local[2]", "spark://127.0.0.1:7077"])
def test_a_local_driver_gets_the_jars_on_its_classpath_a_cluster_in_spark_jars(
    monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    """Local mode: the jars follow Spark's own on the JVM's classpath (``SPARK_DIST_CLASSPATH``, set for the
    launch only), so the driver-executor never copies them into its scratch folder; a cluster's executors
    fetch ``spark.jars``."""
    launched: list[tuple[dict[str, str], list[str], str | None]] = []

    def launch(conf: Mapping[str, str], verbose: bool, classpath: Sequence[str]) -> None:
        launched.append((dict(conf), [str(c) for c in classpath], os.environ.get("SPARK_DIST_CLASSPATH")))

    monkeypatch.setattr(session, "_launch_gateway", launch)
    jars = ["/jars/hudi.jar", "/jars/aws.jar"]
    monkeypatch.setattr(session, "driver_jars", lambda settings, lake_format: jars)
    monkeypatch.delenv("SPARK_DIST_CLASSPATH", raising=False)
    conf = session._launch_own_jvm(Spark(master=master, class_data_sharing=False), Lake(), False)
    ((launch_conf, classpath, _),) = launched
    if master.startswith("local"):
        assert classpath == ["/jars/hudi.jar", "/jars/aws.jar"]
        assert "spark.jars" not in launch_conf and "spark.jars" not in conf
    else:
        assert classpath == []
        assert launch_conf["spark.jars"] == "/jars/hudi.jar,/jars/aws.jar"
    assert "SPARK_DIST_CLASSPATH" not in os.environ
