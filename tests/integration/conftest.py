"""Fixtures for tests against the real local stack and the shared SparkSession.

The stack is started once per test run (``cdc-lake stack up`` semantics: idempotent, reuses a
running stack) when the first ``integration`` test asks for it, and stopped at the end only if
this run started it (set ``CDC_LAKE_KEEP_STACK=1`` to keep it).  A service that cannot start
fails the run with its reason and log tail: nothing is skipped.

Every Spark driver JVM a test starts as a subprocess (a ``cdc-lake`` command, the demo's steps,
``spark-submit``) gets ``support.spark.SUBPROCESS_JVM_OPTIONS`` (C1 only, the serial collector) through
``SPARK_SUBMIT_OPTS``, which Spark's launcher puts on the driver's command line; the test process's own
driver starts without them (:func:`_short_lived_spark_drivers`).  Why, measured: ``support/spark.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from pyspark.sql import SparkSession
from support.engines import STACK_ENGINES, StackEngine
from support.spark import SUBPROCESS_JVM_OPTIONS, shared_spark
from support.trino_reader import assert_trino_reads_every_table_under

from cdc_lake.config import Config, S3Settings
from cdc_lake.spark import session as spark_session
from cdc_lake.spark import stop_spark
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.service import LAKE_BUCKET

SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"


@pytest.fixture(scope="session", autouse=True)
def _short_lived_spark_drivers() -> Iterator[None]:
    """Subprocesses inherit :data:`SUBPROCESS_JVM_OPTIONS`; this process's own driver JVM does not."""
    own = os.environ.get(SUBMIT_OPTS)
    launch = spark_session.launch_gateway

    def launch_own_driver(*args: Any, **kwargs: Any) -> Any:
        options = os.environ.pop(SUBMIT_OPTS, None)
        if own is not None:
            os.environ[SUBMIT_OPTS] = own
        try:
            return launch(*args, **kwargs)
        finally:
            if options is not None:
                os.environ[SUBMIT_OPTS] = options

    patch = pytest.MonkeyPatch()
    patch.setenv(SUBMIT_OPTS, f"{own or ''} {SUBPROCESS_JVM_OPTIONS}".strip())
    patch.setattr(spark_session, "launch_gateway", launch_own_driver)
    yield
    patch.undo()


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    """The running local stack (started here if it was not running).

    Stopped at the end only when no service at all ran before: a stack someone else started (another
    test run, a developer), even with one service restarting at that moment, is theirs to stop.
    """
    # With Trino: the comparisons read lake tables through it too (support/trino_reader.py).
    stack = LocalStack(Config.default(Path.cwd()).stack, ("trino",))
    started_here = not any(status.running for status in stack.status())
    stack.up()
    yield stack
    if started_here and os.environ.get("CDC_LAKE_KEEP_STACK") != "1":
        stack.down()


@pytest.fixture(autouse=True)
def _stack_for_integration_tests(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("integration") is not None:
        request.getfixturevalue("local_stack")


@pytest.fixture(autouse=True)
def _the_process_session_first(request: pytest.FixtureRequest) -> None:
    """A ``spark`` test gets the process's shared session before its body runs: a CLI verb the test runs
    in-process (``cli_run``) would otherwise start the process's one driver as a one-shot command's
    (``DriverLife.ONE_SHOT`` writes the class-sharing archive at exit, ``SMALL`` runs C1 only) and the
    process would keep that driver for the rest of the run."""
    if request.node.get_closest_marker("spark") is not None:
        request.getfixturevalue("spark")


@pytest.fixture(scope="session")
def stack_s3_settings() -> S3Settings:
    """Lake S3 settings pointing at the stack's object store (only its address; it may not run yet)."""
    stack = LocalStack(Config.default(Path.cwd()).stack)
    creds = stack.layout.credentials
    return S3Settings(
        endpoint=stack.object_store.endpoint,
        region="us-east-1",
        access_key=creds.s3_access_key,
        secret_key=creds.s3_secret_key,
        path_style_access=True,
    )


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, stack_s3_settings: S3Settings) -> Iterator[SparkSession]:
    """The one SparkSession of the run, with the Hudi bundle and S3A set up for the stack's store."""
    yield shared_spark(tmp_path_factory.mktemp("spark"), s3=stack_s3_settings)
    stop_spark()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Each test's call outcome on its item (``item.cdc_lake_call_passed``) for the teardown checks."""
    outcome: Any = yield
    if call.when == "call":
        item.cdc_lake_call_passed = outcome.get_result().passed  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _trino_reads_what_the_test_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a passed integration test that has a ``tmp_path``, Trino reads every lake table left there
    that the test did not compare through Trino itself, as Spark reads it
    (``support.trino_reader.assert_trino_reads_as_spark``): every table the stack tests create locally
    is read by Trino.  (Tables in the object store are the tests' own to compare; they remove them.)"""
    if request.node.get_closest_marker("integration") is None or "tmp_path" not in request.fixturenames:
        yield
        return
    spark: SparkSession = request.getfixturevalue("spark")
    tmp_path: Path = request.getfixturevalue("tmp_path")
    yield
    if getattr(request.node, "cdc_lake_call_passed", False):
        assert_trino_reads_every_table_under(spark, tmp_path)


@pytest.fixture
def trino_reads_every_table(spark: SparkSession, tmp_path: Path, local_stack: LocalStack) -> Iterator[None]:
    """After the test, Trino reads every lake table it left under ``tmp_path`` as Spark reads it
    (``support.trino_reader.assert_trino_reads_as_spark``): for the writer-level modules, which write
    tables without a product verb and no stack otherwise (``pytestmark = pytest.mark.usefixtures(...)``);
    a test of theirs that left no table there fails (the check cannot pass by finding nothing)."""
    yield
    assert assert_trino_reads_every_table_under(spark, tmp_path) > 0, f"no lake table under {tmp_path}"


@pytest.fixture(scope="session")
def s3_lake_root(local_stack: LocalStack) -> str:
    """An ``s3a://`` prefix in the stack's lake bucket."""
    return f"s3a://{LAKE_BUCKET}/tests"


@pytest.fixture(scope="module", params=STACK_ENGINES, ids=str)
def engine(request: pytest.FixtureRequest) -> StackEngine:
    """Each source engine the local stack runs, for the behaviour suites (``test_*_behaviors.py``)."""
    return cast(StackEngine, request.param)
