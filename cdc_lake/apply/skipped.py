"""Leaving quarantined messages out of a batch: the applier's side of the quarantine.

A message the operator quarantined (:mod:`cdc_lake.apply.quarantine`, the command) is never applied by a
batch whose range covers it: :func:`skipped_offsets` finds the quarantined offsets in the range,
:func:`without_quarantined` drops them from the messages read, and the batch's commit names them in its
metadata (:func:`quarantined_below`, :attr:`cdc_lake.lake.commit_metadata.CommitMetadata.quarantined`), so
the lake itself records what it skipped.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark import RDD

from cdc_lake.kafka.reader import RawMessage
from cdc_lake.state.store import StateStore


def skipped_offsets(
    store: StateStore | None,
    table: str,
    topic: str,
    start: Mapping[int, int],
    end: Mapping[int, int],
    topic_id: str | None = None,
) -> frozenset[tuple[int, int]]:
    """The (partition, offset) pairs quarantined for ``table`` that lie in ``[start, end)``.

    ``topic_id`` is the topic's Kafka id now (None: not known): a row quarantined from a topic of another
    id (deleted and created again since) skips nothing.  A re-bootstrap's copy (``table~vN``) skips what
    its table's quarantine holds: a quarantined offset before the copy's watermark is never read by it
    (the snapshot holds that change), one after it stays missing in the copy too, and the switch keeps
    its row and the possibly-diverged mark (:meth:`StateStore.switch_rebootstrap`).  A replayed row
    skips nothing: its change is in the lake, and a copy reading the message again applies it.
    """
    if store is None:
        return frozenset()
    return frozenset(
        (q.partition, q.offset)
        for q in store.quarantined(table.partition("~")[0], topic)
        if q.missing
        and q.partition in end
        and start.get(q.partition, 0) <= q.offset < end[q.partition]
        and (q.topic_id is None or topic_id is None or q.topic_id == topic_id)
    )


def without_quarantined(raw: RDD[RawMessage], skipped: frozenset[tuple[int, int]]) -> RDD[RawMessage]:
    """``raw`` without the quarantined messages (unchanged when there are none)."""
    if not skipped:
        return raw
    return raw.filter(lambda message: (message.partition, message.offset) not in skipped)


def quarantined_below(
    skipped: frozenset[tuple[int, int]], end: Mapping[int, int]
) -> dict[int, tuple[int, ...]]:
    """The quarantined offsets below ``end`` per partition, as a commit records them (empty: none)."""
    by_partition: dict[int, tuple[int, ...]] = {}
    for partition, offset in sorted(skipped):
        if offset < end.get(partition, 0):
            by_partition[partition] = (*by_partition.get(partition, ()), offset)
    return by_partition
