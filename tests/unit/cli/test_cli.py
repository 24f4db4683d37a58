"""The ``cdc-lake`` command line through click's CliRunner: verbs, exit codes, status, config errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cdc_lake.cli.group import CdcLakeGroup
from cdc_lake.cli.main import cli
from cdc_lake.cli.stack import _print_statuses
from cdc_lake.stack.service import ServiceStatus
from cdc_lake.state import StateStore, TableState


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text("state_store:\n  url: sqlite:///state/cdc.db\n", encoding="utf-8")
    return path


def test_every_contract_verb_is_listed() -> None:
    with click.Context(cli) as ctx:
        names = set(cli.list_commands(ctx))

    assert {
        "onboard",
        "offboard",
        "connectors",
        "bootstrap",
        "apply",
        "run",
        "status",
        "lag",
        "validate",
        "rebootstrap",
        "demo",
        "stack",
    } <= names


@pytest.mark.parametrize("verb", ["status", "stack", "demo", "rebootstrap", "quarantine"])
def test_implemented_and_lazy_verbs_have_help(runner: CliRunner, verb: str) -> None:
    result = runner.invoke(cli, [verb, "--help"])

    assert result.exit_code == 0, result.output
    assert f"Usage: cli {verb}" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "name the tables to re-bootstrap"),
        (["--remove-old", "pg.public.a"], "give --remove-old alone"),
        (["pg.public.a", "--now"], "--now applies to --remove-old only"),
    ],
)
def test_rebootstrap_refuses_contradictory_arguments_in_one_line(
    runner: CliRunner, config_file: Path, args: list[str], fragment: str
) -> None:
    result = runner.invoke(cli, ["--config", str(config_file), "rebootstrap", *args])

    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert fragment in result.stderr


def test_compact_refuses_schedule_with_every_in_one_line(runner: CliRunner, config_file: Path) -> None:
    for every in ("0", "-1"):
        refused = runner.invoke(cli, ["--config", str(config_file), "compact", "--every", every])
        assert refused.exit_code == 2 and "--every" in refused.stderr, refused.stderr
    result = runner.invoke(cli, ["--config", str(config_file), "compact", "--schedule", "--every", "5"])

    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "--schedule plans every file slice once; it does not go with --every" in result.stderr


def test_status_json_on_an_empty_store(runner: CliRunner, config_file: Path) -> None:
    StateStore.open(f"sqlite:///{config_file.parent}/state/cdc.db").close()

    result = runner.invoke(cli, ["--config", str(config_file), "status", "--json"])

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_status_json_lists_tables(runner: CliRunner, config_file: Path) -> None:
    with StateStore.open(f"sqlite:///{config_file.parent}/state/cdc.db") as store:
        store.upsert_source("pg", "postgres", ["cdc-lake-pg"])
        store.upsert_table("pg.public.orders", "pg", 1, "/lake/pg/public/orders")
        store.upsert_table("pg.public.customers", "pg", 0, "/lake/pg/public/customers")
        store.transition("pg.public.orders", TableState.BOOTSTRAPPING)
        store.record_applied_offsets("pg.public.orders", {0: 42}, "20250101120000000")

    result = runner.invoke(cli, ["--config", str(config_file), "status", "--json"])

    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["name"] for row in rows] == ["pg.public.customers", "pg.public.orders"]
    orders = rows[1]
    assert {"name", "state", "lake_base_path", "last_commit", "applied_offsets", "freshness_seconds"} <= set(
        orders
    )
    assert orders["state"] == "BOOTSTRAPPING"
    assert orders["lake_base_path"] == "/lake/pg/public/orders"
    assert orders["last_commit"] == "20250101120000000"
    assert orders["applied_offsets"] == {"0": 42}
    assert orders["freshness_seconds"] is None
    assert rows[0]["state"] == "PENDING_BOOTSTRAP"


def test_status_table_for_people(runner: CliRunner, config_file: Path) -> None:
    with StateStore.open(f"sqlite:///{config_file.parent}/state/cdc.db") as store:
        store.upsert_source("pg", "postgres")
        store.upsert_table("pg.public.orders", "pg", 1, "/lake/o")
        store.transition("pg.public.orders", TableState.FAILED, error="replica wait timed out")

    result = runner.invoke(cli, ["--config", str(config_file), "status"], terminal_width=200)

    assert result.exit_code == 4, result.stderr
    assert "pg.public.orders" in result.stdout
    assert "FAILED" in result.stdout
    assert "  error: replica wait timed out" in result.stdout
    assert result.stderr.startswith("error: 1 tables FAILED: pg.public.orders")


def test_status_keeps_paths_whole_at_80_columns(runner: CliRunner, config_file: Path) -> None:
    path = "s3a://lake-bucket/warehouse/cdc/pg/public/a_rather_long_table_name_for_orders"
    with StateStore.open(f"sqlite:///{config_file.parent}/state/cdc.db") as store:
        store.upsert_source("pg", "postgres")
        store.upsert_table("pg.public.orders", "pg", 1, path)
        store.transition("pg.public.orders", TableState.BOOTSTRAPPING)
        store.record_applied_offsets("pg.public.orders", {0: 123456789, 1: 987654321}, "20250101120000000")

    result = runner.invoke(cli, ["--config", str(config_file), "status"], terminal_width=80)

    assert result.exit_code == 0, result.stderr
    assert f"  lake: {path}" in result.stdout
    assert "  applied offsets: 0:123456789 1:987654321" in result.stdout
    assert "20250101120000000" in result.stdout


def test_status_on_an_empty_store_says_what_to_do(runner: CliRunner, config_file: Path) -> None:
    StateStore.open(f"sqlite:///{config_file.parent}/state/cdc.db").close()

    result = runner.invoke(cli, ["--config", str(config_file), "status"])

    assert result.exit_code == 0
    assert "No tables onboarded yet" in result.stdout


def test_bad_config_key_exits_2_naming_the_key(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("lake:\n  teir: 1\n", encoding="utf-8")

    result = runner.invoke(cli, ["--config", str(bad), "status"])

    assert result.exit_code == 2
    assert result.stderr == f"error: {bad}: lake.teir: unknown key\n"


def test_missing_default_config_exits_2(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    result = runner.invoke(cli, ["status", "--json"])

    assert result.exit_code == 2
    assert "cdc-lake.yaml: config file not found" in result.stderr
    assert "--config" in result.stderr


def test_missing_explicit_config_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["--config", str(tmp_path / "nope.yaml"), "status"])

    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'nope.yaml'}: config file not found\n"


def test_default_config_in_the_working_directory_is_used(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cdc-lake.yaml").write_text("state_store:\n  url: sqlite:///here.db\n", encoding="utf-8")

    result = runner.invoke(cli, ["migrate", "--json"])

    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "here.db").is_file()


def test_errors_never_show_secrets(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATE_PW", "state-store-secret")
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(
        "state_store:\n  url: postgresql+psycopg://cdc:${STATE_PW}@127.0.0.1:1/state?connect_timeout=2\n",
        encoding="utf-8",
    )

    result = runner.invoke(cli, ["--config", str(path), "-vv", "status"])

    assert result.exit_code == 1
    assert result.stderr.startswith("error: state store postgresql+psycopg://cdc:***@127.0.0.1:1/state")
    assert "state-store-secret" not in result.output


def test_usage_errors_exit_2(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["validate"])

    assert result.exit_code == 2
    assert "Missing argument" in result.stderr


def test_lazy_subcommands_load_on_first_use(runner: CliRunner) -> None:
    @click.group(cls=CdcLakeGroup, lazy_subcommands={"later": "cdc_lake.cli.main:lag"})
    def group() -> None:
        """A test group."""

    assert "later" not in group.commands
    result = runner.invoke(group, ["later", "--help"])

    assert result.exit_code == 0
    assert "Show how far behind each part is" in result.stdout
    assert group.commands["later"].name == "lag"


def test_lazy_subcommand_must_be_a_click_command(runner: CliRunner) -> None:
    @click.group(cls=CdcLakeGroup, lazy_subcommands={"broken": "cdc_lake.cli.main:main"})
    def group() -> None:
        """A test group."""

    result = runner.invoke(group, ["broken"])

    assert isinstance(result.exception, TypeError)


def test_python_m_cdc_lake_exits_with_the_error_code(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "cdc_lake", "status"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert completed.returncode == 2
    assert (
        completed.stderr == f"error: cdc-lake.yaml: config file not found in {tmp_path}; pass --config PATH\n"
    )


def test_stack_table_keeps_addresses_and_logs_whole_at_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    address = "http://127.0.0.1:18081/apis/ccompat/v7"
    log = "/srv/a/rather/deep/data/directory/.cdc-lake/stack/logs/schema-registry.log"
    _print_statuses([ServiceStatus("schema-registry", True, False, address, log, "HTTP 503 from /subjects")])

    out = capsys.readouterr().out
    assert f"  address: {address}" in out
    assert f"  log: {log}" in out
    assert "unhealthy" in out and "HTTP 503 from /subjects" in out
    assert max(len(line) for line in out.splitlines() if "│" in line) <= 80


def test_the_readme_names_every_verb() -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    commands = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    with click.Context(cli) as ctx:
        verbs = cli.list_commands(ctx)

    assert [verb for verb in verbs if f"`{verb}" not in commands] == []
