"""The hand-off's position comparisons and waits, with Kafka Connect's answers faked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from support.schedule import tier_target

from cdc_lake.config import KafkaSettings
from cdc_lake.connect.client import ConnectorStatus, TaskStatus
from cdc_lake.exceptions import BootstrapError, ConnectError, SourceEngineError
from cdc_lake.kafka.offsets import TopicState
from cdc_lake.sources.mysql.positions import MariaDbGtidPosition, MySqlGtidSet
from cdc_lake.sources.postgres.positions import Lsn
from cdc_lake.state.records import Watermark
from cdc_lake_bootstrap import handoff
from cdc_lake_bootstrap.handoff import HandoffWait, SnapshotPoint, wait_until_streamed

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_postgres_offsets_compare_commit_lsns() -> None:
    assert Lsn.offset_covers({"lsn_commit": 0x200, "lsn": 0x100}, "0/200")
    assert not Lsn.offset_covers({"lsn_commit": 0x1FF, "lsn": 0x300}, "0/200")
    assert Lsn.offset_covers({"lsn": 0x300}, "0/200")
    assert not Lsn.offset_covers({}, "0/200")


def test_mariadb_gtids_compare_per_domain_as_numbers() -> None:
    assert MariaDbGtidPosition.offset_covers({"gtids": "0-1-1000"}, "0-1-999")
    assert MariaDbGtidPosition.offset_covers({"gtids": "0-1-345,1-2-10"}, "0-1-345")
    assert not MariaDbGtidPosition.offset_covers({"gtids": "0-1-99"}, "0-1-100")
    assert not MariaDbGtidPosition.offset_covers({"gtids": "0-1-500"}, "0-1-400,1-3-1")
    assert not MariaDbGtidPosition.offset_covers({}, "0-1-1")


def test_mysql_gtid_sets_compare_by_containment() -> None:
    assert MySqlGtidSet.offset_covers({"gtids": f"{UUID}:1-100"}, f"{UUID}:1-57")
    assert not MySqlGtidSet.offset_covers({"gtids": f"{UUID}:1-50"}, f"{UUID}:1-57")
    assert not MySqlGtidSet.offset_covers({"gtids": f"{UUID}:1-100"}, f"{UUID}:1-57,aaaa:1")


class FakeConnect:
    """Kafka Connect's answers, scripted: ``configs`` by connector, offsets answered in turn.

    ``down`` answers that many calls with the client's error for an unreachable worker.
    """

    url = "http://connect"

    def __init__(
        self,
        configs: dict[str, dict[str, str]],
        offsets: dict[str, list[list[dict[str, Any]]]] | None = None,
        down: int = 0,
    ) -> None:
        self.configs = configs
        self.answers = offsets or {}
        self.down = down
        self.polls: list[str] = []
        self.statuses: dict[str, ConnectorStatus] = {}

    def list_configs(self) -> dict[str, dict[str, str]]:
        if self.down > 0:
            self.down -= 1
            raise ConnectError("Kafka Connect at http://connect: GET /connectors failed after 6 attempts")
        return self.configs

    def status(self, name: str) -> ConnectorStatus:
        running = ConnectorStatus(name, "RUNNING", "w", (TaskStatus(0, "RUNNING", "w"),))
        return self.statuses.get(name, running)

    def offsets(self, name: str) -> list[dict[str, Any]]:
        self.polls.append(name)
        answers = self.answers[name]
        return answers.pop(0) if len(answers) > 1 else answers[0]


def _captures(*names: str) -> dict[str, dict[str, str]]:
    return {name: {"topic.prefix": "shop", "table.include.list": r"s\.t"} for name in names}


def _offset_only(offset: Mapping[str, Any]) -> str | None:
    return None


def _wait(timeout: float = 5.0) -> HandoffWait:
    return HandoffWait(Lsn, "shop", timeout, _offset_only)


class Clock:
    """A monotonic clock that only sleeping moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def _run(connect: FakeConnect, clock: Clock, timeout: float = 5.0) -> str:
    point = SnapshotPoint("0/20", 0)
    return wait_until_streamed("src.s.t", "s.t", point, _wait(timeout), connect, clock.sleep, clock.monotonic)


class SourceLog:
    """The engine's ``streamed_through``, scripted: what the source's log says of each offset in turn.

    An answer that is an exception is raised (the source unreachable).
    """

    def __init__(self, *answers: str | SourceEngineError | None) -> None:
        self.answers = list(answers)
        self.asked: list[Mapping[str, Any]] = []

    def __call__(self, offset: Mapping[str, Any]) -> str | None:
        self.asked.append(offset)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, SourceEngineError):
            raise answer
        return answer


def _run_mariadb(connect: FakeConnect, source_log: SourceLog, clock: Clock, timeout: float = 5.0) -> str:
    point = SnapshotPoint("1-1-7,2-2-100", 0)
    wait = HandoffWait(MariaDbGtidPosition, "shop", timeout, source_log)
    return wait_until_streamed("src.s.t", "s.t", point, wait, connect, clock.sleep, clock.monotonic)


# Debezium's committed offset after a DDL (GTID 1-1-7) on an idle MariaDB: its GTIDs stop before it.
AFTER_DDL = {"file": "mysql-bin.000012", "pos": 1038, "gtids": "1-1-6,2-2-100", "server_id": 1, "event": 9}


def test_an_offset_short_of_the_point_hands_off_once_the_source_log_shows_it_past() -> None:
    connect = FakeConnect(_captures("a"), {"a": [[AFTER_DDL]]})
    source_log = SourceLog(None, "1-1-7,2-2-100")
    clock = Clock()

    how = _run_mariadb(connect, source_log, clock)

    assert source_log.asked == [AFTER_DDL, AFTER_DDL]
    assert clock.sleeps == [handoff.POLL_SECONDS]
    assert how == (
        "Debezium (a) committed offsets past the snapshot point 1-1-7,2-2-100; a past it in the source's "
        "log (only groups without rows after its committed GTIDs)"
    )


def test_the_source_log_is_not_read_for_an_offset_past_the_point() -> None:
    connect = FakeConnect(_captures("a"), {"a": [[{**AFTER_DDL, "gtids": "1-1-8,2-2-100"}]]})
    source_log = SourceLog(None)

    how = _run_mariadb(connect, source_log, Clock())

    assert source_log.asked == []
    assert how == "Debezium (a) committed offsets past the snapshot point 1-1-7,2-2-100"


def test_a_source_log_short_of_the_point_keeps_the_handoff_waiting() -> None:
    connect = FakeConnect(_captures("a"), {"a": [[AFTER_DDL]]})

    with pytest.raises(BootstrapError, match=r"past the snapshot point 1-1-7,2-2-100 within 3s \(a: "):
        _run_mariadb(connect, SourceLog("1-1-6,2-2-100"), Clock(), timeout=3)


def test_a_source_unreachable_is_waited_out_like_connect(caplog: pytest.LogCaptureFixture) -> None:
    connect = FakeConnect(_captures("a"), {"a": [[AFTER_DDL]]})
    down = SourceEngineError("source src: primary 127.0.0.1:13306: Lost connection to server")
    clock = Clock()

    how = _run_mariadb(connect, SourceLog(down, down, "1-1-7,2-2-100"), clock, timeout=60)

    assert clock.sleeps == [handoff.POLL_SECONDS] * 2
    assert how.startswith("Debezium (a) committed offsets past")
    assert "src.s.t: hand-off cannot read the source's log past the connector's offset: source src" in (
        caplog.text
    )


def test_an_offset_the_engine_cannot_read_fails_at_once() -> None:
    connect = FakeConnect(_captures("a"), {"a": [[{**AFTER_DDL, "gtids": "not-a-gtid"}]]})
    clock = Clock()

    with pytest.raises(SourceEngineError, match="not a MariaDB GTID position"):
        _run_mariadb(connect, SourceLog("1-1-7,2-2-100"), clock, timeout=60)
    assert clock.sleeps == []


def test_waits_for_every_capturing_connector() -> None:
    connect = FakeConnect(
        _captures("a", "b"),
        {"a": [[{"lsn_commit": 0x10}], [{"lsn_commit": 0x20}]], "b": [[{"lsn_commit": 0x30}]]},
    )

    how = _run(connect, Clock())

    assert connect.polls == ["a", "b", "a", "b"]
    assert "committed offsets past the snapshot point 0/20" in how


def test_offsets_that_never_pass_fail_with_what_was_seen() -> None:
    connect = FakeConnect(_captures("a"), {"a": [[{"lsn_commit": 1}]]})

    with pytest.raises(BootstrapError, match=r"snapshot point 0/20 within 0s \(a: \[\{'lsn_commit': 1\}\]\)"):
        _run(connect, Clock(), timeout=0)


def test_handoff_with_connect_unreachable_waits_then_hands_off_when_it_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    connect = FakeConnect(_captures("a"), {"a": [[{"lsn_commit": 0x20}]]}, down=3)
    clock = Clock()

    how = _run(connect, clock, timeout=60)

    assert clock.sleeps == [handoff.POLL_SECONDS] * 3
    assert how.startswith("Debezium (a) committed offsets past")
    assert "src.s.t: hand-off waits for Debezium past 0/20: Kafka Connect unreachable" in caplog.text


def test_handoff_with_connect_unreachable_fails_after_the_timeout_and_says_what_to_run() -> None:
    connect = FakeConnect(_captures("a"), {"a": [[{"lsn_commit": 0x20}]]}, down=1000)
    clock = Clock()

    with pytest.raises(BootstrapError) as raised:
        _run(connect, clock, timeout=5)

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("table src.s.t: not handed off, Debezium not seen past the snapshot point 0/20")
    assert "Kafka Connect unreachable" in message
    assert "run cdc-lake bootstrap src.s.t again (it resumes at the hand-off)" in message
    assert 5 <= clock.now <= 6


def test_no_capturing_connector_fails_at_once() -> None:
    connect = FakeConnect({"other": {"topic.prefix": "other", "table.include.list": r"s\.t"}})
    clock = Clock()

    with pytest.raises(
        BootstrapError, match=r"no connector at http://connect captures s\.t under topic prefix shop"
    ):
        _run(connect, clock)
    assert clock.sleeps == []


def test_connectors_are_found_by_prefix_and_include_list() -> None:
    configs = {
        "mine": {"topic.prefix": "shop", "table.include.list": r"s\.other,s\.t"},
        "prefix": {"topic.prefix": "other", "table.include.list": r"s\.t"},
        "table": {"topic.prefix": "shop", "table.include.list": r"s\.tt"},
    }

    assert handoff.capturing_connectors(FakeConnect(configs), "shop", "s.t") == ["mine"]


NAN_TRACE = "\n".join(
    [
        "org.apache.kafka.connect.errors.ConnectException: An exception occurred in the change event "
        "producer. This connector will be stopped.",
        "\tat io.debezium.pipeline.ErrorHandler.setProducerThrowable(ErrorHandler.java:67)",
        "Caused by: org.apache.kafka.connect.errors.DataException: Failed to properly convert data value for "
        "'s.t.nfree' of type numeric",
        "\tat io.debezium.relational.TableSchemaBuilder.lambda$createValueGenerator$5(Builder.java)",
    ]
)


def test_a_failed_connector_task_stops_the_handoff_at_once_naming_its_cause_and_the_runbook() -> None:
    connect = FakeConnect(_captures("a"), {"a": [[{"lsn_commit": 1}]]})
    connect.statuses["a"] = ConnectorStatus("a", "RUNNING", "w", (TaskStatus(0, "FAILED", "w", NAN_TRACE),))
    clock = Clock()

    with pytest.raises(BootstrapError) as raised:
        _run(connect, clock, timeout=1800)

    message = str(raised.value)
    assert clock.now < 60
    assert "\n" not in message
    assert message.startswith("table src.s.t: not handed off: connector 'a' at http://connect: task 0 FAILED")
    assert "Failed to properly convert data value for 's.t.nfree' of type numeric" in message
    assert "docs/runbooks/connector-failed.md" in message


def _watermark(topic_id: str | None) -> Watermark:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    return Watermark("src.s.t", "t.src.s.t", {0: 40}, 1, "0/1", created, True, (), topic_id=topic_id)


def _topic_now(monkeypatch: pytest.MonkeyPatch, topic_id: str | None) -> list[str]:
    """The topic's id as Kafka describes it now (None: no topic); returns the topics asked for."""
    asked: list[str] = []

    def state(servers: str, topic: str, extra: Mapping[str, str]) -> TopicState:
        asked.append(topic)
        return TopicState(topic_id, {0: (0, 90)} if topic_id else {})

    monkeypatch.setattr(handoff, "topic_state", state)
    return asked


def test_a_topic_created_again_since_the_watermark_is_not_handed_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34 review 7: the watermark's offsets are of the topic it measured; a topic deleted and created
    again under the name since then (here already past them) holds another log: the hand-off refuses
    it, naming both ids and the way out, a new copy by re-bootstrap."""
    asked = _topic_now(monkeypatch, "BBBBBBBBBBBBBBBBBBBBBB")
    target = tier_target("src.s.t", 1)

    with pytest.raises(BootstrapError) as refused:
        handoff.check_same_topic(target, _watermark("AAAAAAAAAAAAAAAAAAAAAA"), KafkaSettings())

    assert asked == ["t.src.s.t"]
    assert str(refused.value) == (
        "table src.s.t: not handed off: topic 't.src.s.t' was deleted and created again since the "
        "watermark (topic id AAAAAAAAAAAAAAAAAAAAAA, now BBBBBBBBBBBBBBBBBBBBBB), so the watermark's "
        "offsets are of another log; the table stays BOOTSTRAPPING: run cdc-lake rebootstrap src.s.t"
    )
    copy = replace(target, qualified_name="src.s.t~v2", lake_name="src.s.t")
    with pytest.raises(BootstrapError, match=r"now none\).*rebootstrap src\.s\.t --abort, then cdc-lake"):
        _topic_now(monkeypatch, None)
        handoff.check_same_topic(copy, _watermark("AAAAAAAAAAAAAAAAAAAAAA"), KafkaSettings())


@pytest.mark.parametrize(("saved", "now"), [("AAAA", "AAAA"), (None, "BBBB"), (None, None)])
def test_the_same_topic_or_a_watermark_without_an_id_hands_off(
    monkeypatch: pytest.MonkeyPatch, saved: str | None, now: str | None
) -> None:
    # A watermark saved before topic ids were recorded (migration 0009), or by a broker without ids.
    _topic_now(monkeypatch, now)

    handoff.check_same_topic(tier_target("src.s.t", 1), _watermark(saved), KafkaSettings())
