"""The ``run`` service over many onboarded tables across tiers, few of them busy (CI-sized).

``benchmarks/scale_bench.py many`` runs the same at 200 tables with 10 busy and reports cycle time and
memory; here 40 tables, 2 busy: every busy table catches up, idle tables start no Spark job, and the
end offsets of all due tables are read in batches (far fewer Kafka reads than table steps).
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from support.apply import SyntheticTopic, config_dict, record_catching_up
from support.common import wait_until, write_and_load

from cdc_lake.apply.commands import service_for
from cdc_lake.apply.runner import TableOutcome
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1200)]

TABLES = 40
BUSY = 2
CHANGES = 30


def test_many_tables_few_busy_apply_in_one_cycle_without_spark_for_idle_ones(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    topics = [SyntheticTopic(local_stack, f"many_{run}_{i:03d}") for i in range(TABLES)]
    busy, idle = topics[:BUSY], topics[BUSY:]
    admin = AdminClient({"bootstrap.servers": local_stack.kafka.address()})
    for future in admin.create_topics([NewTopic(t.topic, 1, 1) for t in idle]).values():
        future.result()
    for topic in busy:
        topic.send([(topic.key(k), topic.change("c", k, f"row {k}")) for k in range(CHANGES)])
    tiers = {f"{t.prefix}.s.t": {"tier": 0 if t in busy else 1 + i % 2} for i, t in enumerate(topics)}
    data = config_dict(
        local_stack, [], str(tmp_path / "lake"), f"sqlite:///{tmp_path}/state.db", synthetic=topics
    )
    for source in data["sources"].values():
        source["tables"][0].update(tiers[f"{source['topic_prefix']}.s.t"])
    config = write_and_load(tmp_path / "cdc-lake.yaml", data)
    record_catching_up(config)
    targets = select_targets(config, (), None)
    assert len(targets) == TABLES

    outcomes: list[TableOutcome] = []
    with StateStore.open(config.state_store.url) as store:
        service = service_for(config, store, targets, workers=4, poll_seconds=1.0)
        thread = threading.Thread(target=service.run, args=(outcomes.append,), daemon=True)
        began = time.monotonic()
        thread.start()
        try:
            wait_until(
                lambda: all(
                    sum(store.get_applied_offsets(f"{t.prefix}.s.t").values()) == CHANGES for t in busy
                ),
                600,
                "every busy table applied",
            )
            cycle = time.monotonic() - began
            seen = {o.table for o in list(outcomes)}
            wait_until(lambda: {o.table for o in list(outcomes)} >= {t.qualified_name for t in targets},
                       120, "every table stepped once")
        finally:
            service.stop()
            thread.join(120)
        assert not thread.is_alive()
        states = {t.qualified_name: store.require_table(t.qualified_name).state for t in targets}

    print(f"{TABLES} tables, {BUSY} busy: cycle {cycle:.1f}s, {len(seen)} tables stepped by then")
    assert not [o for o in outcomes if o.failed]
    tracker = spark.sparkContext.statusTracker()
    for topic in idle:
        name = f"{topic.prefix}.s.t"
        assert tracker.getJobIdsForGroup(name) == [], f"idle table {name} started a Spark job"
        assert states[name] is TableState.LIVE, f"{name}: an idle, caught-up table is published"
    for topic in busy:
        assert tracker.getJobIdsForGroup(f"{topic.prefix}.s.t"), "a busy table's batch runs in Spark"
    board = service.board
    assert board is not None
    idle_steps = sum(1 for o in outcomes if o.table in {f"{t.prefix}.s.t" for t in idle})
    assert idle_steps >= len(idle)
    assert board.served >= idle_steps, (
        f"{board.served} of {len(outcomes)} table steps planned from batched offset reads "
        f"({board.requests} reads); every idle table's step should be"
    )
