"""Applied offsets committed to a consumer group per table copy: naming, failure streaks, a real client.

The last test commits through the real ``AdminClient`` to librdkafka's in-process mock cluster
(``test.mock.num.brokers``) and reads the group back as a consumer of it would: no service needed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from cdc_lake.kafka import group_offsets as group_offsets_module
from cdc_lake.kafka.group_offsets import GroupOffsets, commit_group_offsets, group_id, group_offsets
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.state.store import versioned_path

TABLE = "pg.public.orders"
BASE = "s3a://lake/pg/public/orders"
TOPIC = "pg.public.orders"


class FakeAdmin:
    """Answers each commit with the next of ``outcomes``: None commits, an exception fails the future."""

    def __init__(self, *outcomes: BaseException | None) -> None:
        self.outcomes = list(outcomes)
        self.requests: list[tuple[str, list[tuple[str, int, int]], float]] = []

    def alter_consumer_group_offsets(
        self, alter_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions], **kwargs: Any
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        (request,) = alter_consumer_group_offsets_request
        partitions = [(tp.topic, tp.partition, tp.offset) for tp in request.topic_partitions or []]
        self.requests.append((request.group_id, partitions, kwargs["request_timeout"]))
        future: Future[ConsumerGroupTopicPartitions] = Future()
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is None:
            future.set_result(request)
        else:
            future.set_exception(outcome)
        return {request.group_id: future}


    deletions: list[BaseException | None]
    deleted: list[str]

    def delete_consumer_groups(self, group_ids: list[str], **kwargs: Any) -> dict[str, Future[None]]:
        (group,) = group_ids
        self.deleted = [*getattr(self, "deleted", []), group]
        future: Future[None] = Future()
        outcome = self.deletions.pop(0)
        if outcome is None:
            future.set_result(None)
        else:
            future.set_exception(outcome)
        return {group: future}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _committer(admin: FakeAdmin, clock: Clock | None = None) -> GroupOffsets:
    return GroupOffsets(lambda: admin, timeout=2.0, retry_seconds=60.0, clock=clock or Clock())


def _denied() -> KafkaException:
    return KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))


def test_each_copy_of_a_table_has_its_own_group() -> None:
    original = group_id(TABLE, BASE)
    copy = group_id(TABLE, versioned_path(BASE, 2))

    assert original.startswith(f"cdc-lake.{TABLE}.")
    assert copy.startswith(f"cdc-lake.{TABLE}.")
    assert original != copy
    assert group_id(TABLE, BASE + "/") == original
    assert group_id("pg.public.customers", BASE) != original


def test_a_commit_sends_the_offsets_to_the_copys_group_with_a_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    admin = FakeAdmin()
    committer = _committer(admin)

    with caplog.at_level(logging.INFO, logger="cdc_lake.kafka.group_offsets"):
        assert committer.commit(TABLE, BASE, TOPIC, {1: 7, 0: 42})
        assert committer.commit(TABLE, BASE, TOPIC, {1: 8, 0: 42})

    group = group_id(TABLE, BASE)
    assert admin.requests == [
        (group, [(TOPIC, 0, 42), (TOPIC, 1, 7)], 2.0), (group, [(TOPIC, 0, 42), (TOPIC, 1, 8)], 2.0)
    ]
    assert [r.getMessage() for r in caplog.records] == [
        f"table {TABLE}: applied offsets of topic {TOPIC!r} go to consumer group {group!r}"
    ]


def test_a_failure_streak_warns_once_pauses_and_says_when_it_is_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    admin = FakeAdmin(_denied(), _denied(), None, _denied())
    committer = _committer(admin, clock)
    group = group_id(TABLE, BASE)

    with caplog.at_level(logging.WARNING, logger="cdc_lake.kafka.group_offsets"):
        assert not committer.commit(TABLE, BASE, TOPIC, {0: 1})
        clock.now += 30
        assert not committer.commit(TABLE, BASE, TOPIC, {0: 2})  # paused: not even sent
        assert len(admin.requests) == 1
        clock.now += 31
        assert not committer.commit(TABLE, BASE, TOPIC, {0: 3})  # tried again, same streak
        assert len(admin.requests) == 2
        clock.now += 61
        assert committer.commit(TABLE, BASE, TOPIC, {0: 4})
        assert committer.commit(TABLE, BASE, TOPIC, {0: 5}) is False  # a new streak

    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 3, messages
    first, recovered, second = messages
    for text in (first, second):
        assert f"table {TABLE}:" in text and repr(TOPIC) in text and repr(group) in text
        assert "GROUP_AUTHORIZATION_FAILED" in text
    assert recovered == f"table {TABLE}: consumer group {group!r} holds the applied offsets again"


def test_one_copys_failure_does_not_pause_another_copy() -> None:
    admin = FakeAdmin(_denied())
    committer = _committer(admin)

    assert not committer.commit(TABLE, BASE, TOPIC, {0: 1})
    assert committer.commit(TABLE, versioned_path(BASE, 2), TOPIC, {0: 1})


def test_a_partition_error_in_the_answer_is_a_failure() -> None:
    class PartitionDenied(FakeAdmin):
        def alter_consumer_group_offsets(
            self, alter_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions], **kwargs: Any
        ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
            futures = super().alter_consumer_group_offsets(alter_consumer_group_offsets_request, **kwargs)
            (answer,) = futures.values()
            for partition in answer.result().topic_partitions or []:
                partition.error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
            return futures

    assert not _committer(PartitionDenied()).commit(TABLE, BASE, TOPIC, {0: 1})


def test_an_answer_that_never_comes_is_a_bounded_failure(caplog: pytest.LogCaptureFixture) -> None:
    class Silent(FakeAdmin):
        def alter_consumer_group_offsets(
            self, alter_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions], **kwargs: Any
        ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
            return {alter_consumer_group_offsets_request[0].group_id: Future()}

    committer = GroupOffsets(Silent, timeout=0.01)

    with caplog.at_level(logging.WARNING, logger="cdc_lake.kafka.group_offsets"):
        assert not committer.commit(TABLE, BASE, TOPIC, {0: 1})

    assert "(TimeoutError)" in caplog.records[0].getMessage()


def test_a_client_that_cannot_be_created_never_raises() -> None:
    def broken() -> FakeAdmin:
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "No such configuration property"))

    assert not GroupOffsets(broken).commit(TABLE, BASE, TOPIC, {0: 1})


@pytest.fixture
def mock_cluster() -> Iterator[str]:
    """The bootstrap address of a librdkafka mock cluster holding topic ``TOPIC`` with 5 messages."""
    owner = Producer({"test.mock.num.brokers": 1, "logger": logging.getLogger("mock-kafka")})
    brokers = owner.list_topics(timeout=10).brokers.values()
    servers = ",".join(f"{broker.host}:{broker.port}" for broker in brokers)
    producer = Producer({"bootstrap.servers": servers})
    for _ in range(5):
        producer.produce(TOPIC, b"change")
    assert producer.flush(10) == 0
    yield servers
    del producer, owner


def test_the_group_holds_the_offsets_a_lag_tool_reads(
    mock_cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The process's shared clients, for this test only: the mock cluster's client goes with it.
    monkeypatch.setattr(group_offsets_module, "_SHARED", {})
    settings = KafkaReadSettings(mock_cluster)

    assert commit_group_offsets(settings, TABLE, BASE, TOPIC, {0: 3})
    assert commit_group_offsets(settings, TABLE, BASE, TOPIC, {0: 5})

    assert group_offsets(settings) is group_offsets(KafkaReadSettings(mock_cluster))
    reader = Consumer({"bootstrap.servers": mock_cluster, "group.id": group_id(TABLE, BASE)})
    try:
        (committed,) = reader.committed([TopicPartition(TOPIC, 0)], timeout=10)
    finally:
        reader.close()
    assert committed.offset == 5



def test_a_removed_copys_group_is_deleted_and_a_missing_one_counts_as_deleted() -> None:
    # librdkafka's mock cluster has no DeleteGroups; the stack's broker does (test_rebootstrap.py).
    admin = FakeAdmin()
    missing = KafkaException(KafkaError(KafkaError.GROUP_ID_NOT_FOUND))
    admin.deletions = [None, missing, _denied()]
    committer = _committer(admin)
    old = versioned_path(BASE, 1)

    assert committer.delete(TABLE, old)
    assert committer.delete(TABLE, old), "a group already gone is no failure"
    assert not committer.delete(TABLE, old), "a refusal is reported, never raised"
    assert admin.deleted == [group_id(TABLE, old)] * 3
