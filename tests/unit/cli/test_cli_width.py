"""Tables and JSON at 80 columns: identifiers are never cut, and a connector config prints pasteable.

A table too wide for the terminal first leaves out its least important columns (and says which), then
wraps identifiers after a separator (``bench.public.`` / ``pgbench_accounts``), never inside a name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cdc_lake.cli.main import cli
from cdc_lake.cli.onboard_output import render_connector_config
from cdc_lake.cli.output import Column, wrap_identifier
from cdc_lake.redaction import mask_mapping
from cdc_lake.state import StateStore, TableState

_TABLES = ("bench.public.pgbench_accounts", "bench.public.pgbench_branches", "bench.public.pgbench_tellers")


def _status(tmp_path: Path, names: tuple[str, ...]) -> str:
    config = tmp_path / "cdc-lake.yaml"
    config.write_text("state_store:\n  url: sqlite:///state/cdc.db\n", encoding="utf-8")
    with StateStore.open(f"sqlite:///{tmp_path}/state/cdc.db") as store:
        store.upsert_source("bench", "postgres")
        for name in names:
            store.upsert_table(name, "bench", 0, f"/lake/{name}")
            store.transition(name, TableState.BOOTSTRAPPING)
            store.record_applied_offsets(name, {0: 4}, "20250101120000000")
    result = CliRunner().invoke(cli, ["--config", str(config), "status"], terminal_width=80)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _table_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line[:1] in "┃│┏┡└"]


def test_status_at_80_columns_keeps_every_table_name_whole(tmp_path: Path) -> None:
    out = _status(tmp_path, _TABLES)

    lines = _table_lines(out)
    assert max(len(line) for line in lines) <= 80, out
    cells = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert set(_TABLES) <= set(cells), out
    # What does not fit is left out, not cut: the last commit goes below the table, the tier is named.
    assert "last commit" not in "".join(lines) and "  last commit: 20250101120000000" in out


def test_a_name_too_long_for_its_cell_wraps_after_its_dots(tmp_path: Path) -> None:
    name = "warehouse_source.a_rather_long_schema_name.a_table_whose_name_is_long_too"
    out = _status(tmp_path, (name,))

    lines = _table_lines(out)
    assert max(len(line) for line in lines) <= 80, out
    cells = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert "".join(cells) == name
    assert all(cell.endswith(".") or cell == name.rsplit(".", 1)[1] for cell in cells), cells


@pytest.mark.parametrize(
    ("text", "width", "lines"),
    [
        ("bench.public.pgbench_accounts", 29, ["bench.public.pgbench_accounts"]),
        ("bench.public.pgbench_accounts", 20, ["bench.public.", "pgbench_accounts"]),
        ("a.b, c.d", 5, ["a.b, ", "c.d"]),
        # Nothing to break at: kept whole (the table grows), never cut.
        ("cdc-lake-connector_without_breaks", 8, ["cdc-", "lake-", "connector_without_breaks"]),
    ],
)
def test_identifiers_wrap_after_separators_only(text: str, width: int, lines: list[str]) -> None:
    assert wrap_identifier(text, width) == lines


def test_columns_default_to_being_kept() -> None:
    assert Column("table").priority == 0


def test_a_connector_config_prints_as_json_that_pastes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    config = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "table.include.list": ",".join(f"public.{name.rsplit('.', 1)[1]}" for name in _TABLES * 3),
        "database.password": "${env:CDC_LAKE_PG_PASSWORD}",
    }

    render_connector_config("cdc-lake-bench-shared", config)

    out = capsys.readouterr().out
    header, body = out.split("\n", 1)
    assert header == "connector config cdc-lake-bench-shared:"
    assert json.loads(body) == mask_mapping(config)
