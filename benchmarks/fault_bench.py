"""The applier's fault tests at full size, and the seeded end-to-end workload over many seeds.

CI runs ``tests/integration/test_apply_exactly_once.py`` (a seeded random workload through bootstrap,
``cdc-lake run`` killed once by SIGKILL, and ``apply --once``; one seed per engine) and
``tests/integration/test_apply_redelivery.py`` (a Connect restart mid-stream and a re-sent suffix) at
reduced sizes.  This runs the same tests, with the same product calls and the same assertions, at the
sizes given here (read by the tests from ``CDC_LAKE_FAULT_<NAME>``), and reports each test's outcome,
wall time and what it printed.  ``--seeds N`` runs the end-to-end test N times instead, each with a
random seed (``CDC_LAKE_TEST_SEED``), and prints per seed: the seed, rows compared, mismatching rows
and seconds; a failing seed's workload (a replayable SQL script, ``CDC_LAKE_WORKLOAD_DIR``) stays in
the directory it prints.  Run it with the stack up, from the stack's directory (the tests find the
stack there)::

    .venv/bin/python benchmarks/fault_bench.py --operations 40 --changes 170 --resent 40
        [--engine postgres] [--json results.json]
    .venv/bin/python benchmarks/fault_bench.py --seeds 20 --engine mariadb [--json results.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
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
COMPARED = re.compile(r"seed (\d+): rows compared (\d+), mismatches (\d+)")
"""What the end-to-end test prints once it compared the lake with the source."""


def _sizes(args: argparse.Namespace) -> dict[str, int]:
    return {"OPERATIONS": args.operations, "CHANGES": args.changes, "RESENT": args.resent}


def _pytest(tests: list[str], engine: str | None, env: dict[str, str]) -> dict[str, Any]:
    """Run ``tests`` (paths in this repository) in pytest; exit code, wall time and one entry per case."""
    with tempfile.TemporaryDirectory(prefix="fault-bench-") as scratch:
        report = Path(scratch, "junit.xml")
        command = [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-o", "junit_logging=system-out",
            f"--junitxml={report}", *(str(ROOT / test) for test in tests),
        ]  # fmt: skip
        if engine:
            command += ["-k", engine]
        began = time.monotonic()
        finished = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        total = time.monotonic() - began
        testcases = ET.parse(report).getroot().iter("testcase") if report.exists() else iter(())
        cases = [_case(case) for case in testcases]
    return {
        "exit_code": finished.returncode,
        "total_seconds": round(total, 1),
        "cases": cases,
        "pytest_tail": finished.stdout[-2000:],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the selected fault tests once at the given sizes."""
    env = dict(os.environ, CDC_LAKE_KEEP_STACK="1")
    env.update({f"CDC_LAKE_FAULT_{name}": str(value) for name, value in _sizes(args).items()})
    return {"sizes": _sizes(args), **_pytest([TESTS[name] for name in args.tests], args.engine, env)}


def run_seeds(args: argparse.Namespace) -> dict[str, Any]:
    """Run the end-to-end test once per random seed; failing seeds' workloads stay in ``args.workloads``."""
    args.workloads.mkdir(parents=True, exist_ok=True)
    print(f"failing workloads go to {args.workloads.resolve()}")
    env = dict(os.environ, CDC_LAKE_KEEP_STACK="1", CDC_LAKE_WORKLOAD_DIR=str(args.workloads.resolve()))
    env["CDC_LAKE_FAULT_OPERATIONS"] = str(args.operations)
    seeds = []
    for seed in random.sample(range(10**6), args.seeds):
        result = _pytest([TESTS["exactly-once"]], args.engine, {**env, "CDC_LAKE_TEST_SEED": str(seed)})
        for case in result["cases"]:
            found = [COMPARED.search(line) for line in case["printed"] + [case["failure"] or ""]]
            compared = next((m for m in found if m), None)
            entry = {
                "seed": seed,
                "test": case["test"],
                "passed": case["passed"],
                "rows_compared": None if compared is None else int(compared.group(2)),
                "mismatches": None if compared is None else int(compared.group(3)),
                "seconds": case["seconds"],
                "process_seconds": result["total_seconds"],
                "failure": case["failure"],
            }
            seeds.append(entry)
            _print_seed(entry)
        if not result["cases"]:
            print(result["pytest_tail"])
            seeds.append({"seed": seed, "test": None, "passed": False, "failure": "pytest ran no test"})
    return {
        "engine": args.engine or "both",
        "operations": args.operations,
        "workloads": str(args.workloads.resolve()),
        "seeds_run": len(seeds),
        "rows_compared": sum(s.get("rows_compared") or 0 for s in seeds),
        "mismatches": sum(s.get("mismatches") or 0 for s in seeds),
        "failed": [s["seed"] for s in seeds if not s["passed"]],
        "seeds": seeds,
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
        "failure": None if failure is None else (failure.get("message") or "")[:2000],
        "printed": [line for line in printed.splitlines() if line.strip() and not line.startswith("---")],
    }


def _print_seed(entry: dict[str, Any]) -> None:
    outcome = "passed" if entry["passed"] else f"FAILED: {(entry['failure'] or '')[-400:]}"
    print(
        f"  seed {entry['seed']} {entry['test']}: rows compared {entry['rows_compared']}, "
        f"mismatches {entry['mismatches']}, {entry['seconds']:.1f} s, {outcome}"
    )


def _print(result: dict[str, Any]) -> None:
    if "seeds_run" in result:
        print(
            f"seeds run {result['seeds_run']}, rows compared {result['rows_compared']}, mismatches "
            f"{result['mismatches']}, failed seeds {result['failed'] or 'none'} "
            f"(their workloads: {result['workloads']})"
        )
        return
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
    parser.add_argument("--operations", type=int, default=40, help="workload operations per phase (CI: 16)")
    parser.add_argument("--changes", type=int, default=170, help="redelivery test's source changes (CI: 60)")
    parser.add_argument("--resent", type=int, default=40, help="messages produced again (CI: 20)")
    parser.add_argument("--engine", choices=["postgres", "mariadb"], help="one engine only (default both)")
    parser.add_argument("--tests", nargs="+", choices=sorted(TESTS), default=sorted(TESTS))
    parser.add_argument("--seeds", type=int, help="run the end-to-end test with this many random seeds")
    parser.add_argument(
        "--workloads",
        type=Path,
        default=Path(f"fault-workloads-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"),
        help="with --seeds: where failing seeds' workloads are kept (default: a new directory here)",
    )
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    for name, value in {**_sizes(args), "SEEDS": args.seeds or 1}.items():
        if value < 1:
            parser.error(f"--{name.lower()} must be at least 1, not {value}")
    result = run_seeds(args) if args.seeds else run(args)
    _print(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.seeds:
        return 0 if not result["failed"] else 1
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
