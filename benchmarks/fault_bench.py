"""The applier's fault tests at full size: SIGKILLs mid-write and re-sent events, timed per engine.

CI runs ``tests/integration/test_apply_exactly_once.py`` (one SIGKILL of ``apply --once``) and
``tests/integration/test_apply_redelivery.py`` (a Connect restart mid-stream and a re-sent suffix) at
reduced sizes.  This runs the same tests, with the same product calls and the same assertions, at the
sizes given here (read by the tests from ``CDC_LAKE_FAULT_<NAME>``), and reports each test's outcome,
wall time and what it printed (random seed, offsets applied after each kill, Hudi rollbacks).  Run it
with the stack up, in the stack's network namespace::

    .venv/bin/python benchmarks/fault_bench.py --kills 3 --rows 220 --changes 170 --resent 40
        [--engine postgres] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = {
    "exactly-once": "tests/integration/test_apply_exactly_once.py",
    "redelivery": "tests/integration/test_apply_redelivery.py",
}


def _sizes(args: argparse.Namespace) -> dict[str, int]:
    return {"KILLS": args.kills, "ROWS": args.rows, "CHANGES": args.changes, "RESENT": args.resent}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the selected fault tests once at the given sizes; returns one entry per test case."""
    env = dict(os.environ, CDC_LAKE_KEEP_STACK="1")
    env.update({f"CDC_LAKE_FAULT_{name}": str(value) for name, value in _sizes(args).items()})
    with tempfile.TemporaryDirectory(prefix="fault-bench-") as scratch:
        report = Path(scratch, "junit.xml")
        command = [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-o", "junit_logging=system-out",
            f"--junitxml={report}", *(TESTS[name] for name in args.tests),
        ]  # fmt: skip
        if args.engine:
            command += ["-k", args.engine]
        began = time.monotonic()
        finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        total = time.monotonic() - began
        testcases = ET.parse(report).getroot().iter("testcase") if report.exists() else iter(())
        cases = [_case(case) for case in testcases]
    return {
        "sizes": _sizes(args),
        "exit_code": finished.returncode,
        "total_seconds": round(total, 1),
        "cases": cases,
        "pytest_tail": finished.stdout[-2000:],
    }


def _case(case: ET.Element) -> dict[str, Any]:
    failure = case.find("failure")
    if failure is None:
        failure = case.find("error")
    printed = case.findtext("system-out") or ""
    return {
        "test": case.get("name", ""),
        "seconds": round(float(case.get("time", "0")), 1),
        "passed": failure is None and case.find("skipped") is None,
        "failure": None if failure is None else (failure.get("message") or "")[:500],
        "printed": [line for line in printed.splitlines() if line.strip() and not line.startswith("---")],
    }


def _print(result: dict[str, Any]) -> None:
    sizes = ", ".join(f"{name.lower()} {value}" for name, value in result["sizes"].items())
    print(f"fault tests at {sizes}: exit {result['exit_code']}, {result['total_seconds']:.0f} s in all")
    for case in result["cases"]:
        outcome = "passed" if case["passed"] else f"FAILED: {case['failure']}"
        print(f"  {case['test']}: {case['seconds']:.1f} s, {outcome}")
        for line in case["printed"]:
            print(f"    {line[:74]}")
    if not result["cases"]:
        print(result["pytest_tail"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs of apply --once (CI: 1)")
    parser.add_argument("--rows", type=int, default=220, help="backlog before the first run (CI: 220)")
    parser.add_argument("--changes", type=int, default=170, help="redelivery test's source changes (CI: 60)")
    parser.add_argument("--resent", type=int, default=40, help="messages produced again (CI: 20)")
    parser.add_argument("--engine", choices=["postgres", "mariadb"], help="one engine only (default both)")
    parser.add_argument("--tests", nargs="+", choices=sorted(TESTS), default=sorted(TESTS))
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    for name, value in _sizes(args).items():
        if value < 1:
            parser.error(f"--{name.lower()} must be at least 1, not {value}")
    result = run(args)
    _print(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
