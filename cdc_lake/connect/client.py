"""A typed client for the Kafka Connect REST API.

Transient failures are retried under cdc-lake's one HTTP retry policy (:mod:`cdc_lake.http_retry`: no
answer, HTTP 429 and 5xx), plus 409, which Connect answers while its worker group rebalances.
Every failure surfaces as a one-line :class:`ConnectError` naming the Connect URL and the connector;
messages never carry a secret config value (see :mod:`cdc_lake.redaction`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import quote

import requests

from cdc_lake.config import KafkaConnectSettings
from cdc_lake.exceptions import ConnectError
from cdc_lake.http_retry import RetryPolicy, Unavailable, send
from cdc_lake.redaction import redact, secret_values

RUNNING = "RUNNING"
FAILED = "FAILED"
MISSING = "MISSING"
"""The state cdc-lake reports for a connector it onboarded that Kafka Connect does not run."""
CONNECTOR_FAILED_RUNBOOK = "docs/runbooks/connector-failed.md"
"""The runbook of a FAILED connector or task (the CdcLakeConnectorFailed alert's)."""

_MISSING = object()  # what _call returns for a 404 the caller expects
_MESSAGE_CHARS = 500


@dataclass(frozen=True)
class TaskStatus:
    """State of one connector task as the worker reports it; ``trace`` is set when it FAILED."""

    id: int
    state: str
    worker_id: str
    trace: str | None = None


@dataclass(frozen=True)
class ConnectorStatus:
    """State of a connector and its tasks (``GET /connectors/{name}/status``)."""

    name: str
    state: str
    worker_id: str
    tasks: tuple[TaskStatus, ...]
    trace: str | None = None

    @property
    def running(self) -> bool:
        """Whether the connector and every one of its (at least one) tasks are RUNNING."""
        return self.state == RUNNING and bool(self.tasks) and all(t.state == RUNNING for t in self.tasks)

    def describe(self) -> str:
        """A short form of the states, such as ``connector=RUNNING tasks=[0:FAILED]``."""
        tasks = ",".join(f"{t.id}:{t.state}" for t in self.tasks)
        return f"connector={self.state} tasks=[{tasks}]"

    @property
    def failed_tasks(self) -> int:
        """How many of its tasks are FAILED (``cdc-lake lag``'s count behind CdcLakeConnectorFailed)."""
        return sum(1 for task in self.tasks if task.state == FAILED)

    def failure(self) -> str | None:
        """Why it stopped streaming, when the connector or a task is FAILED (what CdcLakeConnectorFailed
        fires on): ``FAILED: <cause>`` or ``task N FAILED: <cause>`` (the first failed task's), the cause
        being the trace's first line and its last ``Caused by:``; None when nothing FAILED."""
        if self.state == FAILED:
            return f"FAILED: {_trace_head(self.trace)}"
        for task in self.tasks:
            if task.state == FAILED:
                return f"task {task.id} FAILED: {_trace_head(task.trace)}"
        return None


class ConnectorStatuses(Protocol):
    """Where connector statuses come from (:class:`KafkaConnectClient`, or a test's fake)."""

    url: str

    def status(self, name: str) -> ConnectorStatus:
        """The state of connector ``name`` and its tasks."""
        ...


def connector_failure(connect: ConnectorStatuses, names: Iterable[str]) -> str | None:
    """The first of connectors ``names`` that FAILED (or whose task did), in one line naming it, the
    cause and the runbook; None while none has.  Every wait on Debezium checks this, so it stops as
    soon as what it waits for cannot arrive."""
    for name in names:
        failure = connect.status(name).failure()
        if failure is not None:
            return f"connector {name!r} at {connect.url}: {failure} ({CONNECTOR_FAILED_RUNBOOK})"
    return None


@dataclass(frozen=True)
class ConnectorPlugin:
    """One plugin installed on the worker (``GET /connector-plugins``)."""

    class_name: str
    type: str
    version: str


class KafkaConnectClient:
    """Kafka Connect REST API at ``url`` (for example ``http://127.0.0.1:8083``).

    ``timeout`` bounds each HTTP request; ``attempts`` and ``backoff`` (the first wait, in
    seconds, doubling up to ``max_backoff``) govern retries of transient failures.  ``auth`` is
    HTTP basic authentication (user, password); ``verify`` a CA bundle path for ``https://``.
    """

    def __init__(
        self,
        url: str,
        timeout: float = 10,
        attempts: int = 6,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        auth: tuple[str, str] | None = None,
        verify: str | bool = True,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._policy = RetryPolicy(attempts, backoff, max_backoff, also_transient=frozenset({409}))
        self._session = requests.Session()
        self._session.headers.update({"Accept": "application/json"})
        self._session.auth = auth
        self._session.verify = verify

    @classmethod
    def for_settings(cls, settings: KafkaConnectSettings, **kwargs: Any) -> KafkaConnectClient:
        """A client for the config's ``kafka_connect`` section (URL, basic auth, CA bundle)."""
        auth = None
        if settings.user is not None:
            password = settings.password.get_secret_value() if settings.password is not None else ""
            auth = (settings.user, password)
        return cls(settings.url, auth=auth, verify=settings.ca_cert or True, **kwargs)

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._session.close()

    def __enter__(self) -> KafkaConnectClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def list_connectors(self) -> list[str]:
        """Names of the connectors the worker group runs."""
        names = self._call("GET", "/connectors", None)
        return [str(n) for n in names]

    def list_configs(self) -> dict[str, dict[str, str]]:
        """Every connector's config by name, in one request (``GET /connectors?expand=info``)."""
        described = self._call("GET", "/connectors?expand=info", None)
        return {
            str(name): {str(k): str(v) for k, v in entry.get("info", {}).get("config", {}).items()}
            for name, entry in described.items()
        }

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """The source offsets Connect has committed for ``name``, one per source partition (Kafka 3.5+)."""
        return [offset for _, offset in self.offset_entries(name)]

    def offset_entries(self, name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The committed ``(source partition, offset)`` pairs of ``name`` (Kafka 3.5+)."""
        answer = self._call("GET", f"/connectors/{_seg(name)}/offsets", name)
        return [
            (dict(entry.get("partition") or {}), dict(entry.get("offset") or {}))
            for entry in answer.get("offsets", [])
        ]

    def alter_offsets(
        self, name: str, entries: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]
    ) -> None:
        """Replace the committed offsets of the given source partitions of a STOPPED connector
        (``PATCH .../offsets``, Kafka 3.6+)."""
        body = {"offsets": [{"partition": dict(p), "offset": dict(o)} for p, o in entries]}
        self._call("PATCH", f"/connectors/{_seg(name)}/offsets", name, body=body)

    def get_config(self, name: str) -> dict[str, str]:
        """The stored (untransformed) config of connector ``name``."""
        config = self._call("GET", f"/connectors/{_seg(name)}/config", name)
        return {str(k): str(v) for k, v in config.items()}

    def status(self, name: str) -> ConnectorStatus:
        """Connector and task states of ``name``, with traces for failed parts."""
        return _parse_status(name, self._call("GET", f"/connectors/{_seg(name)}/status", name))

    def create_or_update(self, name: str, config: Mapping[str, str]) -> bool:
        """Create connector ``name`` or replace its config; False when it already has exactly ``config``.

        Uses ``PUT /connectors/{name}/config``, which is idempotent.  Connect stores the
        connector's name in its config, so ``name`` is compared and sent too.
        """
        desired = {str(k): str(v) for k, v in config.items()}
        if desired.setdefault("name", name) != name:
            raise ConnectError(f"connector {name!r} at {self.url}: its config names another connector")
        current = self._call("GET", f"/connectors/{_seg(name)}/config", name, missing_ok=True)
        if current is not _MISSING and {str(k): str(v) for k, v in current.items()} == desired:
            return False
        self._call("PUT", f"/connectors/{_seg(name)}/config", name, body=desired)
        return True

    def delete(self, name: str) -> bool:
        """Delete connector ``name``; False when there was no such connector."""
        return self._call("DELETE", f"/connectors/{_seg(name)}", name, missing_ok=True) is not _MISSING

    def pause(self, name: str) -> None:
        """Pause the connector and its tasks (``PUT .../pause``)."""
        self._call("PUT", f"/connectors/{_seg(name)}/pause", name)

    def resume(self, name: str) -> None:
        """Resume a paused or stopped connector (``PUT .../resume``)."""
        self._call("PUT", f"/connectors/{_seg(name)}/resume", name)

    def stop(self, name: str) -> None:
        """Stop the connector and shut its tasks down, keeping its config and offsets (``PUT .../stop``)."""
        self._call("PUT", f"/connectors/{_seg(name)}/stop", name)

    def create_stopped(self, name: str, config: Mapping[str, str]) -> None:
        """Create connector ``name`` STOPPED (``initial_state``, Kafka 3.7+): no task runs yet."""
        body = {
            "name": name,
            "config": {str(k): str(v) for k, v in config.items()},
            "initial_state": "STOPPED",
        }
        self._call("POST", "/connectors", name, body=body)

    def reset_offsets(self, name: str) -> None:
        """Forget the source offsets of a STOPPED connector (``DELETE .../offsets``, Kafka 3.6+).

        Connect keeps a connector's offsets after it is deleted; a connector re-created under the same
        name would resume from them, e.g. from a position in a replication slot that no longer exists.
        """
        self._call("DELETE", f"/connectors/{_seg(name)}/offsets", name)

    def restart(self, name: str, include_tasks: bool = True, only_failed: bool = True) -> None:
        """Restart the connector (with tasks if ``include_tasks``; only failed ones if ``only_failed``)."""
        query = f"?includeTasks={str(include_tasks).lower()}&onlyFailed={str(only_failed).lower()}"
        self._call("POST", f"/connectors/{_seg(name)}/restart{query}", name)

    def plugins(self) -> list[ConnectorPlugin]:
        """Connector plugins installed on the worker."""
        found = self._call("GET", "/connector-plugins", None)
        return [
            ConnectorPlugin(
                class_name=str(p["class"]), type=str(p.get("type", "")), version=str(p.get("version", ""))
            )
            for p in found
        ]

    def wait_running(self, name: str, timeout: float, poll_interval: float = 1.0) -> ConnectorStatus:
        """Poll until connector ``name`` and all its tasks are RUNNING, and return that status.

        Raises :class:`ConnectError` with the first lines of the trace as soon as the
        connector or a task is FAILED, or naming the last states seen after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        last: ConnectorStatus | None = None
        while True:
            payload = self._call("GET", f"/connectors/{_seg(name)}/status", name, missing_ok=True)
            if payload is not _MISSING:
                last = _parse_status(name, payload)
                if last.running:
                    return last
                self._raise_if_failed(last)
            if time.monotonic() >= deadline:
                seen = last.describe() if last is not None else "no status reported yet"
                raise ConnectError(f"connector {name!r} at {self.url} not RUNNING after {timeout:g}s: {seen}")
            time.sleep(poll_interval)

    def _raise_if_failed(self, status: ConnectorStatus) -> None:
        failure = status.failure()
        if failure is not None:
            raise ConnectError(f"connector {status.name!r} at {self.url}: {failure}")

    def _call(
        self,
        method: str,
        path: str,
        name: str | None,
        body: Mapping[str, Any] | None = None,
        missing_ok: bool = False,
    ) -> Any:
        """The decoded JSON answer; ``_MISSING`` instead of an error for a 404 when ``missing_ok``."""
        where = f"connector {name!r} at {self.url}" if name else f"Kafka Connect at {self.url}"

        def message(response: requests.Response) -> str:
            # Scrub before the message is cut, so no partial secret survives truncation.
            return _one_line(redact(_error_text(response), secret_values([body] if body else [])))

        def describe(response: requests.Response) -> str:
            return f"HTTP {response.status_code}: {message(response)}"

        try:
            response = send(
                self._session,
                method,
                self.url + path,
                self._policy,
                self.timeout,
                json=body,
                describe=describe,
            )
        except Unavailable as exc:
            raise ConnectError(
                f"{where}: {method} {path} failed after {exc.attempts} attempts: {exc}"
            ) from exc
        except requests.RequestException as exc:
            raise ConnectError(f"{where}: {method} {path} failed: {type(exc).__name__}") from exc
        if response.status_code < 300:
            try:
                return response.json() if response.content else None
            except ValueError as exc:
                status = response.status_code
                raise ConnectError(
                    f"{where}: {method} {path} rejected: HTTP {status} with a body not JSON"
                ) from exc
        if response.status_code == 404:
            if missing_ok:
                return _MISSING
            raise ConnectError(f"{where}: not found ({message(response)})")
        raise ConnectError(f"{where}: {method} {path} rejected: {describe(response)}")


def _seg(name: str) -> str:
    return quote(name, safe="")


def _error_text(response: requests.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text or response.reason or ""
    return str(payload.get("message", payload)) if isinstance(payload, dict) else str(payload)


def _one_line(text: str) -> str:
    flat = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= _MESSAGE_CHARS else flat[: _MESSAGE_CHARS - 3] + "..."


def _trace_head(trace: str | None) -> str:
    """A Java trace's first line and its last ``Caused by:`` (usually the actionable part), no frames."""
    if not trace:
        return "no trace reported"
    lines = [line.strip() for line in trace.splitlines() if line.strip()]
    causes = [line for line in lines[1:] if line.startswith("Caused by:")]
    return _one_line("\n".join(lines[:1] + causes[-1:]))


def _parse_status(name: str, payload: Mapping[str, Any]) -> ConnectorStatus:
    connector = payload.get("connector", {})
    tasks = tuple(
        TaskStatus(
            id=int(t["id"]),
            state=str(t.get("state", "")),
            worker_id=str(t.get("worker_id", "")),
            trace=t.get("trace"),
        )
        for t in sorted(payload.get("tasks", []), key=lambda t: int(t["id"]))
    )
    return ConnectorStatus(
        name=str(payload.get("name", name)),
        state=str(connector.get("state", "")),
        worker_id=str(connector.get("worker_id", "")),
        tasks=tasks,
        trace=connector.get("trace"),
    )
