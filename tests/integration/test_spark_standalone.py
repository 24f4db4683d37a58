"""The bootstrap and the applier on a real Spark standalone cluster (the stack's master and worker).

Both run as their own driver processes against ``spark://127.0.0.1:17077``; their executors (and the
Python workers that decode) run under the stack's ``spark-worker`` process:

- the bootstrap as the ``cdc-lake`` command, which starts its own driver JVM from the config (jars
  resolved through Maven, executors running the command's interpreter);
- the applier through ``spark-submit`` in client deploy mode, the way a cluster runs it: the jars
  by Maven coordinates (``--packages "$(cdc-lake spark jars --coordinates)"`` with
  ``--exclude-packages "$(cdc-lake spark jars --excludes)"``, resolved by Spark's own resolver
  from the local Maven repository, offline), cdc-lake and its dependencies as a packed environment
  (``cdc-lake spark pack-env``) shipped with ``--archives`` and run by the executors as
  ``./environment/bin/python``;
- ``cdc-lake spark check`` through ``spark-submit`` with the pre-resolved jar list
  (``--jars "$(cdc-lake spark jars)"``) and the same archive: its tasks report the interpreter,
  ``sys.prefix`` and ``cdc_lake`` of the executors' Python workers, which must be the unpacked
  archive in the executor's directory under the worker, not the driver's virtualenv.

The worker's status page lists the executors of every application; the applier's executor
directories hold the unpacked environment.  ``hoodie.*`` options from the config (global, and a
table's own winning) reach the files both commands write.  The lake ends equal to the source,
read with Spark+Hudi and hudi-rs.  Bad values fail in one line naming the setting: no Hudi on a
spark-submit driver's classpath, executors whose Python lacks cdc_lake; and the standalone master
refuses cluster deploy mode for a Python application, the reason only client mode is tested here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    assert_lake_equals_source,
    postgres_db,
    state_of,
    wait_streamed,
    write_db_config,
)
from support.common import cli_run, load

import cdc_lake
from cdc_lake.spark.pack import ENVIRONMENT_NAME, pack_environment
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.spark import EXECUTOR_MEMORY, spark_home
from cdc_lake.state.lifecycle import TableState

# Four drivers and their executors one after the other on a 1-core worker.
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

TABLES = """
create table public.items (id bigint primary key, val text, n integer);
insert into public.items select g, 'v' || g, g from generate_series(1, 300) g;
create table public.notes (id bigint primary key, body text);
insert into public.notes select g, 'note ' || g from generate_series(1, 20) g;
"""
COMMAND_TIMEOUT = 420
EXECUTOR_CONF = {
    "spark.executor.memory": EXECUTOR_MEMORY,
    "spark.cores.max": "1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


@pytest.fixture(scope="module")
def environment_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cdc-lake and its dependencies, packed as a cluster deployment ships them (no pyspark inside)."""
    packed = pack_environment(tmp_path_factory.mktemp("env") / "cdc-lake-env.tar.gz")
    assert "cdc-lake" in packed.distributions and "pyspark" not in packed.distributions
    return packed.path


def _cdc_lake(*args: str) -> subprocess.CompletedProcess[str]:
    """``cdc-lake ARGS...`` as its own process."""
    return subprocess.run(
        [sys.executable, "-m", "cdc_lake", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def _spark_submit(*args: str) -> subprocess.CompletedProcess[str]:
    """``spark-submit ARGS...`` from the installed pyspark distribution, in client deploy mode by default."""
    env = {**os.environ, "SPARK_HOME": str(spark_home())}
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    return subprocess.run(
        [str(spark_home() / "bin" / "spark-submit"), *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
        env=env,
    )


def _submit_args(
    master: str,
    *,
    jars: list[str] | None = None,
    archive: Path | None = None,
    python: str | None = None,
) -> list[str]:
    """spark-submit's options and the cdc-lake entry point: ``jars`` as --jars/--packages options."""
    args = ["--master", master, *(jars or [])]
    if archive is not None:
        args += ["--archives", f"{archive}#{ENVIRONMENT_NAME}"]
        python = f"./{ENVIRONMENT_NAME}/bin/python"
    if python is not None:
        args += ["--conf", f"spark.pyspark.python={python}"]
    # The driver runs on this host's interpreter (spark-submit's default is `python3` on the PATH).
    args += ["--conf", f"spark.pyspark.driver.python={sys.executable}"]
    for key, value in EXECUTOR_CONF.items():
        args += ["--conf", f"{key}={value}"]
    entrypoint = _cdc_lake("spark", "entrypoint")
    assert entrypoint.returncode == 0, entrypoint.stderr
    return [*args, entrypoint.stdout.strip()]


def _output(done: subprocess.CompletedProcess[str]) -> str:
    """What a command under spark-submit printed: Spark's PythonRunner merges its stderr into stdout."""
    return done.stdout + done.stderr


def _json_printed(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON document a command printed under spark-submit, among any lines logged around it."""
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line in ("[", "{", "[]", "{}"))
    return json.JSONDecoder().raw_decode("\n".join(lines[start:]))[0]


def _printed(*args: str) -> str:
    done = _cdc_lake(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _codecs(base_path: str) -> set[str]:
    """The compression codec of every column chunk of every data file of a table."""
    files = [f for f in Path(base_path).rglob("*.parquet") if ".hoodie" not in f.parts]
    assert files, f"no data files under {base_path}"
    return {
        meta.row_group(g).column(c).compression
        for meta in (pq.ParquetFile(f).metadata for f in files)
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
    }


def _executor_apps(local_stack: LocalStack) -> dict[str, set[str]]:
    """Application id -> the ids of its executors the stack's worker process ran."""
    status = local_stack.spark_worker.worker_status()
    apps: dict[str, set[str]] = {}
    for executor in status["executors"] + status["finishedexecutors"]:
        apps.setdefault(executor["appid"], set()).add(str(executor["id"]))
    return apps


def _with_hudi_options(config_path: Path) -> None:
    """``lake.format_options`` for every table, and the ``items`` table's own."""
    data: dict[str, Any] = yaml.safe_load(config_path.read_text())
    data["lake"]["format_options"] = {"hoodie.parquet.compression.codec": "gzip"}
    source = next(iter(data["sources"].values()))
    for table in source["tables"]:
        if table["name"].rsplit(".", 1)[-1] == "items":
            table["format_options"] = {"hoodie.parquet.compression.codec": "snappy"}
    config_path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_bootstrap_and_apply_run_on_a_standalone_cluster(
    spark: SparkSession,
    local_stack: LocalStack,
    db: SourceDb,
    tmp_path: Path,
    environment_archive: Path,
) -> None:
    app_name = f"cdc-lake-standalone-{db.suffix}"
    master = local_stack.spark_master
    worker = local_stack.spark_worker
    db.execute(TABLES)
    config_path = write_db_config(
        tmp_path,
        db,
        [{"name": "items"}, {"name": "notes"}],
        str(tmp_path / "lake"),
        spark={"master": master.url, "app_name": app_name, "conf": EXECUTOR_CONF},
    )
    _with_hudi_options(config_path)
    config = load(config_path)
    tables = [db.qualified("items"), db.qualified("notes")]
    onboarded = cli_run(config_path, "onboard", db.source)
    assert onboarded.exit_code == 0, onboarded.stderr or onboarded.output

    bootstrapped = _cdc_lake("--config", str(config_path), "bootstrap", *tables, "--json")
    assert bootstrapped.returncode == 0, bootstrapped.stderr
    assert [r["state"] for r in json.loads(bootstrapped.stdout)] == ["CATCHING_UP", "CATCHING_UP"]
    after_bootstrap = set(_executor_apps(local_stack))

    db.execute(
        "update public.items set val = 'changed', n = -n where id <= 40",
        "delete from public.items where id between 100 and 120",
        "insert into public.items select g, 'new', g from generate_series(301, 330) g",
        "update public.notes set body = 'edited' where id <= 5",
        "delete from public.notes where id = 20",
    )
    for table in tables:
        wait_streamed(config, table)
    # Spark's resolver reads the local Maven repository first: `cdc-lake spark jars` filled it.
    jar_paths = _printed("--config", str(config_path), "spark", "jars")
    packages = [
        "--packages",
        _printed("spark", "jars", "--coordinates"),
        "--exclude-packages",
        _printed("spark", "jars", "--excludes"),
        "--conf",
        f"spark.jars.ivy={tmp_path / 'ivy'}",
    ]
    submit = _submit_args(master.url, jars=packages, archive=environment_archive)
    deadline = time.monotonic() + COMMAND_TIMEOUT
    while any(state_of(config, table) is not TableState.LIVE for table in tables):
        applied = _spark_submit(*submit, "--config", str(config_path), "apply", "--once", "--json")
        assert applied.returncode == 0, _output(applied)[-4000:]
        assert time.monotonic() < deadline, "tables not LIVE"
    applier_apps = set(_executor_apps(local_stack)) - after_bootstrap

    listed = _submit_args(master.url, jars=["--jars", jar_paths], archive=environment_archive)
    checked = _spark_submit(*listed, "--config", str(config_path), "spark", "check", "--tasks", "2", "--json")
    assert checked.returncode == 0, _output(checked)[-4000:]
    pythons = _json_printed(checked)
    assert pythons, "no executor reported its Python"
    driver_prefix = Path(sys.prefix).resolve()
    for python in pythons:
        prefix = Path(python["prefix"])
        # <worker dir>/<app id>/<executor id>/environment: the archive Spark unpacked for this executor.
        assert prefix.name == ENVIRONMENT_NAME and prefix.parent.parent.parent == worker.work_dir, python
        assert Path(python["executable"]).is_relative_to(prefix), python
        assert Path(python["cdc_lake_path"]).is_relative_to(prefix), python
        # Not the driver's: its virtualenv, and the source tree its editable install points at.
        assert not Path(python["cdc_lake_path"]).resolve().is_relative_to(driver_prefix), python
        assert Path(python["cdc_lake_path"]).resolve() != Path(cdc_lake.__path__[0]).resolve(), python

    ran_here = [app for app in master.cluster_status()["completedapps"] if app["name"] == app_name]
    assert len(ran_here) >= 3, "bootstrap, apply and check did not run on the standalone master"
    assert all(app["state"] == "FINISHED" and app["cores"] >= 1 for app in ran_here)
    executors = _executor_apps(local_stack)
    assert {app["id"] for app in ran_here} <= set(executors), "an application had no executor in the worker"
    assert applier_apps, "the applier's executors did not run in the worker"
    for app_id in applier_apps:
        for executor_id in executors[app_id]:
            shipped = worker.work_dir / app_id / executor_id / ENVIRONMENT_NAME
            assert (shipped / "bin" / "python").is_symlink(), f"{app_id}/{executor_id}: no environment"

    items, notes = (config.lake.table_base_path(t) for t in tables)
    assert _codecs(items) == {"SNAPPY"}, "the table's format_options did not reach its files"
    assert _codecs(notes) == {"GZIP"}, "lake.format_options did not reach the files"
    assert assert_lake_equals_source(spark, config, db, "items") == 309
    assert assert_lake_equals_source(spark, config, db, "notes") == 19


def test_bad_cluster_settings_fail_in_one_line_naming_them(
    local_stack: LocalStack, db: SourceDb, tmp_path: Path
) -> None:
    master = local_stack.spark_master.url
    config_path = write_db_config(
        tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"), spark={"master": master}
    )
    # No --jars or --packages: a command that starts a Spark session is refused before any work.
    refused = _spark_submit(*_submit_args(master), "--config", str(config_path), "spark", "check")
    assert refused.returncode == 2, _output(refused)[-2000:]
    error = [line for line in _output(refused).splitlines() if line.startswith("error: ")]
    missing = "the lake format (hudi) is not on the driver's classpath"
    assert len(error) == 1 and missing in error[0], _output(refused)[-2000:]
    assert "--jars" in error[0] and "--packages" in error[0]

    # Executors on the bare base interpreter (no cdc_lake there): `spark check` names the setting.
    base = getattr(sys, "_base_executable", sys.executable)
    jars = ["--jars", _printed("--config", str(config_path), "spark", "jars")]
    bare = _submit_args(master, jars=jars, python=base)
    refused = _spark_submit(*bare, "--config", str(config_path), "spark", "check")
    assert refused.returncode == 2, _output(refused)[-2000:]
    error = [line for line in _output(refused).splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and error[0].startswith("error: spark.pyspark.python: "), _output(refused)[-2000:]
    assert "No module named 'cdc_lake'" in error[0]


def test_standalone_refuses_cluster_deploy_mode_for_python(local_stack: LocalStack) -> None:
    """What docs/deploy.md says: on a standalone master only client mode runs a Python driver."""
    refused = _spark_submit("--deploy-mode", "cluster", *_submit_args(local_stack.spark_master.url), "status")
    assert refused.returncode != 0
    assert "Cluster deploy mode is currently not supported for python applications on standalone" in (
        refused.stdout + refused.stderr
    )
