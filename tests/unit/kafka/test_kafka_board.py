"""Topic states (ids, end offsets) in one read; the offset board reuses them while fresh and the service
refreshes it."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Node, TopicPartition, TopicPartitionInfo, Uuid
from confluent_kafka.admin import ConfigEntry, ConfigResource, OffsetSpec, TopicDescription  # type: ignore[attr-defined]
from support.schedule import CountingRunner, tier_target

from cdc_lake.apply.service import ApplyService
from cdc_lake.exceptions import KafkaReadError
from cdc_lake.kafka import board as board_module
from cdc_lake.kafka import offsets as offsets_module
from cdc_lake.kafka.board import OffsetBoard
from cdc_lake.kafka.offsets import TopicState, topic_states, topic_watermarks
from cdc_lake.kafka.reader import KafkaReadSettings


class _Reads:
    """Stands in for the batched Kafka read: records which topics each read asked for."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(
        self, servers: str, topics: Iterable[str], timeout: float = 10.0, extra: object = None
    ) -> dict[str, TopicState]:
        wanted = list(topics)
        with self.lock:
            self.calls.append(wanted)
        return {topic: TopicState(f"id-{topic}", {0: (0, len(self.calls))}) for topic in wanted}


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> _Reads:
    recorded = _Reads()
    monkeypatch.setattr(board_module, "topic_states", recorded)
    return recorded


def test_one_read_for_many_topics_reused_while_fresh(reads: _Reads) -> None:
    now = [100.0]
    board = OffsetBoard(KafkaReadSettings("k:9092"), max_age_seconds=1.0, clock=lambda: now[0])

    board.refresh(["a", "b", "c", "a"])
    assert reads.calls == [["a", "b", "c"]]
    assert board.state("b") == TopicState("id-b", {0: (0, 1)})
    assert len(reads.calls) == 1 and board.requests == 1 and board.served == 1

    now[0] += 0.5
    board.refresh(["a", "d"])  # only the missing one is read
    assert reads.calls[-1] == ["d"]

    now[0] += 0.8  # a, b, c are now 1.3 s old; d 0.8 s
    assert board.state("a") == TopicState("id-a", {0: (0, 3)})
    assert reads.calls[-1] == ["a"]
    board.refresh(["b", "c", "d"])
    assert reads.calls[-1] == ["b", "c"]
    assert board.requests == 4


def test_plans_reuse_offsets_longer_than_the_service_refreshes_them(reads: _Reads) -> None:
    now = [0.0]
    board = OffsetBoard(KafkaReadSettings("k:9092"), 1.0, reuse_seconds=5.0, clock=lambda: now[0])
    board.refresh(["a"])
    now[0] = 3.0
    assert board.state("a").marks == {0: (0, 1)} and board.served == 1
    board.refresh(["a"])  # older than max_age: the service reads it again
    assert board.requests == 2
    now[0] = 9.0
    board.state("a")
    assert board.requests == 3 and board.served == 1


def test_no_topics_reads_nothing() -> None:
    assert topic_watermarks("unreachable.invalid:1", []) == {}


def _done(value: object = None, error: KafkaError | None = None) -> Future[Any]:
    future: Future[Any] = Future()
    if error is not None:
        future.set_exception(KafkaException(error))
    else:
        future.set_result(value)
    return future


def _partitions(count: int) -> list[TopicPartitionInfo]:
    leader = Node(1, "k", 9092)
    return [TopicPartitionInfo(partition, leader, [leader], [leader]) for partition in range(count)]


class _Admin:
    """Stands in for the AdminClient: topic ``new`` has an id and two partitions, ``old`` a broker
    without topic ids, ``creating`` no leader yet, and anything else does not exist."""

    DESCRIBED = {
        "new": TopicDescription("new", Uuid(7, 9), False, _partitions(2)),
        "old": TopicDescription("old", Uuid(0, 0), False, _partitions(1)),
    }
    ERRORS = {"creating": KafkaError.LEADER_NOT_AVAILABLE, "denied": KafkaError.TOPIC_AUTHORIZATION_FAILED}

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings

    POLICIES = {"new": "compact,delete", "old": "delete"}

    def describe_configs(
        self, resources: list[ConfigResource], request_timeout: float
    ) -> dict[Any, Future[Any]]:
        policy = "cleanup.policy"
        return {r: _done({policy: ConfigEntry(policy, self.POLICIES[r.name])}) for r in resources}

    def describe_topics(self, topics: Any, request_timeout: float) -> dict[str, Future[Any]]:
        return {
            name: _done(self.DESCRIBED[name]) if name in self.DESCRIBED
            else _done(error=KafkaError(self.ERRORS.get(name, KafkaError.UNKNOWN_TOPIC_OR_PART)))
            for name in topics.topic_names
        }

    def list_offsets(
        self, specs: dict[TopicPartition, OffsetSpec], isolation_level: Any, request_timeout: float
    ) -> dict[TopicPartition, Future[Any]]:
        def offset(tp: TopicPartition, spec: OffsetSpec) -> int:
            return (3 if spec == OffsetSpec.earliest() else 10) + tp.partition  # type: ignore[no-untyped-call]

        return {
            tp: _done(TopicPartition(tp.topic, tp.partition, offset(tp, spec)))
            for tp, spec in specs.items()
        }


def test_topic_states_carry_the_topic_id_from_the_same_metadata_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offsets_module, "AdminClient", _Admin)

    states = topic_states("k:9092", ["new", "old", "creating", "missing"])

    assert states == {
        "new": TopicState(str(Uuid(7, 9)), {0: (3, 10), 1: (4, 11)}, "compact,delete"),
        "old": TopicState(None, {0: (3, 10)}, "delete"),
        "creating": TopicState(None, {}),
        "missing": TopicState(None, {}),
    }


def test_a_topic_kafka_refuses_to_describe_is_an_error_not_a_missing_topic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(offsets_module, "AdminClient", _Admin)

    with pytest.raises(KafkaReadError, match=r"cannot read the offsets of topic\(s\) 'new', 'denied'"):
        topic_states("k:9092", ["new", "denied"])


def test_service_refreshes_due_tables_in_batches(reads: _Reads) -> None:
    runner = CountingRunner()
    board = OffsetBoard(KafkaReadSettings("k:9092"), max_age_seconds=0.2)
    targets = [tier_target(f"t{n}", n % 3) for n in range(60)]
    service = ApplyService(runner, targets, lambda tier: 0.0, workers=4, poll_seconds=0.05, board=board)  # type: ignore[arg-type]
    thread = threading.Thread(target=service.run)
    thread.start()
    time.sleep(1.0)
    service.stop()
    thread.join(10)

    steps = sum(runner.steps.values())
    assert set(runner.steps) == {t.qualified_name for t in targets}
    assert max(len(call) for call in reads.calls) >= 50, "the first read covers every due table"
    assert len(reads.calls) * 4 < steps, f"{len(reads.calls)} reads for {steps} steps"


def test_the_service_reads_the_schema_histories_in_the_same_batch(reads: _Reads) -> None:
    """The swap check (cdc_lake/apply/swaps.py) takes a history's end from the board: the service's one
    batched read per loop covers the connectors' history topics with the tables' topics."""
    runner = CountingRunner()
    board = OffsetBoard(KafkaReadSettings("k:9092"), max_age_seconds=0.2)
    history = "cdc-lake.maria.schema-history"
    targets = [dataclasses.replace(tier_target(f"t{n}", 0), history_topic=history) for n in range(5)]
    service = ApplyService(runner, targets, lambda tier: 0.0, workers=2, poll_seconds=0.05, board=board)  # type: ignore[arg-type]
    thread = threading.Thread(target=service.run)
    thread.start()
    time.sleep(0.3)
    service.stop()
    thread.join(10)

    assert reads.calls[0] == [*(t.topic for t in targets), history]
    assert all(history in call for call in reads.calls), "never a read of its own"
