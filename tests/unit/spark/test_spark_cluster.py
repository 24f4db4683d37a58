"""Cluster settings without a cluster: master URLs, spark-submit's conf, jars, the packed environment."""

from __future__ import annotations

from pathlib import Path

import pyspark
import pytest
from click.testing import CliRunner
from support.spark_settings import Lake, Spark

from cdc_lake import jvm
from cdc_lake.cli.main import cli
from cdc_lake.config import load_config
from cdc_lake.exceptions import ConfigError
from cdc_lake.spark.pack import ENVIRONMENT_NAME, PackedEnvironment, runtime_distributions
from cdc_lake.spark.session import spark_conf


@pytest.mark.parametrize(
    "master",
    [
        "yarn",
        "k8s://https://api.example:6443",
        "k8s://https://kubernetes.default.svc",
        "spark://10.0.0.5:7077",
        "spark://a:7077,b:7077",
        "local",
        "local[*]",
        "local[4,2]",
    ],
)
def test_spark_master_urls_are_accepted(tmp_path: Path, master: str) -> None:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(f"spark:\n  master: '{master}'\n")
    assert load_config(path).spark.master == master


@pytest.mark.parametrize("master", ["yarn-cluster", "spark://host", "k8s:/api", "localhost", "local[x]"])
def test_a_bad_spark_master_is_one_line_naming_the_setting(tmp_path: Path, master: str) -> None:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(f"spark:\n  master: '{master}'\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message
    assert f"spark.master: '{master}' is not a Spark master URL" in message


def test_under_spark_submit_the_command_line_decides_master_memory_jars_and_python() -> None:
    submitted = {"spark.master": "yarn", "spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "64"}
    conf = spark_conf(Spark(conf={"spark.executor.memory": "4g"}, master="yarn"), Lake(), [], submitted)
    assert conf["spark.executor.memory"] == "4g"
    assert conf["spark.ui.enabled"] == "false", "a small-footprint default spark-submit left alone"
    # Left out, so the session keeps what spark-submit set (its --conf wins over cdc-lake's defaults).
    for decided in (
        "spark.sql.shuffle.partitions",
        "spark.master",
        "spark.driver.memory",
        "spark.pyspark.python",
        "spark.jars",
    ):
        assert decided not in conf


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        (Spark(master="spark://h:7077"), "spark.master: the config says 'spark://h:7077'"),
        (Spark(master="yarn", driver_memory="4g"), "spark.driver_memory: the config says '4g'"),
        (Spark(master="yarn", jars=("/jars/hudi.jar",)), "spark.jars: under spark-submit"),
    ],
)
def test_a_config_contradicting_spark_submit_is_refused(settings: Spark, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.").replace("'", "'")) as caught:
        spark_conf(settings, Lake(), [], {"spark.master": "yarn"})
    assert "\n" not in str(caught.value)


def test_packages_and_their_excludes_give_the_pre_resolved_set() -> None:
    runner = CliRunner()
    coordinates = runner.invoke(cli, ["spark", "jars", "--coordinates"])
    excludes = runner.invoke(cli, ["spark", "jars", "--excludes"])
    assert coordinates.exit_code == 0 and excludes.exit_code == 0, coordinates.output + excludes.output
    packages = {":".join(c.split(":")[:2]) for c in coordinates.output.strip().split(",")}
    excluded = set(excludes.output.strip().split(","))
    assert "org.apache.hudi:hudi-spark3.5-bundle_2.12" in packages
    assert not packages & excluded, "an excluded artifact is one of the set's own"
    shipped = {p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    provided = [
        e for e in jvm.SPARK_PACKAGES_EXCLUDES if any(j.startswith(e.split(":")[1] + "-") for j in shipped)
    ]
    assert len(provided) == 10, f"the Spark distribution no longer ships all of {provided}"
    both = runner.invoke(cli, ["spark", "jars", "--coordinates", "--excludes"])
    assert both.exit_code == 2 and "pass one of them" in both.output


def test_the_packed_environment_holds_cdc_lake_and_its_dependencies_but_not_spark() -> None:
    names = {d.metadata["Name"].lower() for d in runtime_distributions()}
    assert {"cdc-lake", "confluent-kafka", "fastavro", "pydantic", "packaging"} <= names
    assert not names & {"pyspark", "py4j", "pytest", "mypy", "ruff"}


def test_a_build_left_in_the_working_directory_is_not_what_gets_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pip wheel .`` leaves ``cdc_lake.egg-info`` in the checkout, listing the files of that day; from
    the checkout (``python -m cdc_lake`` puts it first on sys.path) the archive took its file list, and
    executors failed importing a module added since.  The installed distribution is what gets packed."""
    stale = tmp_path / "cdc_lake.egg-info"
    stale.mkdir()
    (stale / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: cdc-lake\nVersion: 0.0.1\n")
    (stale / "SOURCES.txt").write_text("cdc_lake/__init__.py\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    [packed] = [d for d in runtime_distributions() if d.metadata["Name"] == "cdc-lake"]

    assert packed.version != "0.0.1"
    assert "egg-info" not in str(packed.locate_file(""))


def test_packed_environment_spark_conf_and_bad_archive_names(tmp_path: Path) -> None:
    packed = PackedEnvironment(tmp_path / "env.tar.gz", ("cdc-lake",), 1, 10)
    assert packed.spark_conf("hdfs:///deploy/env.tar.gz") == {
        "spark.archives": f"hdfs:///deploy/env.tar.gz#{ENVIRONMENT_NAME}",
        "spark.pyspark.python": f"./{ENVIRONMENT_NAME}/bin/python",
    }
    for name in ("env.zip", "env.tar"):
        result = CliRunner().invoke(cli, ["spark", "pack-env", str(tmp_path / name)])
        assert result.exit_code == 2
        assert "name it .tar.gz or .tgz" in result.output
        assert "\n" not in result.output.strip()
    assert not list(tmp_path.iterdir())
