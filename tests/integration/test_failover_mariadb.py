"""Scenario 1, MariaDB failover: the connector follows a promoted replica and the lake loses nothing.

The stack's MariaDB pair is a primary and a GTID replica.  First the primary rotates its binlog a few
times without replicating the rotation, so its binlog numbers are above the replica's (the case that
lost data when rows were ordered by binlog coordinates).  A table is captured and applied; then the
connector is stopped (Debezium lags), more changes are committed on the primary, the replica catches up
(``MASTER_GTID_WAIT``), is promoted, and the connector is repointed at it through the Connect REST API
(``PUT /connectors/{n}/config``) and resumed while changes continue on the new primary: inserts,
updates, deletes.  The applier runs in small batches; at the end the lake equals the source, read with
Spark+Hudi and with the second reader.  Afterwards the stack's topology is restored: the old primary
catches up from the new one and becomes the primary again, and the replica follows it, read-only.
"""

from __future__ import annotations

import random
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from support.apply import (
    Capture,
    Workload,
    assert_lake_matches,
    config_dict,
    record_catching_up,
    simple_capture,
)
from support.common import write_and_load
from support.second_reader import second_reader_rows

from cdc_lake.apply.runner import ApplyRunner, TableOutcome
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.mariadb import MariaDbPrimary, MariaDbReplica
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.serial, pytest.mark.spark, pytest.mark.timeout(1200)]

ROTATIONS = 4
CATCH_UP_SECONDS = 120.0


def _binlog_number(server: MariaDbPrimary | MariaDbReplica) -> int:
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute("show master status")
        row = cur.fetchone()
    assert row, f"{server.name} has no binlog"
    return int(str(row[0]).rsplit(".", 1)[1])


def _rotate_binlog(primary: MariaDbPrimary, times: int) -> None:
    """Start new binlog files on the primary only (``NO_WRITE_TO_BINLOG``: not replicated)."""
    with primary.root_connection() as conn, conn.cursor() as cur:
        for _ in range(times):
            cur.execute("flush no_write_to_binlog binary logs")


def _restore_topology(primary: MariaDbPrimary, replica: MariaDbReplica) -> None:
    """After a failover to ``replica``: ``primary`` takes over again, ``replica`` follows it read-only."""
    primary.follow(replica)
    primary.wait_for_gtid(replica.gtid_binlog_pos(), CATCH_UP_SECONDS)
    primary.promote()
    replica.follow(primary)
    replica.wait_for_gtid(primary.gtid_binlog_pos(), CATCH_UP_SECONDS)
    assert replica.replicating(), replica.detail()


def _wait_settled(capture: Capture, at_least: int, quiet: float = 6.0, timeout: float = 180.0) -> None:
    """Wait until the topic holds ``at_least`` messages and has stopped growing for ``quiet`` seconds."""
    capture.wait_for(at_least, timeout)
    deadline = time.monotonic() + timeout
    last, since = capture.end_offset(), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, f"{capture.topic} kept growing for {timeout:.0f}s"
        time.sleep(1)
        now = capture.end_offset()
        if now != last:
            last, since = now, time.monotonic()


def _second_reader_rows(base_path: str) -> dict[int, tuple[Any, ...]]:
    """The lake table as the second reader reads it: id -> (region, amount, note, big)."""
    rows: dict[int, tuple[Any, ...]] = {}
    for row in second_reader_rows(base_path, ["id", "region", "amount", "note", "big"]):
        assert row["id"] not in rows, f"the second reader reads key {row['id']} twice"
        rows[row["id"]] = (row["region"], row["amount"], row["note"], row["big"])
    return rows


def test_failover_mariadb_promoted_replica_loses_nothing(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    primary, replica = local_stack.mariadb_primary, local_stack.mariadb_replica
    _rotate_binlog(primary, ROTATIONS)
    assert _binlog_number(primary) > _binlog_number(replica), "the old primary's binlog must be ahead"
    connect = KafkaConnectClient(local_stack.connect.url)
    seed = random.randrange(10**6)
    print(f"random seed {seed}")

    with simple_capture(local_stack, "mariadb") as capture:
        config = write_and_load(
            tmp_path / "cdc-lake.yaml",
            config_dict(
                local_stack,
                [capture],
                str(tmp_path / "lake"),
                f"sqlite:///{tmp_path}/state.db",
                apply={"batch_max_events": 25},
            ),
        )
        record_catching_up(config)
        base_path = config.lake.table_base_path(capture.qualified_name)
        workload = Workload(capture, seed)
        outcomes: list[TableOutcome] = []
        (target,) = select_targets(config)
        failed_over = False
        try:
            with StateStore.open(config.state_store.url) as store:
                runner = ApplyRunner.for_config(spark, store, config)

                def apply() -> None:
                    while True:
                        outcomes.append(runner.step(target, None))
                        assert outcomes[-1].error is None, outcomes[-1].error
                        if not outcomes[-1].offsets:
                            return

                # The lake holds rows of the old primary, ordered by its (higher) binlog numbers.
                workload.run(60)
                _wait_settled(capture, workload.messages)
                apply()

                # Debezium lags (its connector stopped): these commits reach the replica, not Kafka.
                connect.stop(capture.connector)
                time.sleep(3)
                workload.run(40)
                replica.wait_for_gtid(primary.gtid_binlog_pos(), CATCH_UP_SECONDS)
                replica.promote()
                capture.promoted = failed_over = True

                settings = connect.get_config(capture.connector)
                settings["database.port"] = str(replica.port)
                connect.create_or_update(capture.connector, settings)
                writing = threading.Thread(target=workload.run, args=(80,))
                writing.start()
                connect.resume(capture.connector)
                connect.wait_running(capture.connector, timeout=120)
                writing.join()
                workload.run(20)
                _wait_settled(capture, workload.messages)
                apply()

            assert sum(o.changes for o in outcomes) >= workload.messages // 2
            lake = assert_lake_matches(spark, capture, base_path)
            expected = {r["id"]: (r["region"], r["amount"], r["note"], r["big"]) for r in lake}
            assert all(isinstance(v[1], Decimal) or v[1] is None for v in expected.values())
            assert _second_reader_rows(base_path) == expected, "the second reader reads another table"
        finally:
            if failed_over:
                _restore_topology(primary, replica)
                capture.promoted = False
