"""Debezium's JMX metrics: the Connect workers' exporter agent and the shipped rules file.

The rules are applied the way jmx_prometheus_javaagent 1.0.1 applies them (:mod:`support.jmx_exporter`).
The stack test (tests/integration/test_ops_debezium_metrics.py) scrapes the real agent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.jmx_exporter import RULES, Exported
from support.jmx_exporter import export as _export

from cdc_lake import jvm
from cdc_lake.stack.kafka import KafkaBroker, KafkaConnect, SecureKafkaConnect
from cdc_lake.stack.process import ManagedProcess
from cdc_lake.stack.service import HOST, StackLayout

PG = [("type", "connector-metrics"), ("context", "streaming"), ("server", "pg")]
PG_LABELS = {"plugin": "postgres", "context": "streaming", "server": "pg"}
# A connector with several tasks orders its keys server, task, context.
MYSQL_TASK = [("type", "connector-metrics"), ("server", "my"), ("task", "0"), ("context", "snapshot")]
# Debezium 3.x appends custom.metric.tags (cdc-lake sets connector=<name>) after its own keys; a value
# with characters JMX reserves is quoted.
TIER0 = "cdc-lake.pg.tier0.shop.customers"
PG_TAGGED = [*PG, ("connector", TIER0)]
MYSQL_TASK_TAGGED = [*MYSQL_TASK, ("connector", '"cdc-lake.my:1"')]
MYSQL_TASK_LABELS = {"plugin": "mysql", "server": "my", "task": "0", "context": "snapshot"}
TASK = [("type", "connector-task-metrics"), ("connector", "cdc-lake.pg"), ("task", "0")]
CONNECTOR = [("type", "connector-metrics"), ("connector", "cdc-lake.pg")]
WORKER = [("type", "connect-worker-metrics"), ("connector", "cdc-lake.pg")]


@pytest.mark.parametrize(
    ("domain", "keys", "attribute", "value", "expected"),
    [
        ("debezium.postgres", PG, "MilliSecondsBehindSource", 1234,
         ("debezium_metrics_millisecondsbehindsource", PG_LABELS, 1234.0)),
        ("debezium.postgres", PG, "Connected", True, ("debezium_metrics_connected", PG_LABELS, 1.0)),
        ("debezium.postgres", PG, "QueueRemainingCapacity", 8000,
         ("debezium_metrics_queueremainingcapacity", PG_LABELS, 8000.0)),
        ("debezium.mysql", MYSQL_TASK, "SnapshotRunning", False,
         ("debezium_metrics_snapshotrunning", MYSQL_TASK_LABELS, 0.0)),
        ("debezium.mariadb", PG, "TotalNumberOfEventsSeen", 42,
         ("debezium_metrics_totalnumberofeventsseen", {**PG_LABELS, "plugin": "mariadb"}, 42.0)),
        ("kafka.connect", TASK, "status", "running",
         ("kafka_connect_task_status", {"connector": "cdc-lake.pg", "task": "0", "status": "running"}, 1.0)),
        ("kafka.connect", CONNECTOR, "status", "failed",
         ("kafka_connect_connector_status", {"connector": "cdc-lake.pg", "status": "failed"}, 1.0)),
        ("kafka.connect", WORKER, "connector-failed-task-count", 1.0,
         ("kafka_connect_worker_connector_task_count", {"connector": "cdc-lake.pg", "state": "failed"}, 1.0)),
        ("debezium.postgres", PG_TAGGED, "MilliSecondsBehindSource", 1234,
         ("debezium_metrics_millisecondsbehindsource", {**PG_LABELS, "connector": TIER0}, 1234.0)),
        ("debezium.mysql", MYSQL_TASK_TAGGED, "SnapshotRunning", True,
         ("debezium_metrics_snapshotrunning", {**MYSQL_TASK_LABELS, "connector": "cdc-lake.my:1"}, 1.0)),
        ("debezium.postgres", PG, "LastEvent", "an event's text", None),
        ("kafka.producer", [("type", "producer-metrics"), ("client-id", "p")], "record-send-rate", 1.0, None),
    ],
)  # fmt: skip
def test_the_rules_export_debezium_and_connect_status_in_snake_case(
    domain: str, keys: list[tuple[str, str]], attribute: str, value: object, expected: Exported | None
) -> None:
    assert _export(domain, keys, attribute, value) == expected


def _launched_argv(worker: type[KafkaConnect], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    jars = tmp_path / "jars"
    monkeypatch.setattr(jvm, "resolve", lambda artifact_set: [jars / artifact_set.name / "a.jar"])
    started: list[list[str]] = []
    monkeypatch.setattr(ManagedProcess, "start", lambda self, argv, **_: started.append(list(argv)))
    layout = StackLayout(tmp_path / "stack")
    worker(layout, KafkaBroker(layout)).start()
    return started[0]


@pytest.mark.parametrize(("worker", "port"), [(KafkaConnect, 18085), (SecureKafkaConnect, 18086)])
def test_each_connect_worker_runs_the_exporter_agent_on_its_own_loopback_port(
    worker: type[KafkaConnect], port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _launched_argv(worker, tmp_path, monkeypatch)

    agent = tmp_path / "jars" / jvm.JMX_EXPORTER_AGENT.name / "a.jar"
    assert f"-javaagent:{agent}={HOST}:{port}:{RULES}" in argv
    assert argv.index(f"-javaagent:{agent}={HOST}:{port}:{RULES}") < argv.index("-cp")
