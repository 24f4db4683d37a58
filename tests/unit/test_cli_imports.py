"""``cdc-lake --help`` loads none of the heavy libraries: each command imports what it uses when it runs.

The CLI is run in a fresh interpreter (a module imported by another test would hide a regression) and
reports which of the heavy top-level packages ended up in ``sys.modules``.  Timings are in
docs/benchmarks.md, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HEAVY = ("pyspark", "py4j", "sqlalchemy", "alembic", "boto3", "psycopg", "pymysql", "confluent_kafka")
"""Libraries that cost tens of milliseconds each to import, and that only some commands use."""

_REPORT = """
import json, sys
from cdc_lake.cli.main import cli
try:
    cli(sys.argv[1:], prog_name="cdc-lake")
except SystemExit as exc:
    code = exc.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(sys.stdin.read())))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def _heavy_after(args: list[str]) -> dict[str, object]:
    """Run ``cdc-lake ARGS`` in a new interpreter on this checkout; its exit code and heavy modules."""
    completed = subprocess.run(
        [sys.executable, "-c", _REPORT, *args],
        input=json.dumps(HEAVY),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report: dict[str, object] = json.loads(completed.stderr.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize(
    "args", [["--help"], ["status", "--help"], ["apply", "--help"], ["bootstrap", "--help"]]
)
def test_help_imports_no_heavy_library(args: list[str]) -> None:
    assert _heavy_after(args) == {"code": 0, "heavy": []}
