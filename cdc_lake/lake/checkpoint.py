"""Where a table's apply resumes: the Kafka offsets stored in its last completed Hudi commit.

Every apply commit carries, in its extra metadata (:class:`~cdc_lake.lake.commit_metadata.CommitMetadata`),
the topic and the next offset to apply per partition (HoodieStreamer's checkpoint idea): the data and the
offsets become durable in one atomic commit, so a crash at any point resumes exactly after the last
completed commit.  An inflight commit is invisible here and Hudi rolls it back on the next write.
Before the first apply commit the offsets come from the bootstrap's saved watermark, and a table never
bootstrapped starts at the beginning of its topic.  The state store's applied offsets are only a copy
for ``status``.

The offsets name every partition the topic had when the checkpoint was taken (a plan covers every
partition, empty ones included, and so does the bootstrap's watermark), so they are also the partition
set the table was applied with; with them the commit stores the topic's Kafka id, so that a plan can tell
the topic it applied from one deleted and created again under its name
(:func:`cdc_lake.apply.plan.plan_batch`).  Commits of earlier versions have no id: the next commit
records it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.lake.commit_metadata import CommitMetadata, MalformedCommitMetadata
from cdc_lake.lake.format import CommitInfo
from cdc_lake.state import TableState
from cdc_lake.state.store import StateStore

_BOOTSTRAPPED = frozenset({TableState.CATCHING_UP, TableState.LIVE})
"""States a bootstrap leaves only after its commits exist."""


class Origin(enum.StrEnum):
    """Where a checkpoint came from."""

    COMMIT = "lake commit"
    WATERMARK = "bootstrap watermark"
    TOPIC_START = "topic start"


@dataclass(frozen=True)
class Checkpoint:
    """The next offset to apply per partition of ``topic``, and the newest source time applied so far.

    ``positions`` holds, per partition, the highest Debezium stream position applied (see
    :mod:`cdc_lake.apply.redelivery`); events strictly below it were sent again and are skipped.
    ``topic_id`` is the Kafka id of the topic the offsets belong to (None: not known).
    """

    topic: str
    offsets: dict[int, int]
    newest_source_ts_ms: int | None
    origin: Origin
    commit_instant: str | None = None
    positions: dict[int, str] = field(default_factory=dict)
    topic_id: str | None = None

    def metadata(self) -> CommitMetadata:
        """The commit metadata that stores this checkpoint in a commit (the other fields empty)."""
        return CommitMetadata(
            topic=self.topic,
            offsets=dict(self.offsets),
            newest_source_ts_ms=self.newest_source_ts_ms,
            positions=dict(self.positions),
            topic_id=self.topic_id,
        )


def checkpoint_from_commit(commit: CommitInfo, topic: str, where: str) -> Checkpoint | None:
    """The checkpoint stored in ``commit``, or None when it carries no offsets (a bootstrap commit).

    Raises LakeWriteError when the offsets belong to another topic or cannot be parsed.
    """
    try:
        stored = CommitMetadata.from_dict(commit.metadata)
    except MalformedCommitMetadata as exc:
        raise LakeWriteError(f"{where}: commit {commit.instant} has {exc}") from exc
    if stored.offsets is None:
        return None
    stored_topic = topic if stored.topic is None else stored.topic
    if stored_topic != topic:
        raise LakeWriteError(
            f"{where}: commit {commit.instant} holds offsets of topic {stored_topic!r}, not {topic!r}"
        )
    return Checkpoint(
        topic,
        dict(stored.offsets),
        stored.newest_source_ts_ms,
        Origin.COMMIT,
        commit.instant,
        dict(stored.positions),
        stored.topic_id,
    )


def resume_checkpoint(
    base_path: str,
    topic: str,
    table: str,
    store: StateStore | None,
    commit: CommitInfo | None,
) -> Checkpoint:
    """Where ``table`` resumes: its last completed commit's offsets, else its bootstrap watermark, else 0.

    ``commit`` is the table's latest completed data commit
    (:meth:`cdc_lake.lake.format.LakeFormat.latest_commit`; None when it has none).  A table with commits
    but no offsets in them (a bootstrap's bulk insert) needs the watermark.
    """
    where = f"table {table} at {base_path}"
    if commit is not None:
        stored = checkpoint_from_commit(commit, topic, where)
        if stored is not None:
            return stored
    watermark = store.get_watermark(table) if store is not None else None
    if watermark is not None:
        record = store.get_table(table) if store is not None and commit is None else None
        if record is not None and record.state in _BOOTSTRAPPED:
            # Every bootstrap group is a commit: a bootstrapped table without one lost its copy (e.g.
            # rebootstrap --abort killed after removing it), and the watermark would rebuild it from
            # the later changes alone.
            raise LakeWriteError(
                f"{where}: the table was bootstrapped ({record.state.value}) but its lake path holds no "
                f"lake commit: the copy is gone; run cdc-lake rebootstrap {table}"
            )
        if watermark.topic != topic:
            raise LakeWriteError(
                f"{where}: the bootstrap watermark is for topic {watermark.topic!r}, not {topic!r}"
            )
        offsets, source_ts = dict(watermark.offsets), watermark.ts_source_ms
        return Checkpoint(topic, offsets, source_ts, Origin.WATERMARK, topic_id=watermark.topic_id)
    if commit is not None:
        raise LakeWriteError(
            f"{where}: the lake table has commits but neither they nor a bootstrap watermark hold "
            "Kafka offsets; re-bootstrap the table"
        )
    return Checkpoint(topic, {}, None, Origin.TOPIC_START)
