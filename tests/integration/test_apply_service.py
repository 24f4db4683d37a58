"""``cdc-lake run`` as a process: tier 0 applies continuously, records freshness, stops cleanly on SIGTERM.

Also a schema change while it runs: a nullable column added on the source appears in the lake, and rows
written before it read null.  And ``apply --once`` with nothing new does not start Spark.
"""

from __future__ import annotations

import datetime as dt
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from pyspark.sql import SparkSession
from support.apply import (
    Capture,
    SyntheticTopic,
    Workload,
    assert_lake_matches,
    config_dict,
    record_catching_up,
    simple_capture,
    synthetic_config,
)
from support.common import wait_until, write_and_load

from cdc_lake.cli.main import cli
from cdc_lake.config import Config
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


@pytest.fixture
def capture(local_stack: LocalStack) -> Iterator[Capture]:
    with simple_capture(local_stack, "postgres") as captured:
        yield captured


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _samples(exposition: str, table: str) -> dict[str, float]:
    """Sample values labelled with ``table`` in a Prometheus text exposition, by metric name."""
    found: dict[str, float] = {}
    for line in exposition.splitlines():
        if not line.startswith("#") and f'table="{table}"' in line:
            name = line.split("{", 1)[0]
            found[name] = float(line.rsplit(" ", 1)[1])
    return found


def _applied(config: Config, table: str) -> int:
    with StateStore.open(config.state_store.url) as store:
        return sum(store.get_applied_offsets(table).values())


def test_run_applies_tier_zero_continuously_and_stops_on_sigterm(
    spark: SparkSession, capture: Capture, local_stack: LocalStack, tmp_path: Path
) -> None:
    config_path = tmp_path / "cdc-lake.yaml"
    port = _free_port()
    config = write_and_load(
        config_path,
        {
            **config_dict(
                local_stack,
                [capture],
                str(tmp_path / "lake"),
                f"sqlite:///{tmp_path}/state.db",
                tables={capture.qualified_name: {"tier": 0, "partition_by": ["region"]}},
            ),
            "monitoring": {"metrics_port": port, "metrics_host": "127.0.0.1"},
        },
    )
    record_catching_up(config)
    table = capture.qualified_name
    workload = Workload(capture, seed=5)
    log = (tmp_path / "run.log").open("wb")
    service = subprocess.Popen(
        [sys.executable, "-m", "cdc_lake", "-v", "--config", str(config_path), "run"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        for round_ in range(3):
            workload.run(20)
            if round_ == 1:
                capture.execute(
                    f"alter table {workload.table} add column extra text",
                    f"insert into {workload.table} (id, region, extra) values (1000000, 'eu', 'x')",
                )
                workload.messages += 1
            wait_until(lambda: _applied(config, table) >= workload.messages, 240, f"{table} to catch up")
        with StateStore.open(config.state_store.url) as store:
            freshness = store.get_freshness(table)
            assert store.require_table(table).state is TableState.LIVE
        assert freshness is not None and freshness.newest_source_ts_ms is not None
        age = dt.datetime.now(dt.UTC).timestamp() - freshness.newest_source_ts_ms / 1000
        assert age < 120, f"newest applied change is {age:.0f}s old"

        # The service's own Prometheus endpoint: the applier's counters moved with the changes.
        scraped = _samples(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text, table)
        assert scraped["cdc_lake_applied_events_total"] == workload.messages - workload.tombstones
        assert scraped["cdc_lake_commits_total"] >= 3
        assert scraped.get("cdc_lake_failures_total", 0.0) == 0.0

        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=120) == 0
    finally:
        if service.poll() is None:
            service.kill()
        log.close()
    output = (tmp_path / "run.log").read_text()
    assert "stopped" in output and "Traceback" not in output

    lake = assert_lake_matches(spark, capture, config.lake.table_base_path(table))
    assert {row["extra"] for row in lake} >= {None, "x"}


def test_apply_once_with_nothing_new_starts_no_spark(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = SyntheticTopic(local_stack, f"idle_{uuid.uuid4().hex[:8]}")
    topic.send([(topic.key(1), topic.change("c", 1, "a"))])
    config_path, _ = synthetic_config(local_stack, tmp_path, [topic])
    first = CliRunner().invoke(cli, ["--config", str(config_path), "apply", "--once"])
    assert first.exit_code == 0, first.output

    def no_spark(*args: object) -> None:
        raise AssertionError("apply --once started Spark with nothing new")

    monkeypatch.setattr("cdc_lake.apply.commands.get_spark", no_spark)
    second = CliRunner().invoke(cli, ["--config", str(config_path), "apply", "--once"])

    assert second.exit_code == 0, second.output
    assert f"{topic.prefix}.s.t: up to date" in second.output
