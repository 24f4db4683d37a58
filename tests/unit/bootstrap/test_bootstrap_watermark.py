"""The watermark's topic id: measured with its end offsets, and carried by every bootstrap commit.

Issue 34 review 7: the watermark's offsets are of the topic it measured.  A topic deleted and created
again under its name has a new Kafka id and offsets that start over, so the id is measured with them
and stored (migration 0009); the hand-off compares it (test_bootstrap_handoff.py), and so does the
applier's first batch, which resumes from the bootstrap's commits (:mod:`cdc_lake.apply.plan`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from cdc_lake.apply.plan import plan_batch
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.exceptions import KafkaReadError
from cdc_lake.kafka.offsets import TopicState
from cdc_lake.lake.checkpoint import Origin, checkpoint_from_commit, resume_checkpoint
from cdc_lake.lake.format import CommitInfo
from cdc_lake.sources.snapshot import SnapshotSource
from cdc_lake.state import StateStore, TableState
from cdc_lake.state.records import Watermark
from cdc_lake_bootstrap import watermark as step
from cdc_lake_bootstrap.write import group_metadata

TOPIC = "pg.public.orders"
SAVED_ID = "AAAAAAdbzRUAAAAAOt5osQ"
NEW_ID = "BBBBBBdbzRUAAAAAOt5osQ"


class _Primary:
    """The primary's position and clock, as the watermark reads them after the offsets."""

    def current_position(self) -> str:
        return "0/16B3748"

    def primary_clock_ms(self) -> int:
        return 1_700_000_000_000


def test_the_watermark_measures_the_topic_id_with_its_end_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    def states(servers: str, topics: Iterable[str], extra: Mapping[str, str] | None = None) -> dict[str, Any]:
        return {topic: TopicState(SAVED_ID, {0: (3, 3), 1: (0, 0)}) for topic in topics}

    monkeypatch.setattr(step, "topic_states", states)
    engine = cast(SnapshotSource, _Primary())

    point = step.take_watermark("kafka:9092", TOPIC, engine, cast(SchemaRegistry, None))

    assert (point.offsets, point.topic_id, point.wait_position) == ({0: 3, 1: 0}, SAVED_ID, "0/16B3748")


def _watermark(topic_id: str | None) -> Watermark:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    return Watermark("pg.public.orders", TOPIC, {0: 40}, 1, "0/1", created, True, (), topic_id=topic_id)


def test_every_bootstrap_commit_carries_the_topic_id_so_the_first_batch_refuses_another_topic() -> None:
    metadata = group_metadata(_watermark(SAVED_ID), [0, 1], {}).to_dict()
    commit = CommitInfo("20260101000000000", "commit", None, "BULK_INSERT", metadata)
    checkpoint = checkpoint_from_commit(commit, TOPIC, "table pg.public.orders")

    assert checkpoint is not None and checkpoint.topic_id == SAVED_ID
    with pytest.raises(KafkaReadError, match=f"topic id {SAVED_ID}, now {NEW_ID}"):
        plan_batch("pg.public.orders", checkpoint, TopicState(NEW_ID, {0: (0, 90)}), 1000)
    assert "kafka.topic_id" not in group_metadata(_watermark(None), [0], {}).to_dict()


def test_a_table_resumed_from_its_watermark_alone_carries_the_topic_id(tmp_path: Path) -> None:
    with StateStore.open(f"sqlite:///{tmp_path}/state.db") as store:
        store.upsert_source("pg", "postgres", [])
        store.upsert_table("pg.public.orders", "pg", 1, f"{tmp_path}/lake")
        store.transition("pg.public.orders", TableState.BOOTSTRAPPING)
        store.save_watermark(
            "pg.public.orders", topic=TOPIC, offsets={0: 40}, ts_source_ms=1, source_position=None,
            topic_id=SAVED_ID,
        )  # fmt: skip
        checkpoint = resume_checkpoint(f"{tmp_path}/lake", TOPIC, "pg.public.orders", store, None)

    assert checkpoint.origin is Origin.WATERMARK
    assert (checkpoint.offsets, checkpoint.topic_id) == ({0: 40}, SAVED_ID)
