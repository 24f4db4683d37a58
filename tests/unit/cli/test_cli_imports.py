"""``cdc-lake --help`` loads none of the heavy libraries: each command imports what it uses when it runs.

The CLI runs in a fresh interpreter (a module imported by another test would hide a regression); the
timings are in docs/benchmarks.md, not here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.imports import heavy_imports

from cdc_lake.state.store import StateStore

_RUN_CLI = """
import sys
from cdc_lake.cli.main import cli
try:
    cli(sys.argv[1:], prog_name="cdc-lake")
except SystemExit as exc:
    assert exc.code == 0, exc.code
"""


@pytest.mark.parametrize(
    "args", [["--help"], ["status", "--help"], ["apply", "--help"], ["bootstrap", "--help"]]
)
def test_help_imports_no_heavy_library(args: list[str]) -> None:
    assert heavy_imports(_RUN_CLI, *args) == []


def test_status_imports_the_state_store_and_nothing_else_heavy(tmp_path: Path) -> None:
    (tmp_path / "cdc-lake.yaml").write_text("state_store:\n  url: sqlite:///state/cdc.db\n", encoding="utf-8")
    StateStore.open(f"sqlite:///{tmp_path}/state/cdc.db").close()

    # A store at the current revision is read without Alembic (one query compares the revision).
    assert heavy_imports(_RUN_CLI, "status", cwd=tmp_path) == ["sqlalchemy"]


def test_status_of_tables_loads_no_spark(tmp_path: Path) -> None:
    (tmp_path / "cdc-lake.yaml").write_text("state_store:\n  url: sqlite:///state/cdc.db\n", encoding="utf-8")
    with StateStore.open(f"sqlite:///{tmp_path}/state/cdc.db") as store:
        store.upsert_source("pg", "postgres")
        store.upsert_table("pg.public.orders", "pg", 0, "/lake/pg/public/orders")

    # The Kafka lag is measured (the Kafka client), the consumer group named without Spark's reader.
    assert "pyspark" not in heavy_imports(_RUN_CLI, "status", "--json", cwd=tmp_path)
