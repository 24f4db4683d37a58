"""Re-sent Debezium events never regress a row: a Connect restart mid-stream and a re-sent suffix.

While changes stream, the connector and its task are restarted through the Connect REST API.  Then the
last messages of the topic are produced again, byte for byte, which is what a Connect worker crash
leaves in Kafka (the task re-sends everything after its last committed source offset), and more changes
follow.  The applier runs in small batches; after every batch no row may show an older ordering value
than it showed before, and no deleted row may come back with one.  At the end the lake equals the source.
CI runs reduced sizes; ``benchmarks/fault_bench.py`` runs the full size (``--changes``, ``--resent``).
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession
from support.apply import (
    Capture,
    Workload,
    assert_lake_matches,
    fault_size,
    lake_rows,
    per_engine_capture,
    record_catching_up,
    workload_config,
)

from cdc_lake.apply.runner import ApplyRunner, TableOutcome
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.kafka.offsets import OffsetRange, read_ranges
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1200)]

RESENT = fault_size("RESENT", 20)
"""The topic's last messages produced again: more than one batch of 15, so they span batches."""
CHANGES = fault_size("CHANGES", 60)
"""Source changes: a third before the Connect restart, half streaming across it, the rest after the
re-sent suffix."""

capture = per_engine_capture()


def _resend_suffix(capture: Capture, count: int) -> int:
    """Produce the topic's last ``count`` messages again, unchanged; returns how many were produced."""
    bootstrap = capture.stack.kafka.address()
    end = capture.end_offset()
    messages = read_ranges(bootstrap, [OffsetRange(capture.topic, 0, end - count, end)])
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for message in messages:
        producer.produce(capture.topic, key=message.key(), value=message.value(), partition=0)
    assert producer.flush(30) == 0
    return len(messages)


class RegressionWatch:
    """Remembers each key's ordering value across lake snapshots and fails on any step back."""

    def __init__(self) -> None:
        self.seen: dict[Any, str] = {}
        self.present: set[Any] = set()

    def check(self, rows: list[dict[str, Any]], batch: int) -> None:
        """Compare a new snapshot of the lake with everything seen before."""
        now = {row["id"]: row["_cdc_ordering"] for row in rows}
        for key, ordering in now.items():
            last = self.seen.get(key)
            if last is None:
                continue
            if key in self.present:
                assert ordering >= last, f"batch {batch}: key {key} went back from {last} to {ordering}"
            else:
                assert ordering > last, (
                    f"batch {batch}: deleted key {key} came back with old ordering {ordering}"
                )
        self.seen.update(now)
        self.present = set(now)


def test_resent_events_do_not_regress_any_row(
    spark: SparkSession, capture: Capture, local_stack: LocalStack, tmp_path: Path
) -> None:
    seed = random.randrange(10**6)
    print(f"random seed {seed}")
    config = workload_config(tmp_path / "cdc-lake.yaml", local_stack, capture, batch_max_events=15)
    record_catching_up(config)
    workload = Workload(capture, seed)
    workload.run(CHANGES // 3)

    streaming = threading.Thread(target=workload.run, args=(CHANGES // 2,))
    streaming.start()
    KafkaConnectClient(local_stack.connect.url).restart(
        capture.connector, include_tasks=True, only_failed=False
    )
    streaming.join()
    capture.wait_for(workload.messages)
    resent = _resend_suffix(capture, RESENT)
    workload.run(CHANGES - CHANGES // 3 - CHANGES // 2)

    capture.wait_for(workload.messages + resent)

    base_path = config.lake.table_base_path(capture.qualified_name)
    watch = RegressionWatch()
    outcomes: list[TableOutcome] = []
    (target,) = select_targets(config)
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config)

        def apply(limit: int | None = None) -> None:
            """Apply batches (up to ``limit``), checking the lake after each commit."""
            while True:
                outcomes.append(runner.step(target, None if limit is None else {0: limit}))
                assert outcomes[-1].error is None
                if outcomes[-1].commit_instant:
                    watch.check(lake_rows(spark, base_path), len(outcomes))
                if not outcomes[-1].offsets:
                    return

        apply()
        assert len(outcomes) > (workload.messages + resent) // 15

        # A key inserted, updated and deleted; the four messages (c, u, d, tombstone) re-sent; then one
        # batch holding only the re-sent insert and update: replayed, they would bring the row back.
        key = 10**6
        capture.execute(
            (f"insert into {workload.table} values (%s, 'eu', 1.00, 'k', 'k')", [key]),
            (f"update {workload.table} set note = 'k2' where id = %s", [key]),
            (f"delete from {workload.table} where id = %s", [key]),
        )
        capture.wait_for(workload.messages + resent + 4)
        originals_end = capture.end_offset()
        apply(originals_end)
        resent += _resend_suffix(capture, 4)
        capture.wait_for(originals_end + 4)
        apply(originals_end + 2)
        # MariaDB orders rows by Kafka offset, so a replayed insert would carry a new, higher ordering
        # value and pass the watch: check the deleted row directly.
        assert key not in {row["id"] for row in lake_rows(spark, base_path)}, "a re-sent insert came back"
        apply()

    assert sum(o.redelivered for o in outcomes) >= 2, "the re-sent events were not recognised"
    assert key not in {row["id"] for row in lake_rows(spark, base_path)}
    assert_lake_matches(spark, capture, base_path)
