"""Which Kafka offsets one apply batch reads: from the stored offsets to the end seen at batch start, capped.

A batch never reads past the high watermark it saw when it started (``cdc-lake apply --once`` also caps
every batch at the ends it saw when the command started), and never more than ``max_events`` offsets in
all, shared fairly between the partitions that have a backlog.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cdc_lake.exceptions import KafkaReadError
from cdc_lake.kafka.offsets import OffsetRange


@dataclass(frozen=True)
class BatchPlan:
    """The offsets of one batch: ``start`` (inclusive) to ``end`` (exclusive) per partition.

    ``high`` holds the high watermarks seen when the batch was planned; partitions with nothing to read
    have ``start == end``.
    """

    topic: str
    start: dict[int, int]
    end: dict[int, int]
    high: dict[int, int]

    @property
    def ranges(self) -> list[OffsetRange]:
        """The non-empty ranges to read, by partition."""
        return [
            OffsetRange(self.topic, p, self.start[p], self.end[p])
            for p in sorted(self.end)
            if self.end[p] > self.start[p]
        ]

    @property
    def offsets(self) -> int:
        """How many offsets the batch spans."""
        return sum(self.end[p] - self.start[p] for p in self.end)

    @property
    def backlog_after(self) -> int:
        """Offsets left between the batch's end and the high watermarks seen at its start."""
        return sum(max(0, self.high[p] - self.end[p]) for p in self.end)


def _fair_shares(backlogs: Mapping[int, int], budget: int) -> dict[int, int]:
    """Split ``budget`` offsets between partitions: small backlogs are taken whole, the rest evenly."""
    shares: dict[int, int] = {}
    left = budget
    ordered = sorted(backlogs.items(), key=lambda item: (item[1], item[0]))
    for index, (partition, backlog) in enumerate(ordered):
        share = min(backlog, left // (len(ordered) - index))
        shares[partition] = share
        left -= share
    return shares


def plan_batch(
    topic: str,
    next_offsets: Mapping[int, int],
    watermarks: Mapping[int, tuple[int, int]],
    max_events: int,
    limit: Mapping[int, int] | None = None,
) -> BatchPlan:
    """Plan the next batch of ``topic`` from ``next_offsets`` (the next offset to apply per partition).

    ``watermarks`` maps each partition to its (low, high) offsets now; ``limit`` optionally caps each
    partition's end (the ends seen when ``apply --once`` started).  A partition missing from
    ``next_offsets`` starts at 0; a topic that does not exist yet plans nothing.  Raises KafkaReadError
    when unread messages were already deleted by retention, a stored offset lies beyond the partition's
    end (the topic was recreated), or a topic or partition with stored offsets disappeared: in each case
    the lake cannot be brought up to date from Kafka.
    """
    if not watermarks:
        if next_offsets:
            raise KafkaReadError(
                f"topic {topic!r} no longer exists but offsets of it were applied; re-bootstrap the table"
            )
        # Debezium creates a table's topic with its first change: until then there is nothing to apply.
        return BatchPlan(topic=topic, start={}, end={}, high={})
    vanished = sorted(set(next_offsets) - set(watermarks))
    if vanished:
        raise KafkaReadError(
            f"topic {topic!r}: partitions {vanished} have applied offsets but no longer exist"
        )
    start: dict[int, int] = {}
    high: dict[int, int] = {}
    backlogs: dict[int, int] = {}
    for partition, (low, high_mark) in sorted(watermarks.items()):
        begin = next_offsets.get(partition, 0)
        where = f"topic {topic!r} partition {partition}"
        if begin > high_mark:
            raise KafkaReadError(
                f"{where}: the next offset to apply, {begin}, is beyond the partition's end {high_mark} "
                "(was the topic recreated?); re-bootstrap the table"
            )
        if begin < low and begin < high_mark:
            raise KafkaReadError(
                f"{where}: offsets {begin} to {low - 1} were deleted by retention before they were applied; "
                "re-bootstrap the table"
            )
        stop = high_mark if limit is None else min(high_mark, max(begin, limit.get(partition, high_mark)))
        start[partition] = begin
        high[partition] = high_mark
        backlogs[partition] = stop - begin
    shares = _fair_shares(backlogs, max_events)
    end = {partition: start[partition] + shares[partition] for partition in start}
    return BatchPlan(topic=topic, start=start, end=end, high=high)
