"""Capture positions lost for real: each alert shows in `lag`, the metrics and the rule (promtool), and
the runbook's way out, run as commands, clears it.

Postgres: with the connector stopped, the primary's WAL retention is lowered for the test
(``ALTER SYSTEM``; the stack keeps these settings out of its command line for that) and two WAL
segments are switched: the slot is ``unreserved``; a checkpoint then removes its WAL: ``lost``.
Resumed, the connector's task FAILS for real (the slot is invalidated).  ``offboard --drop-slot``
and ``onboard`` (the runbook's way out) bring a streaming connector and a new slot back.  A config
whose Kafka and replica addresses answer nothing shows the pipeline unreachable.

MariaDB: with the connector stopped, the binlogs before the one it needs are purged (near purge,
default threshold), then that one too (purged); resumed, its task FAILS; the way out is the same.
Other tests are not disturbed: Postgres retention is reset in ``finally`` (and the replica's slot is
waited for before the checkpoint), and only binlogs every live reader has passed are purged.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.bootstrap import SourceDb, mariadb_db, onboard, postgres_db, write_db_config
from support.common import cli_run, wait_until
from support.ops import alerts_everywhere

from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.serial, pytest.mark.timeout(900)]

MONITORING = {"alert_for_seconds": 0}


def _capture(config: Path) -> dict[str, Any]:
    (capture,) = json.loads(cli_run(config, "lag", "--json").stdout)["captures"]
    return dict(capture)


def _stop(connect: KafkaConnectClient, connector: str) -> None:
    connect.stop(connector)
    wait_until(lambda: connect.status(connector).state == "STOPPED", 60, f"{connector} STOPPED")


def _task_failed(connect: KafkaConnectClient, connector: str) -> str:
    """Wait until a task of ``connector`` FAILS; returns its trace."""

    def failed() -> bool:
        return any(task.state == "FAILED" for task in connect.status(connector).tasks)

    wait_until(failed, 180, f"a FAILED task of {connector}")
    return next(t.trace or "" for t in connect.status(connector).tasks if t.state == "FAILED")


def _way_out(config: Path, source: str, tmp_path: Path) -> None:
    """The runbook's way out for a lost position: a new slot/position and a streaming connector."""
    offboarded = cli_run(config, "offboard", source, "--drop-slot", "--json")
    assert offboarded.exit_code == 0, offboarded.stderr or offboarded.output
    onboard(config, source)
    firing, report, _ = alerts_everywhere(config, tmp_path)
    assert not firing & {"CdcLakeCapturePositionLost", "CdcLakeConnectorFailed"}, report["breaches"]
    assert [c["state"] for c in report["connectors"]] == ["RUNNING"]
    tables = json.loads(cli_run(config, "status", "--json").stdout)
    assert {t["state"] for t in tables} == {"PENDING_BOOTSTRAP"}, tables


@pytest.fixture
def pg(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as found:
        found.execute("create table public.items (id bigint primary key, note text not null)")
        yield found


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_postgres_slot_unreserved_then_lost_fails_the_connector(
    pg: SourceDb, local_stack: LocalStack, tmp_path: Path
) -> None:
    config = write_db_config(
        tmp_path / "cfg", pg, [{"name": "items", "tier": 1}], str(tmp_path / "lake"), monitoring=MONITORING
    )
    onboard(config, pg.source)
    slot, connector = f"cdc_lake_{pg.source}", f"cdc-lake.{pg.source}"
    labels = f'connector="{connector}",slot="{slot}",source="{pg.source}"'
    firing, report, _ = alerts_everywhere(config, tmp_path)
    assert firing == set(), report["breaches"]

    primary = local_stack.postgres_primary.connect()
    connect = KafkaConnectClient(local_stack.connect.url)
    try:
        _stop(connect, connector)
        # WAL retention of slots capped at (less than) one segment, and no extra WAL kept.
        primary.execute("alter system set max_slot_wal_keep_size = '1MB'")
        primary.execute("alter system set wal_keep_size = 0")
        primary.execute("select pg_reload_conf()")
        for round_ in range(2):
            pg.execute(f"insert into public.items values ({round_}, 'x')")
            primary.execute("select pg_switch_wal()")
        wait_until(lambda: _capture(config)["status"] == "unreserved", 60, f"slot {slot} unreserved")

        firing, report, metrics = alerts_everywhere(config, tmp_path)
        assert "CdcLakeSlotWalUnreserved" in firing, report["breaches"]
        assert f'cdc_lake_capture_status{{{labels},status="unreserved",tier="1"}} 1.0' in metrics
        human = cli_run(config, "lag")
        assert human.exit_code == 4 and "slot-wal-unreserved.md" in human.stdout, human.output

        # The replica's own slot must not be lost with it: wait until it has the current segment.
        def replica_current() -> bool:
            rows = primary.execute(
                "select wal_status from pg_replication_slots where slot_type = 'physical'"
            ).fetchall()
            return all(row[0] == "reserved" for row in rows)

        wait_until(replica_current, 60, "the replica's slot on the current WAL segment")
        primary.execute("checkpoint")
        wait_until(lambda: _capture(config)["status"] == "lost", 60, f"slot {slot} lost")

        firing, report, metrics = alerts_everywhere(config, tmp_path)
        assert "CdcLakeCapturePositionLost" in firing, report["breaches"]
        assert "CdcLakeSlotWalUnreserved" not in firing, report["breaches"]
        assert f'cdc_lake_capture_status{{{labels},status="lost",tier="1"}} 1.0' in metrics

    finally:
        primary.execute("alter system reset max_slot_wal_keep_size")
        primary.execute("alter system reset wal_keep_size")
        primary.execute("select pg_reload_conf()")
        primary.close()
        connect.close()

    _way_out(config, pg.source, tmp_path)
    assert _capture(config)["status"] == "reserved"

    # A connector task that FAILS for real: its publication dropped behind cdc-lake's back.
    publication = f"cdc_lake_{pg.source}"
    pg.execute(f'drop publication "{publication}"', "insert into public.items values (100, 'y')")
    with KafkaConnectClient(local_stack.connect.url) as connect:
        trace = _task_failed(connect, connector)
    assert "Publication autocreation is disabled" in trace, trace
    firing, report, metrics = alerts_everywhere(config, tmp_path)
    assert "CdcLakeConnectorFailed" in firing, report["breaches"]
    (row,) = report["connectors"]
    assert row["failed_tasks"] == 1, row
    assert f'cdc_lake_connector_failed_tasks{{connector="{connector}",source="{pg.source}"}} 1.0' in metrics
    # The runbook's way out: onboard re-creates what is missing and restarts the failed task.
    onboard(config, pg.source)
    firing, report, _ = alerts_everywhere(config, tmp_path)
    assert "CdcLakeConnectorFailed" not in firing, report["breaches"]

    # Kafka and the read replica unreachable (addresses where nothing listens): lag says so.
    data = yaml.safe_load(config.read_text())
    data["kafka"]["bootstrap_servers"] = f"127.0.0.1:{_closed_port()}"
    data["sources"][pg.source]["replica"]["port"] = _closed_port()
    unreachable = tmp_path / "unreachable" / "cdc-lake.yaml"
    unreachable.parent.mkdir()
    unreachable.write_text(yaml.safe_dump(data, sort_keys=False))
    firing, report, metrics = alerts_everywhere(unreachable, tmp_path)
    assert "CdcLakeUnreachable" in firing, report["breaches"]
    assert report["source_up"] == {pg.source: False}
    assert any("kafka offsets" in error for error in report["errors"]), report["errors"]
    assert f'cdc_lake_source_up{{source="{pg.source}"}} 0.0' in metrics


@pytest.fixture
def maria(local_stack: LocalStack) -> Iterator[SourceDb]:
    with mariadb_db(local_stack) as found:
        found.execute("create table items (id bigint primary key, note varchar(40) not null)")
        yield found


def _binlogs(conn: Any) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [str(row[0]) for row in cur.fetchall()]


def _purge_to(conn: Any, binlog: str) -> None:
    """``PURGE BINARY LOGS TO binlog`` (after a flush, so ``binlog`` is not the one being written)."""
    with conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("PURGE BINARY LOGS TO %s", (binlog,))


def test_mariadb_binlog_near_purge_then_purged_fails_the_connector(
    maria: SourceDb, local_stack: LocalStack, tmp_path: Path
) -> None:
    config = write_db_config(
        tmp_path / "cfg", maria, [{"name": "items", "tier": 1}], str(tmp_path / "lake"), monitoring=MONITORING
    )
    onboard(config, maria.source)
    maria.execute("insert into items values (1, 'a')")
    wait_until(lambda: _capture(config)["status"] == "retained", 90, "a committed binlog offset")
    connector = f"cdc-lake.{maria.source}"
    labels = f'connector="{connector}",slot="",source="{maria.source}"'

    # Purging binlogs is administration (BINLOG ADMIN): root, not the application user.
    primary = local_stack.mariadb_primary.root_connection()
    connect = KafkaConnectClient(local_stack.connect.url)
    try:
        _stop(connect, connector)
        # A change the stopped connector has not read: its position needs it, whatever offsets it
        # committed (a connector whose GTIDs are current resumes from the newest binlog's GTID list,
        # so purging loses nothing and nothing fails).
        maria.execute("insert into items values (2, 'b')")
        needed = str(_capture(config)["position"]).split(":", 1)[0]
        # Every binlog older than the connector's goes: the next purge takes the one it needs.
        _purge_to(primary, needed)
        assert _binlogs(primary)[0] == needed
        firing, report, metrics = alerts_everywhere(config, tmp_path)
        assert "CdcLakeBinlogNearPurge" in firing, report["breaches"]
        assert report["captures"][0]["files_ahead_of_purge"] == 0
        assert f'cdc_lake_binlog_files_ahead_of_purge{{{labels},tier="1"}} 0.0' in metrics

        def purged() -> bool:
            # MariaDB keeps a binlog a replica's dump thread still reads: purge again until it went.
            _purge_to(primary, _binlogs(primary)[-1])
            return needed not in _binlogs(primary)

        wait_until(purged, 60, f"{needed} purged")
        firing, report, metrics = alerts_everywhere(config, tmp_path)
        assert "CdcLakeCapturePositionLost" in firing, report["breaches"]
        assert "CdcLakeBinlogNearPurge" not in firing, report["breaches"]
        assert f'cdc_lake_capture_status{{{labels},status="purged",tier="1"}} 1.0' in metrics

        connect.resume(connector)
        trace = _task_failed(connect, connector)
        assert "binlog" in trace.lower(), trace
        firing, report, metrics = alerts_everywhere(config, tmp_path)
        assert "CdcLakeConnectorFailed" in firing, report["breaches"]
        assert report["connectors"][0]["failed_tasks"] == 1
    finally:
        primary.close()
        connect.close()

    _way_out(config, maria.source, tmp_path)
