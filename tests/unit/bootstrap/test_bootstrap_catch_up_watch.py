"""The catch-up waits (bootstrap --apply, validate) stop at once when the catch-up cannot happen any more."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from cdc_lake.connect.client import ConnectorStatus, TaskStatus
from cdc_lake.exceptions import BootstrapError, ConnectError
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import TableInfo
from cdc_lake_bootstrap import validate
from cdc_lake_bootstrap.watch import CatchUpWatch

TRACE = (
    "org.apache.kafka.connect.errors.ConnectException: An exception occurred in the change event producer.\n"
    "\tat io.debezium.pipeline.ErrorHandler.setProducerThrowable(ErrorHandler.java:67)\n"
    "Caused by: org.apache.kafka.connect.errors.DataException: Failed to properly convert data value for "
    "'s.t.nfree' of type numeric"
)


class FakeConnect:
    """Kafka Connect with one connector capturing s.t, its status scripted; ``down``: unreachable."""

    url = "http://connect"

    def __init__(self, task_state: str = "RUNNING", down: bool = False) -> None:
        self.task_state = task_state
        self.down = down

    def list_configs(self) -> dict[str, dict[str, str]]:
        if self.down:
            raise ConnectError("Kafka Connect at http://connect: GET /connectors failed after 6 attempts")
        return {"a": {"topic.prefix": "shop", "table.include.list": r"s\.t"}}

    def offsets(self, name: str) -> list[dict[str, Any]]:
        return []

    def status(self, name: str) -> ConnectorStatus:
        trace = TRACE if self.task_state == "FAILED" else None
        return ConnectorStatus(name, "RUNNING", "w", (TaskStatus(0, self.task_state, "w", trace),))


class FakeStore:
    """The state store's table row and applied offsets (which never move: nobody applies)."""

    def __init__(self, state: TableState = TableState.CATCHING_UP, error: str | None = None) -> None:
        self.info = TableInfo("src.s.t", "src", 1, state, "/lake/t", error, dt.datetime.now(dt.UTC))

    def require_table(self, name: str) -> TableInfo:
        return self.info

    def get_applied_offsets(self, table: str) -> dict[int, int]:
        return {0: 5}


def _watch(store: FakeStore, connect: FakeConnect) -> CatchUpWatch:
    return CatchUpWatch("src.s.t", store, connect, "shop", "s.t")


def test_nothing_wrong_while_the_connector_runs_or_connect_is_unreachable() -> None:
    assert _watch(FakeStore(), FakeConnect()).failure() is None
    assert _watch(FakeStore(), FakeConnect(down=True)).failure() is None


def test_a_failed_connector_task_or_a_failed_table_is_named_with_its_runbook() -> None:
    failed_task = _watch(FakeStore(), FakeConnect("FAILED")).failure()
    failed_table = _watch(FakeStore(TableState.FAILED, "bad message at offset 7"), FakeConnect()).failure()

    assert failed_task is not None and "task 0 FAILED" in failed_task
    assert "Failed to properly convert data value for 's.t.nfree'" in failed_task
    assert "docs/runbooks/connector-failed.md" in failed_task
    assert failed_table == (
        "the applier stopped the table (FAILED): bad message at offset 7 (docs/runbooks/table-failed.md)"
    )


def test_validate_stops_waiting_for_the_lake_when_the_connector_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(validate.time, "sleep", sleeps.append)
    watch = _watch(FakeStore(), FakeConnect("FAILED"))

    with pytest.raises(BootstrapError) as raised:
        validate.wait_lake_caught_up({0: 9}, watch, 300, {})

    assert sleeps == []
    message = str(raised.value)
    assert message.startswith("table src.s.t: the lake cannot catch up: connector 'a' at http://connect: ")
    assert "docs/runbooks/connector-failed.md" in message


def test_validate_waits_while_nothing_failed_and_gives_up_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    monkeypatch.setattr(validate.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(validate.time, "sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))

    assert validate.wait_lake_caught_up({0: 5}, _watch(FakeStore(), FakeConnect()), 300, {})
    assert not validate.wait_lake_caught_up({0: 9}, _watch(FakeStore(), FakeConnect()), 300, {})
    assert 300 <= now[0] <= 302


def test_validate_takes_the_lakes_latest_commit_as_caught_up_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table handed off at its watermark (Kafka's end then) with nothing streamed since has a bootstrap
    commit at those offsets and no applied offsets: before, validate waited out its timeout for it
    (tests/integration/test_repair.py: 300 s, then `caught_up` false)."""
    now = [0.0]
    monkeypatch.setattr(validate.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(validate.time, "sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))
    assert validate.wait_lake_caught_up({0: 9, 1: 3}, _watch(FakeStore(), FakeConnect()), 300, {0: 9, 1: 3})
    assert now[0] == 0
    assert not validate.wait_lake_caught_up({0: 9}, _watch(FakeStore(), FakeConnect()), 300, {0: 8})
