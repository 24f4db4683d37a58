"""Batch planning: offsets from the checkpoint to the end seen now, capped and shared fairly."""

from __future__ import annotations

import pytest

from cdc_lake.apply.plan import BatchPlan, plan_batch
from cdc_lake.exceptions import KafkaReadError
from cdc_lake.kafka.offsets import Marks, OffsetRange, TopicState
from cdc_lake.kafka.reader import split_ranges
from cdc_lake.lake.checkpoint import Checkpoint, Origin

TABLE = "pg.public.orders"
TOPIC = "pg.public.orders"
TOPIC_ID = "AAAAAAdbzRUAAAAAOt5osQ"


def plan(
    applied: dict[int, int],
    marks: Marks,
    max_events: int = 1000,
    limit: dict[int, int] | None = None,
    applied_id: str | None = None,
    topic_id: str | None = TOPIC_ID,
) -> BatchPlan:
    """Plan from a checkpoint at ``applied`` (of topic id ``applied_id``) against ``marks`` now."""
    checkpoint = Checkpoint(TOPIC, applied, None, Origin.COMMIT, topic_id=applied_id)
    return plan_batch(TABLE, checkpoint, TopicState(topic_id, marks), max_events, limit)


def test_reads_from_the_checkpoint_to_the_end_seen_now() -> None:
    batch = plan({0: 10, 1: 4}, {0: (0, 25), 1: (0, 4)})

    assert batch.start == {0: 10, 1: 4}
    assert batch.end == {0: 25, 1: 4}
    assert batch.ranges == [OffsetRange(TOPIC, 0, 10, 25)]
    assert (batch.offsets, batch.backlog_after) == (15, 0)


def test_the_cap_is_shared_fairly_and_small_backlogs_are_taken_whole() -> None:
    batch = plan({}, {0: (0, 1000), 1: (0, 3), 2: (0, 1000)}, max_events=101)

    assert batch.end == {0: 49, 1: 3, 2: 49}
    assert batch.offsets == 101
    assert batch.backlog_after == 1000 - 49 + 1000 - 49


def test_limit_caps_each_partition_at_the_ends_seen_when_apply_started() -> None:
    batch = plan({0: 5}, {0: (0, 50)}, limit={0: 20})

    assert batch.end == {0: 20}
    assert batch.backlog_after == 30


def test_a_table_never_applied_starts_every_partition_at_zero() -> None:
    batch = plan({}, {0: (0, 3), 1: (0, 2)}, max_events=10)

    assert batch.ranges == [OffsetRange(TOPIC, 0, 0, 3), OffsetRange(TOPIC, 1, 0, 2)]
    assert batch.topic_id == TOPIC_ID, "the commit records the id of the topic it applied"


def test_partitions_added_since_the_checkpoint_stop_the_table() -> None:
    # Issue 20, finding 2: the new partition used to be read from offset 0 with no error, while a key
    # Debezium now routes there has its later changes ordered below its stored row (MySQL/MariaDB order
    # by "1" + the Kafka offset in the key's partition).
    with pytest.raises(KafkaReadError) as caught:
        plan({0: 7}, {0: (0, 7), 1: (0, 2), 2: (0, 0)}, max_events=10)

    assert str(caught.value) == (
        f"table {TABLE}: topic {TOPIC!r} has 3 partitions, the table was applied with 1: a key's later "
        f"changes may be in another partition than its earlier ones, out of order; "
        f"run `cdc-lake rebootstrap {TABLE}`"
    )


def test_a_topic_created_again_is_told_by_its_id_even_past_the_stored_offsets() -> None:
    # Issue 20, finding 3: the new topic already holds more than the stored offsets, so neither the
    # "beyond the end" nor the "deleted by retention" check sees it; only its id differs.
    with pytest.raises(KafkaReadError) as caught:
        plan({0: 5}, {0: (0, 40)}, applied_id="AAAAAAAAAAEAAAAAAAAAAQ")

    assert str(caught.value) == (
        f"table {TABLE}: topic {TOPIC!r} was deleted and created again since the table applied it "
        f"(topic id AAAAAAAAAAEAAAAAAAAAAQ, now {TOPIC_ID}), so its offsets start over; "
        f"run `cdc-lake rebootstrap {TABLE}`"
    )


@pytest.mark.parametrize(
    ("applied_id", "topic_id"), [(None, TOPIC_ID), (TOPIC_ID, TOPIC_ID), (TOPIC_ID, None)]
)
def test_a_checkpoint_without_a_topic_id_or_a_broker_without_ids_plans_as_before(
    applied_id: str | None, topic_id: str | None
) -> None:
    # Commits of earlier versions carry no id (the next commit records it); brokers before Kafka 2.8 have
    # none to compare.
    batch = plan({0: 5}, {0: (0, 40)}, applied_id=applied_id, topic_id=topic_id)

    assert (batch.start, batch.end, batch.topic_id) == ({0: 5}, {0: 40}, topic_id)


@pytest.mark.parametrize(
    ("applied", "marks", "message"),
    [
        ({0: 3}, {0: (10, 20)}, r"offsets 3 to 9 were deleted by retention"),
        ({0: 30}, {0: (0, 20)}, r"next offset to apply, 30, is beyond the partition's end 20"),
        ({0: 1, 1: 1}, {0: (0, 20)}, r"partitions \[1\] have applied offsets but no longer exist"),
        ({0: 5}, {}, r"no longer exists but offsets of it were applied"),
    ],
)
def test_offsets_kafka_no_longer_has_are_errors(
    applied: dict[int, int], marks: dict[int, tuple[int, int]], message: str
) -> None:
    with pytest.raises(KafkaReadError, match=message):
        plan(applied, marks)


def test_a_topic_not_created_yet_has_nothing_to_apply() -> None:
    batch = plan({}, {})

    assert (batch.offsets, batch.ranges, batch.backlog_after) == (0, [], 0)


def test_a_fully_retained_empty_partition_is_fine() -> None:
    batch = plan({0: 10}, {0: (10, 10)})

    assert batch.offsets == 0


def test_split_ranges_cuts_big_ranges_into_slices_in_order() -> None:
    ranges = [OffsetRange(TOPIC, 0, 100, 130), OffsetRange(TOPIC, 1, 0, 5)]

    slices = split_ranges(ranges, pieces=3, min_slice=10)

    assert slices == [
        OffsetRange(TOPIC, 0, 100, 112),
        OffsetRange(TOPIC, 0, 112, 124),
        OffsetRange(TOPIC, 0, 124, 130),
        OffsetRange(TOPIC, 1, 0, 5),
    ]
    assert split_ranges([OffsetRange(TOPIC, 0, 5, 5)], pieces=4) == []


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete, compact"])
def test_a_compacted_topic_stops_the_table_naming_topic_setting_and_way_out(policy: str) -> None:
    """Issue 34 review 3: a delete event compacted away behind its tombstone left the row in the lake; the
    topic's ``cleanup.policy`` (read with the watermarks) stops the table before every batch."""
    checkpoint = Checkpoint(TOPIC, {0: 3}, None, Origin.COMMIT, topic_id=TOPIC_ID)

    with pytest.raises(KafkaReadError) as raised:
        plan_batch(TABLE, checkpoint, TopicState(TOPIC_ID, {0: (0, 9)}, policy), 1000)

    message = str(raised.value)
    assert f"table {TABLE}: topic {TOPIC!r} has cleanup.policy={policy}" in message
    assert "--add-config cleanup.policy=delete" in message and f"cdc-lake rebootstrap {TABLE}" in message
    assert "\n" not in message


def test_a_topic_that_only_deletes_old_segments_plans_as_before() -> None:
    checkpoint = Checkpoint(TOPIC, {0: 3}, None, Origin.COMMIT, topic_id=TOPIC_ID)

    batch = plan_batch(TABLE, checkpoint, TopicState(TOPIC_ID, {0: (0, 9)}, "delete"), 1000)

    assert batch.ranges == [OffsetRange(TOPIC, 0, 3, 9)]


def _after_recapture(applied: dict[int, int], restart: dict[int, int], marks: Marks) -> BatchPlan:
    checkpoint = Checkpoint(TOPIC, applied, None, Origin.COMMIT, positions={0: "pg:" + "9" * 40})
    return plan_batch(TABLE, checkpoint, TopicState(TOPIC_ID, marks), 1000, None, restart)


def test_a_batch_below_a_recapture_ends_at_its_first_offset() -> None:
    """The old primary's messages are applied in batches of their own, under their own re-send marks."""
    batch = _after_recapture({0: 10}, {0: 30}, {0: (0, 50)})

    assert (batch.start, batch.end, batch.fresh) == ({0: 10}, {0: 30}, frozenset())


def test_the_batch_at_a_recaptures_first_offset_is_fresh_and_later_ones_are_not() -> None:
    """Fresh: the marks stored before it (the old primary's positions) skip nothing in it."""
    first = _after_recapture({0: 30}, {0: 30}, {0: (0, 50)})
    later = _after_recapture({0: 40}, {0: 30}, {0: (0, 50)})

    assert (first.start, first.end, first.fresh) == ({0: 30}, {0: 50}, frozenset({0}))
    assert (later.start, later.end, later.fresh) == ({0: 40}, {0: 50}, frozenset())
