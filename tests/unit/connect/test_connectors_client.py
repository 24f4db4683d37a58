"""KafkaConnectClient against a small in-process fake of the Kafka Connect REST API."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from support.http_server import send_json, serving

from cdc_lake.connect.client import ConnectorStatus, KafkaConnectClient, TaskStatus, connector_failure
from cdc_lake.connect.restart import forget_transaction_progress, restart_at_transaction_start
from cdc_lake.exceptions import ConnectError
from cdc_lake.redaction import MASK

TRACE = "\n".join(
    [
        "org.apache.kafka.connect.errors.ConnectException: the change event producer failed.",
        "\tat io.debezium.pipeline.ErrorHandler.setProducerThrowable(ErrorHandler.java:67)",
        "\tat io.debezium.connector.postgresql.PostgresStreamingChangeEventSource.execute(Source.java:200)",
        "\tat java.base/java.lang.Thread.run(Thread.java:840)",
        'Caused by: org.postgresql.util.PSQLException: ERROR: replication slot "cdc_pg1" does not exist',
        "\tat org.postgresql.core.v3.QueryExecutorImpl.receiveErrorResponse(QueryExecutorImpl.java:2733)",
    ]
)


def _status(state: str, *task_states: str, trace: str | None = None) -> dict[str, Any]:
    tasks = []
    for i, task_state in enumerate(task_states):
        task: dict[str, Any] = {"id": i, "state": task_state, "worker_id": "w1:8083"}
        if task_state == "FAILED" and trace:
            task["trace"] = trace
        tasks.append(task)
    return {
        "name": "pg1",
        "connector": {"state": state, "worker_id": "w1:8083"},
        "tasks": tasks,
        "type": "source",
    }


@dataclass
class FakeConnect:
    """State and scripted answers of the fake worker; ``requests`` logs (method, path, body)."""

    url: str = ""
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    offsets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    injected: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)

    def inject(self, method: str, path: str, *answers: tuple[int, str]) -> None:
        """Answer the next requests to (method, path) with these (status, message) pairs."""
        self.injected.setdefault((method, path), []).extend(answers)

    def calls(self, method: str, path: str) -> int:
        """How many requests reached (method, path)."""
        return sum(1 for m, p, _ in self.requests if (m, p) == (method, path))

    def answer(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        parts = urlsplit(target)
        path = parts.path
        self.requests.append((method, target, body))
        scripted = self.injected.get((method, path))
        if scripted:
            code, message = scripted.pop(0)
            return code, {"error_code": code, "message": message}
        segments = [unquote(s) for s in path.strip("/").split("/")]
        if segments == ["connectors"]:
            return 200, sorted(self.configs)
        if segments == ["connector-plugins"]:
            return 200, [
                {
                    "class": "io.debezium.connector.postgresql.PostgresConnector",
                    "type": "source",
                    "version": "3.5.0",
                }
            ]
        name = segments[1]
        if method == "PUT" and segments[2:] == ["config"]:
            created = name not in self.configs
            self.configs[name] = body
            return (201 if created else 200), {"name": name, "config": body, "tasks": [], "type": "source"}
        if name not in self.configs:
            return 404, {"error_code": 404, "message": f"Connector {name} not found"}
        if method == "GET" and segments[2:] == ["config"]:
            return 200, self.configs[name]
        if method == "GET" and segments[2:] == ["status"]:
            queue = self.statuses[name]
            return 200, queue.pop(0) if len(queue) > 1 else queue[0]
        if method == "DELETE" and len(segments) == 2:
            del self.configs[name]
            return 204, None
        if segments[2:] in (["pause"], ["resume"]) or (method == "POST" and segments[2:] == ["restart"]):
            return 202, None
        if segments[2:] == ["stop"]:
            return 204, None
        if method == "GET" and segments[2:] == ["offsets"]:
            return 200, {"offsets": self.offsets.get(name, [])}
        if method == "PATCH" and segments[2:] == ["offsets"]:
            for entry in body["offsets"]:
                kept = [e for e in self.offsets.get(name, []) if e["partition"] != entry["partition"]]
                self.offsets[name] = [*kept, entry]
            return 200, {"message": "The offsets for this connector have been altered successfully"}
        return 405, {"error_code": 405, "message": "unexpected request"}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeConnect

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        code, payload = self.fake.answer(self.command, self.path, body)
        send_json(self, code, payload, "application/json")

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _serve

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def fake() -> Iterator[FakeConnect]:
    state = FakeConnect()
    with serving(type("Handler", (_Handler,), {"fake": state})) as url:
        state.url = url
        yield state


@pytest.fixture
def client(fake: FakeConnect) -> Iterator[KafkaConnectClient]:
    with KafkaConnectClient(fake.url, timeout=5, attempts=4, backoff=0.01, max_backoff=0.02) as c:
        yield c


CONFIG = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "pg1"}


def test_create_or_update_is_idempotent(fake: FakeConnect, client: KafkaConnectClient) -> None:
    assert client.create_or_update("pg1", CONFIG) is True
    assert fake.configs["pg1"] == {**CONFIG, "name": "pg1"}

    assert client.create_or_update("pg1", CONFIG) is False
    assert fake.calls("PUT", "/connectors/pg1/config") == 1

    assert client.create_or_update("pg1", {**CONFIG, "topic.prefix": "pg2"}) is True
    assert fake.calls("PUT", "/connectors/pg1/config") == 2
    assert client.get_config("pg1")["topic.prefix"] == "pg2"


def test_connector_names_are_quoted_in_paths(fake: FakeConnect, client: KafkaConnectClient) -> None:
    assert client.create_or_update("pg 1", CONFIG) is True

    assert fake.calls("PUT", "/connectors/pg%201/config") == 1
    assert client.list_connectors() == ["pg 1"]


def test_config_naming_another_connector_is_refused(client: KafkaConnectClient) -> None:
    with pytest.raises(ConnectError, match="names another connector"):
        client.create_or_update("pg1", {**CONFIG, "name": "pg2"})


def test_retries_rebalance_and_server_errors_then_succeeds(
    fake: FakeConnect, client: KafkaConnectClient
) -> None:
    fake.inject("PUT", "/connectors/pg1/config", (409, "rebalance in progress"), (503, "unavailable"))

    assert client.create_or_update("pg1", CONFIG) is True

    assert fake.calls("PUT", "/connectors/pg1/config") == 3
    assert fake.configs["pg1"]["topic.prefix"] == "pg1"


def test_gives_up_after_the_last_attempt(fake: FakeConnect, client: KafkaConnectClient) -> None:
    fake.inject("GET", "/connectors", *[(503, "worker is\nstarting")] * 4)

    with pytest.raises(ConnectError) as err:
        client.list_connectors()

    message = str(err.value)
    assert fake.url in message
    assert "HTTP 503" in message
    assert "worker is | starting" in message
    assert fake.calls("GET", "/connectors") == 4


def test_unreachable_worker_is_a_connect_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    client = KafkaConnectClient(url, timeout=1, attempts=2, backoff=0.01)

    with pytest.raises(ConnectError, match="ConnectionError") as err:
        client.status("pg1")

    assert url in str(err.value)
    assert "'pg1'" in str(err.value)


def test_rejection_names_connector_and_masks_secret_values(
    fake: FakeConnect, client: KafkaConnectClient
) -> None:
    fake.inject(
        "PUT",
        "/connectors/pg1/config",
        (400, "Connector configuration is invalid:\nbad value hunter2 for database.password"),
    )

    with pytest.raises(ConnectError) as err:
        client.create_or_update("pg1", {**CONFIG, "database.password": "hunter2"})

    message = str(err.value)
    assert "hunter2" not in message
    assert MASK in message
    assert "'pg1'" in message and fake.url in message
    assert "HTTP 400" in message
    assert "\n" not in message
    assert fake.calls("PUT", "/connectors/pg1/config") == 1


def test_secret_is_masked_before_a_long_message_is_cut(fake: FakeConnect, client: KafkaConnectClient) -> None:
    secret = "correct-horse-battery-staple"
    fake.inject("PUT", "/connectors/pg1/config", (400, "x" * 480 + secret))

    with pytest.raises(ConnectError) as err:
        client.create_or_update("pg1", {**CONFIG, "database.password": secret})

    assert "correct-" not in str(err.value)


def test_missing_connector(fake: FakeConnect, client: KafkaConnectClient) -> None:
    with pytest.raises(ConnectError, match="not found") as err:
        client.get_config("nope")
    assert "'nope'" in str(err.value) and fake.url in str(err.value)

    assert client.delete("nope") is False


def test_lifecycle_calls_hit_the_rest_paths(fake: FakeConnect, client: KafkaConnectClient) -> None:
    client.create_or_update("pg1", CONFIG)

    client.pause("pg1")
    client.resume("pg1")
    client.stop("pg1")
    client.restart("pg1")
    client.restart("pg1", include_tasks=False, only_failed=False)
    assert client.delete("pg1") is True

    sent = [(m, p) for m, p, _ in fake.requests if m != "GET"]
    assert sent[1:] == [
        ("PUT", "/connectors/pg1/pause"),
        ("PUT", "/connectors/pg1/resume"),
        ("PUT", "/connectors/pg1/stop"),
        ("POST", "/connectors/pg1/restart?includeTasks=true&onlyFailed=true"),
        ("POST", "/connectors/pg1/restart?includeTasks=false&onlyFailed=false"),
        ("DELETE", "/connectors/pg1"),
    ]
    assert "pg1" not in fake.configs


def test_plugins(client: KafkaConnectClient) -> None:
    plugins = client.plugins()

    assert [(p.class_name, p.type, p.version) for p in plugins] == [
        ("io.debezium.connector.postgresql.PostgresConnector", "source", "3.5.0")
    ]


def test_status_parses_connector_and_tasks(fake: FakeConnect, client: KafkaConnectClient) -> None:
    fake.configs["pg1"] = CONFIG
    fake.statuses["pg1"] = [_status("RUNNING", "RUNNING", "FAILED", trace=TRACE)]

    status = client.status("pg1")

    assert status.state == "RUNNING"
    assert [(t.id, t.state) for t in status.tasks] == [(0, "RUNNING"), (1, "FAILED")]
    assert status.tasks[1].trace == TRACE
    assert not status.running
    assert status.describe() == "connector=RUNNING tasks=[0:RUNNING,1:FAILED]"


def test_wait_running_polls_until_every_task_runs(fake: FakeConnect, client: KafkaConnectClient) -> None:
    fake.configs["pg1"] = CONFIG
    fake.statuses["pg1"] = [
        _status("UNASSIGNED"),
        _status("RUNNING"),
        _status("RUNNING", "UNASSIGNED"),
        _status("RUNNING", "RUNNING"),
    ]

    status = client.wait_running("pg1", timeout=10, poll_interval=0.01)

    assert isinstance(status, ConnectorStatus)
    assert status.running
    assert fake.calls("GET", "/connectors/pg1/status") == 4


def test_wait_running_tolerates_a_connector_not_yet_known(
    fake: FakeConnect, client: KafkaConnectClient
) -> None:
    fake.inject("GET", "/connectors/pg1/status", (404, "Connector pg1 not found"))
    fake.configs["pg1"] = CONFIG
    fake.statuses["pg1"] = [_status("RUNNING", "RUNNING")]

    assert client.wait_running("pg1", timeout=10, poll_interval=0.01).running


def test_wait_running_surfaces_the_failed_task_trace(fake: FakeConnect, client: KafkaConnectClient) -> None:
    fake.configs["pg1"] = CONFIG
    fake.statuses["pg1"] = [_status("RUNNING", "FAILED", trace=TRACE)]

    with pytest.raises(ConnectError) as err:
        client.wait_running("pg1", timeout=10, poll_interval=0.01)

    message = str(err.value)
    assert "task 0 FAILED" in message
    assert "ConnectException: the change event producer failed." in message
    assert 'replication slot "cdc_pg1" does not exist' in message
    assert "Thread.run" not in message
    assert "\n" not in message
    assert "'pg1'" in message and fake.url in message


def test_wait_running_surfaces_a_failed_connector(fake: FakeConnect, client: KafkaConnectClient) -> None:
    fake.configs["pg1"] = CONFIG
    failed = _status("FAILED")
    failed["connector"]["trace"] = "java.lang.IllegalStateException: no publication\n\tat x.y(Z.java:1)"
    fake.statuses["pg1"] = [failed]

    with pytest.raises(ConnectError, match=r"FAILED: java\.lang\.IllegalStateException: no publication"):
        client.wait_running("pg1", timeout=10, poll_interval=0.01)


def test_wait_running_times_out_with_the_last_states(fake: FakeConnect, client: KafkaConnectClient) -> None:
    fake.configs["pg1"] = CONFIG
    fake.statuses["pg1"] = [_status("RUNNING", "UNASSIGNED")]

    with pytest.raises(ConnectError) as err:
        client.wait_running("pg1", timeout=0.2, poll_interval=0.02)

    message = str(err.value)
    assert "'pg1'" in message and fake.url in message
    assert "not RUNNING after 0.2s" in message
    assert "connector=RUNNING tasks=[0:UNASSIGNED]" in message


def test_wait_running_times_out_when_no_status_ever_appears(
    fake: FakeConnect, client: KafkaConnectClient
) -> None:
    with pytest.raises(ConnectError, match="no status reported yet"):
        client.wait_running("ghost", timeout=0.1, poll_interval=0.02)


def test_connector_failure_names_the_failed_task_its_cause_and_the_runbook(
    fake: FakeConnect, client: KafkaConnectClient
) -> None:
    fake.configs["ok"] = fake.configs["pg1"] = CONFIG
    fake.statuses["ok"] = [_status("RUNNING", "RUNNING")]
    fake.statuses["pg1"] = [_status("RUNNING", "RUNNING", "FAILED", trace=TRACE)]

    assert connector_failure(client, ["ok"]) is None
    message = connector_failure(client, ["ok", "pg1"])

    assert message == (
        f"connector 'pg1' at {fake.url}: task 1 FAILED: org.apache.kafka.connect.errors.ConnectException: "
        "the change event producer failed. | Caused by: org.postgresql.util.PSQLException: ERROR: "
        'replication slot "cdc_pg1" does not exist (docs/runbooks/connector-failed.md)'
    )


def test_a_failed_status_is_what_lag_counts() -> None:
    tasks = (TaskStatus(0, "FAILED", "w", TRACE), TaskStatus(1, "RUNNING", "w"))
    status = ConnectorStatus("pg1", "RUNNING", "w", tasks)

    assert status.failed_tasks == 1
    assert status.failure() is not None
    assert ConnectorStatus("pg1", "FAILED", "w", ()).failure() == "FAILED: no trace reported"
    assert ConnectorStatus("pg1", "PAUSED", "w", (TaskStatus(0, "PAUSED", "w"),)).failure() is None


def test_a_restart_forgets_what_the_connector_counted_of_its_transaction(
    fake: FakeConnect, client: KafkaConnectClient
) -> None:
    """Debezium's MariaDB reader can over-count the events of the transaction it stops in (a standalone
    DDL's GTID and the server's heartbeats after it) and a restart would skip whole later transactions:
    the restart drops the counts, so the task starts again at the transaction's start."""
    fake.configs["maria"] = dict(CONFIG)
    fake.statuses["maria"] = [_status("STOPPED")]
    partition = {"server": "maria"}
    fake.offsets["maria"] = [
        {"partition": partition, "offset": {"file": "bin.000002", "pos": 7067633, "event": 14, "row": 1}}
    ]

    assert restart_at_transaction_start(client, "maria", ("event", "row"), timeout=5) is True

    restart_here = {"file": "bin.000002", "pos": 7067633}
    assert fake.offsets["maria"] == [{"partition": partition, "offset": restart_here}]
    assert [(m, t) for m, t, _ in fake.requests if m != "GET"] == [
        ("PUT", "/connectors/maria/stop"),
        ("PATCH", "/connectors/maria/offsets"),
        ("PUT", "/connectors/maria/resume"),
    ]
    assert forget_transaction_progress(client, "maria", ("event", "row")) is False
    assert forget_transaction_progress(client, "maria", ()) is False
