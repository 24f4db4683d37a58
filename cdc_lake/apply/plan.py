"""Which Kafka offsets one apply batch reads: from the stored offsets to the end seen at batch start, capped.

A batch never reads past the high watermark it saw when it started (``cdc-lake apply --once`` also caps
every batch at the ends it saw when the command started), and never more than ``max_events`` offsets in
all, shared fairly between the partitions that have a backlog.

Before planning, the topic is checked against the checkpoint: still the same topic (its Kafka id), with
the same partitions, each still holding the next offset to apply, and not compacted (its
``cleanup.policy``, read with the watermarks: :mod:`cdc_lake.kafka.topic_rules`).  Anything else stops
the table with one line naming it, the topic, what changed and the way out (a re-bootstrap): the per-key
order and the offsets the lake relies on do not carry over (docs/applier.md, "Guarantees").

A table recaptured on a new primary (:mod:`cdc_lake.state.recaptures`: a Postgres failover without a
copy) has a *restart* offset per partition, where the new connector's messages begin.  A batch never
spans it: one that starts below it ends there, so the old capture's messages are applied in batches of
their own, and a batch that starts exactly there is *fresh*: the re-send marks stored before it (the old
primary's positions, which the new one's do not continue) skip nothing in it
(:meth:`cdc_lake.apply.table_applier.TableApplier.checkpoint`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cdc_lake.exceptions import KafkaReadError
from cdc_lake.kafka.offsets import OffsetRange, TopicState
from cdc_lake.kafka.topic_rules import compaction_refusal
from cdc_lake.lake.checkpoint import Checkpoint


@dataclass(frozen=True)
class BatchPlan:
    """The offsets of one batch: ``start`` (inclusive) to ``end`` (exclusive) per partition.

    ``high`` holds the high watermarks seen when the batch was planned; partitions with nothing to read
    have ``start == end``.  ``topic_id`` is the topic's Kafka id then (None: not known), which the
    batch's commit records with its offsets.  A ``replay`` (``cdc-lake quarantine --replay``) reads
    quarantined offsets below the checkpoint: its commit keeps the checkpoint's offsets.  ``fresh``
    names the partitions that start at their restart offset (see the module docstring).
    """

    topic: str
    start: dict[int, int]
    end: dict[int, int]
    high: dict[int, int]
    topic_id: str | None = None
    replay: bool = False
    fresh: frozenset[int] = frozenset()

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
    table: str,
    checkpoint: Checkpoint,
    now: TopicState,
    max_events: int,
    limit: Mapping[int, int] | None = None,
    restart: Mapping[int, int] | None = None,
) -> BatchPlan:
    """Plan ``table``'s next batch from ``checkpoint`` (the next offset to apply per partition).

    ``now`` is the topic as Kafka describes it now: its id and each partition's (low, high) offsets;
    ``limit`` optionally caps each partition's end (the ends seen when ``apply --once`` started);
    ``restart``: a recaptured table's restart offsets (see the module docstring).  A
    checkpoint with no offsets (a table never applied, or bootstrapped before its topic existed) starts
    every partition at 0; a topic that does not exist yet plans nothing.

    Raises KafkaReadError, naming the way out (``cdc-lake rebootstrap``), when the lake cannot be brought
    up to date from this topic: it was deleted, or deleted and created again (a topic id other than the
    checkpoint's, or a stored offset beyond a partition's end); a partition with stored offsets
    disappeared; partitions were added since the checkpoint; or unread messages were already deleted by
    retention; or the topic is compacted (``cleanup.policy``), which can remove a delete event behind its
    tombstone.  Added partitions are refused for every engine: Debezium routes a key to a partition by
    hashing it over the partition count, so a key's later changes may land in another partition, read
    in another order (and, on MySQL/MariaDB, ordered by their offset there, which can be below the one of
    the key's stored row).
    """
    topic, applied, marks = checkpoint.topic, checkpoint.offsets, now.marks
    way_out = f"run `cdc-lake rebootstrap {table}`"
    where = f"table {table}: topic {topic!r}"
    if not marks:
        if applied:
            raise KafkaReadError(f"{where} no longer exists but offsets of it were applied; {way_out}")
        # Debezium creates a table's topic with its first change: until then there is nothing to apply.
        return BatchPlan(topic=topic, start={}, end={}, high={})
    compacted = compaction_refusal(table, topic, now.cleanup_policy, way_out)
    if compacted is not None:
        raise KafkaReadError(compacted)
    if checkpoint.topic_id is not None and now.topic_id is not None and now.topic_id != checkpoint.topic_id:
        raise KafkaReadError(
            f"{where} was deleted and created again since the table applied it (topic id "
            f"{checkpoint.topic_id}, now {now.topic_id}), so its offsets start over; {way_out}"
        )
    vanished = sorted(set(applied) - set(marks))
    if vanished:
        raise KafkaReadError(
            f"{where}: partitions {vanished} have applied offsets but no longer exist; {way_out}"
        )
    if applied and len(marks) != len(applied):
        raise KafkaReadError(
            f"{where} has {len(marks)} partitions, the table was applied with {len(applied)}: a key's later "
            f"changes may be in another partition than its earlier ones, out of order; {way_out}"
        )
    start: dict[int, int] = {}
    high: dict[int, int] = {}
    backlogs: dict[int, int] = {}
    fresh: set[int] = set()
    for partition, (low, high_mark) in sorted(marks.items()):
        begin = applied.get(partition, 0)
        here = f"{where} partition {partition}"
        if begin > high_mark:
            raise KafkaReadError(
                f"{here}: the next offset to apply, {begin}, is beyond the partition's end {high_mark} "
                f"(was the topic recreated?); {way_out}"
            )
        if begin < low and begin < high_mark:
            raise KafkaReadError(
                f"{here}: offsets {begin} to {low - 1} were deleted by retention before they were applied; "
                f"{way_out}"
            )
        stop = high_mark if limit is None else min(high_mark, max(begin, limit.get(partition, high_mark)))
        first_new = (restart or {}).get(partition)
        if first_new is not None and begin < first_new:
            stop = min(stop, first_new)
        elif first_new is not None and begin == first_new:
            fresh.add(partition)
        start[partition] = begin
        high[partition] = high_mark
        backlogs[partition] = stop - begin
    shares = _fair_shares(backlogs, max_events)
    end = {partition: start[partition] + shares[partition] for partition in start}
    return BatchPlan(
        topic=topic, start=start, end=end, high=high, topic_id=now.topic_id, fresh=frozenset(fresh)
    )
