"""Batch planning: offsets from the checkpoint to the end seen now, capped and shared fairly."""

from __future__ import annotations

import pytest

from cdc_lake.apply.plan import plan_batch
from cdc_lake.exceptions import KafkaReadError
from cdc_lake.kafka.offsets import OffsetRange
from cdc_lake.kafka.reader import split_ranges

TOPIC = "pg.public.orders"


def test_reads_from_the_checkpoint_to_the_end_seen_now() -> None:
    plan = plan_batch(TOPIC, {0: 10, 1: 4}, {0: (0, 25), 1: (0, 4)}, max_events=1000)

    assert plan.start == {0: 10, 1: 4}
    assert plan.end == {0: 25, 1: 4}
    assert plan.ranges == [OffsetRange(TOPIC, 0, 10, 25)]
    assert (plan.offsets, plan.backlog_after) == (15, 0)


def test_the_cap_is_shared_fairly_and_small_backlogs_are_taken_whole() -> None:
    plan = plan_batch(TOPIC, {}, {0: (0, 1000), 1: (0, 3), 2: (0, 1000)}, max_events=101)

    assert plan.end == {0: 49, 1: 3, 2: 49}
    assert plan.offsets == 101
    assert plan.backlog_after == 1000 - 49 + 1000 - 49


def test_limit_caps_each_partition_at_the_ends_seen_when_apply_started() -> None:
    plan = plan_batch(TOPIC, {0: 5}, {0: (0, 50)}, max_events=1000, limit={0: 20})

    assert plan.end == {0: 20}
    assert plan.backlog_after == 30


def test_a_new_partition_starts_at_zero() -> None:
    plan = plan_batch(TOPIC, {0: 7}, {0: (0, 7), 1: (0, 2)}, max_events=10)

    assert plan.ranges == [OffsetRange(TOPIC, 1, 0, 2)]


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
        plan_batch(TOPIC, applied, marks, max_events=100)


def test_a_topic_not_created_yet_has_nothing_to_apply() -> None:
    plan = plan_batch(TOPIC, {}, {}, max_events=100)

    assert (plan.offsets, plan.ranges, plan.backlog_after) == (0, [], 0)


def test_a_fully_retained_empty_partition_is_fine() -> None:
    plan = plan_batch(TOPIC, {0: 10}, {0: (10, 10)}, max_events=100)

    assert plan.offsets == 0


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
