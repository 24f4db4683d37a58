"""Two writers on one table, and a retention-deleted range: the correctness cases of the apply lock.

Hudi runs single-writer.  `cdc-lake run`, `apply --once` and a bootstrap's catch-up (`bootstrap --apply`)
may all point at one table; each batch holds the table's apply lock, and each batch re-reads the table's
latest commit, so the writers take turns and never re-plan from offsets another writer has moved past.
Events are written straight to Kafka (:class:`SyntheticTopic`) so offsets are known exactly.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession
from support.apply import SyntheticTopic, lake_rows, synthetic_config

from cdc_lake.apply.runner import ApplyRunner
from cdc_lake.cli.main import cli
from cdc_lake.config import Config
from cdc_lake.exceptions import KafkaReadError
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.kafka.offsets import OffsetRange
from cdc_lake.kafka.reader import KafkaReadSettings, iter_range
from cdc_lake.lake.commit_metadata import OFFSETS_KEY
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import LockPurpose, table_lock
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def _setup(local_stack: LocalStack, tmp_path: Path) -> tuple[SyntheticTopic, Config, Path, str]:
    prefix = f"writers_{uuid.uuid4().hex[:8]}"
    topic = SyntheticTopic(local_stack, prefix)
    config_path, config = synthetic_config(local_stack, tmp_path, [topic])
    return topic, config, config_path, f"{prefix}.s.t"


def _commit_offsets(spark: SparkSession, config: Config, table: str) -> int | None:
    commit = latest_commit(spark, config.lake.table_base_path(table))
    if commit is None:
        return None
    offsets: dict[str, int] = json.loads(commit.metadata[OFFSETS_KEY])
    return offsets["0"]


def test_stale_checkpoint_another_writer_committed_between_batches(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    """`run` holding a table between batches while `apply --once` commits must not re-apply a range.

    Writer A (a `run` service, capped batches) applies offsets 0..4 and keeps its appliers; writer B (an
    `apply --once`) applies 5..10, in which row 9 is inserted and deleted.  A's next batch must start at
    11: from its cached offset 5 it would re-apply the insert of row 9 without the delete (its cap ends
    the batch before it) and move the commit offsets back from 11 to 10.
    """
    topic, config, _, table = _setup(local_stack, tmp_path)
    topic.send(
        [(topic.key(k), topic.change("c", k, f"v{k}")) for k in range(1, 6)]  # offsets 0..4
        + [(topic.key(k), topic.change("u", k, f"w{k}")) for k in range(1, 5)]  # 5..8
        + [(topic.key(9), topic.change("c", 9, "resurrected?"))]  # 9
        + [(topic.key(9), topic.change("d", 9))]  # 10
    )
    with StateStore.open(config.state_store.url) as store:
        writer_a = ApplyRunner.for_config(spark, store, config)
        writer_a.options = dataclasses.replace(writer_a.options, max_events=5)
        writer_b = ApplyRunner.for_config(spark, store, config)
        (target,) = select_targets(config)

        first = writer_a.step(target)
        assert first.error is None and first.offsets == 5
        assert _commit_offsets(spark, config, table) == 5
        second = writer_b.step(target)
        assert second.error is None and second.offsets == 6
        assert _commit_offsets(spark, config, table) == 11

        third = writer_a.step(target)

        assert third.error is None
        assert third.offsets == 0 and third.commit_instant is None
        assert _commit_offsets(spark, config, table) == 11
        assert store.get_applied_offsets(table) == {0: 11}
    rows = lake_rows(spark, config.lake.table_base_path(table))
    assert [(r["id"], r["name"]) for r in rows] == [(1, "w1"), (2, "w2"), (3, "w3"), (4, "w4"), (5, "v5")]


def test_two_writers_bootstrap_apply_waits_for_the_apply_lock(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    """`bootstrap --apply` on a CATCHING_UP table that `cdc-lake run` is applying takes turns with it.

    The test holds the table's apply lock as a running `run` does during a batch: while it is held, the
    bootstrap's catch-up must write nothing; once it is released, the catch-up applies and publishes.
    """
    topic, config, config_path, table = _setup(local_stack, tmp_path)
    topic.send([(topic.key(k), topic.change("c", k, f"v{k}")) for k in range(1, 4)])
    result: dict[str, Any] = {}

    def bootstrap_apply() -> None:
        outcome = CliRunner().invoke(cli, ["--config", str(config_path), "bootstrap", table, "--apply"])
        result["code"], result["output"] = outcome.exit_code, outcome.output

    with table_lock(config.state_store.url, LockPurpose.APPLY, table) as held:
        assert held
        worker = threading.Thread(target=bootstrap_apply, daemon=True)
        worker.start()
        time.sleep(15)
        assert worker.is_alive(), result.get("output")
        assert _commit_offsets(spark, config, table) is None, "the catch-up wrote while the lock was held"
    worker.join(timeout=600)

    assert not worker.is_alive()
    assert result["code"] == 0, result["output"]
    assert _commit_offsets(spark, config, table) == 3
    with StateStore.open(config.state_store.url) as store:
        assert store.require_table(table).state is TableState.LIVE
    assert [r["id"] for r in lake_rows(spark, config.lake.table_base_path(table))] == [1, 2, 3]


def test_kafka_retention_deleted_the_start_of_a_planned_range(local_stack: LocalStack) -> None:
    """Retention deleting a planned range's start before it is read fails the read, never reads it empty.

    librdkafka's default would reset to the end of the partition: the range would read as empty and
    the batch would commit offsets past data never read.
    """
    topic = SyntheticTopic(local_stack, f"retention_{uuid.uuid4().hex[:8]}")
    topic.send([(topic.key(k), topic.change("c", k, f"v{k}")) for k in range(10)])
    admin = AdminClient({"bootstrap.servers": local_stack.kafka.address()})
    deleted = admin.delete_records([TopicPartition(topic.topic, 0, 6)])
    for future in deleted.values():
        assert future.result(timeout=30).low_watermark == 6
    settings = KafkaReadSettings(local_stack.kafka.address(), timeout_seconds=30)

    with pytest.raises(KafkaReadError) as raised:
        list(iter_range(settings, OffsetRange(topic.topic, 0, 2, 10)))

    assert str(raised.value) == (
        f"topic '{topic.topic}' partition 0: offsets 2..9 were deleted by retention before they were read; "
        "re-bootstrap the table"
    )
    kept = list(iter_range(settings, OffsetRange(topic.topic, 0, 6, 10)))
    assert [m.offset for m in kept] == [6, 7, 8, 9]
