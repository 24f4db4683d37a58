"""The ``/metrics`` endpoints of ``cdc-lake run`` and of the standalone ``cdc-lake metrics``, over HTTP.

A tier-0 table fed by a topic the test writes (Debezium-shaped Avro change events) is applied by
``cdc-lake run`` as a process: its applied-event and commit counters follow each batch of changes;
a message that is not Avro stops the table, which moves the failure counter and the
``cdc_lake_table_failed`` gauge on the same endpoint.  ``cdc-lake metrics --port`` (for schedulers)
serves the same gauges and the bootstrap rows without the applier's counters, and stops on Ctrl-C.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from support.apply import SyntheticTopic, config_dict, record_catching_up
from support.common import wait_until, write_and_load

from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _scrape(port: int, table: str) -> dict[str, float]:
    """The samples labelled with ``table`` (by sample name) served at ``port``; {} while not serving."""
    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    except requests.ConnectionError:
        return {}
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("table") == table and "state" not in sample.labels
    }


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


def _start(config: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cdc_lake", "--config", str(config), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_run_and_metrics_serve_counters_and_gauges(
    local_stack: LocalStack, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    topic = SyntheticTopic(local_stack, f"runm_{uuid.uuid4().hex[:8]}")
    table = f"{topic.prefix}.{topic.schema}.{topic.table}"
    run_port, metrics_port = _free_port(), _free_port()
    state = f"sqlite:///{tmp_path}/state.db"
    data = config_dict(local_stack, [], str(tmp_path / "lake"), state, synthetic=[topic])
    data["sources"][topic.prefix]["tables"][0]["tier"] = 0
    data["monitoring"] = {"metrics_port": run_port, "metrics_host": "127.0.0.1", "refresh_seconds": 1}
    config_path = tmp_path / "cdc-lake.yaml"
    record_catching_up(write_and_load(config_path, data))

    topic.send([(topic.key(k), topic.change("c", k, f"n{k}")) for k in range(1, 6)])
    service = _start(config_path, tmp_path / "run.log", "run")
    processes.append(service)

    def counters(events: float) -> bool:
        found = _scrape(run_port, table)
        return found.get("cdc_lake_applied_events_total") == events

    wait_until(lambda: counters(5), 300, "5 applied events on run's /metrics")
    first = _scrape(run_port, table)
    assert first["cdc_lake_commits_total"] >= 1 and first.get("cdc_lake_failures_total", 0.0) == 0.0

    # An update, a delete (and its tombstone, not a change event) and an insert: 3 more events.
    topic.send([
        (topic.key(1), topic.change("u", 1, "changed")),
        (topic.key(2), topic.change("d", 2)),
        (topic.key(2), None),
        (topic.key(6), topic.change("c", 6, "n6")),
    ])
    wait_until(lambda: counters(8), 300, "8 applied events on run's /metrics")
    second = _scrape(run_port, table)
    assert second["cdc_lake_commits_total"] > first["cdc_lake_commits_total"]
    assert second.get("cdc_lake_failures_total", 0.0) == 0.0 and second["cdc_lake_table_failed"] == 0.0

    # Not Avro in the Confluent framing: the applier stops the table; counter and gauge both show it.
    topic.send([(b"not-a-key", b"not-an-avro-message")])

    def failed() -> bool:
        found = _scrape(run_port, table)
        return found.get("cdc_lake_failures_total") == 1.0 and found.get("cdc_lake_table_failed") == 1.0

    wait_until(failed, 300, "the failure on run's /metrics")
    assert _scrape(run_port, table)["cdc_lake_applied_events_total"] == 8

    standalone = _start(config_path, tmp_path / "metrics.log", "metrics", "--port", str(metrics_port))
    processes.append(standalone)
    wait_until(lambda: bool(_scrape(metrics_port, table)), 120, "cdc-lake metrics serving")
    served = _scrape(metrics_port, table)
    assert served["cdc_lake_table_failed"] == 1.0
    assert "cdc_lake_table_bootstrap_rows_written" in served
    assert not {"cdc_lake_applied_events_total", "cdc_lake_failures_total"} & set(served), served
    standalone.send_signal(signal.SIGINT)
    assert standalone.wait(timeout=60) == 0
    assert "stopped" in (tmp_path / "metrics.log").read_text()

    service.send_signal(signal.SIGTERM)
    service.wait(timeout=120)
    assert "Traceback" not in (tmp_path / "run.log").read_text()
