"""Test-run policy shared by unit and integration tests.

With ``CDC_LAKE_FORBID_SKIPS=1`` (set by ``.ci/run``) a skipped test fails the run: a skipped
integration test is a missing test.

Spark's scratch directories (``spark-<uuid>``, each holding a copy of the session's jars, ~350 MB)
go under the run's pytest base directory: a Spark process a test kills on purpose never removes
its own, and pytest keeps only the last three base directories, so killed runs cannot fill /tmp.
"""

from __future__ import annotations

import os

import pytest

_skipped: list[str] = []


@pytest.fixture(scope="session", autouse=True)
def _spark_scratch_in_the_run_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every Spark process of the run, in-process or a CLI subprocess, inherits SPARK_LOCAL_DIRS."""
    os.environ["SPARK_LOCAL_DIRS"] = str(tmp_path_factory.mktemp("spark-scratch"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CDC_LAKE_FORBID_SKIPS") == "1" and _skipped:
        print(f"\nCDC_LAKE_FORBID_SKIPS=1 and {len(_skipped)} tests were skipped:")
        for nodeid in _skipped:
            print(f"  skipped: {nodeid}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
