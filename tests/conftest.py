"""Test-run policy shared by unit and integration tests.

With ``CDC_LAKE_FORBID_SKIPS=1`` (set by ``.ci/run``) a skipped test fails the run: a skipped
integration test is a missing test.
"""

from __future__ import annotations

import os

import pytest

_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CDC_LAKE_FORBID_SKIPS") == "1" and _skipped:
        print(f"\nCDC_LAKE_FORBID_SKIPS=1 and {len(_skipped)} tests were skipped:")
        for nodeid in _skipped:
            print(f"  skipped: {nodeid}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
