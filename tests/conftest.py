"""Test-run policy shared by unit and integration tests.

With ``CDC_LAKE_FORBID_SKIPS=1`` (set by ``.ci/run``) a skipped test fails the run: a skipped
integration test is a missing test.

Spark's scratch directories (``spark-<uuid>``: shuffle and block files; a cluster's driver also
serves the jars from there, ~350 MB) go under the run's pytest base directory: a Spark process a test
kills on purpose never removes its own, and pytest keeps only the last three base directories, so
killed runs cannot fill /tmp.

Longest modules first: ``dev/test.sh`` runs two processes a module at a time (``--dist loadfile
--no-loadscope-reorder``), so the run ends when the last module ends.  Collected in file order (or in
xdist's default order, most tests first) the slowest modules, which hold one to three tests, came last
and one process ran them alone at the end.  The collection is sorted by each module's seconds in
:data:`MODULE_SECONDS_FILE` (measured in a full run; a module not listed counts 0 and keeps its place
after the listed ones), so the short ones fill the end.  With ``CDC_LAKE_MODULE_SECONDS=PATH`` the run
writes the seconds it measured per module (setup, call and teardown of its tests) to ``PATH``, in the
same format: ``dev/test.sh`` writes them under ``.cdc-lake/`` to refresh the file from.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

MODULE_SECONDS_FILE = Path(__file__).with_name("module_seconds.json")
"""Seconds per test module (path relative to the repository) from a full run of ``dev/test.sh``."""
MODULE_SECONDS_ENV = "CDC_LAKE_MODULE_SECONDS"

_skipped: list[str] = []
_module_seconds: defaultdict[str, float] = defaultdict(float)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest modules first (a stable sort: tests keep their order within their module)."""
    seconds: dict[str, float] = json.loads(MODULE_SECONDS_FILE.read_text(encoding="utf-8"))
    items.sort(key=lambda item: -seconds.get(_module(item.nodeid), 0.0))


@pytest.fixture(scope="session", autouse=True)
def _spark_scratch_in_the_run_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every Spark process of the run, in-process or a CLI subprocess, inherits SPARK_LOCAL_DIRS."""
    os.environ["SPARK_LOCAL_DIRS"] = str(tmp_path_factory.mktemp("spark-scratch"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)
    _module_seconds[_module(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CDC_LAKE_FORBID_SKIPS") == "1" and _skipped:
        print(f"\nCDC_LAKE_FORBID_SKIPS=1 and {len(_skipped)} tests were skipped:")
        for nodeid in _skipped:
            print(f"  skipped: {nodeid}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    target = os.environ.get(MODULE_SECONDS_ENV)
    if target and _module_seconds and not hasattr(session.config, "workerinput"):
        ordered = sorted(_module_seconds.items(), key=lambda kv: -kv[1])
        Path(target).write_text(json.dumps({m: round(s, 1) for m, s in ordered}, indent=1) + "\n")
