"""Operating a Postgres source: each alert condition provoked on the local stack shows in `lag`,
in the metrics and in the generated rule (evaluated by promtool), and clears when restored.

Conditions are provoked cheaply, with low thresholds: a paused connector (its slot goes inactive and
retains WAL as rows are written), the replica's replay paused, the connector deleted (MISSING).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from support.bootstrap import SourceDb, onboard, postgres_db, write_db_config
from support.common import cli_run, wait_until
from support.ops import alerts_everywhere

from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.serial, pytest.mark.timeout(600)]

MONITORING = {
    "alert_for_seconds": 0,
    "replica_lag_max_bytes": 256 * 1024,
    "replica_lag_max_seconds": 3600,
    "tiers": {
        1: {
            "freshness_max_seconds": 86400,
            "kafka_lag_max_messages": 50,
            "wal_retained_max_bytes": 512 * 1024,
        },
    },
}


@pytest.fixture
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as found:
        found.execute("create table public.items (id bigint primary key, note text not null)")
        yield found


def _write_rows(db: SourceDb, start: int, count: int) -> None:
    """``count`` rows of about 200 bytes each (about 300 bytes of WAL per row)."""
    last = start + count - 1
    db.execute(f"insert into public.items select g, repeat('x', 200) from generate_series({start}, {last}) g")


def test_each_condition_shows_in_lag_metrics_and_rule(
    db: SourceDb, local_stack: LocalStack, tmp_path: Path
) -> None:
    config = write_db_config(
        tmp_path / "cfg", db, [{"name": "items", "tier": 1}], str(tmp_path / "lake"), monitoring=MONITORING
    )
    onboard(config, db.source)
    slot = f"cdc_lake_{db.source}"
    connector = f"cdc-lake.{db.source}"

    firing, report, metrics = alerts_everywhere(config, tmp_path)
    assert firing == set(), report["breaches"]
    assert (
        f'cdc_lake_slot_active{{connector="{connector}",slot="{slot}",source="{db.source}",tier="1"}} 1.0'
        in metrics
    )
    assert [c["status"] for c in report["captures"]] == ["reserved"]

    # A paused connector confirms nothing: its slot retains the WAL written meanwhile.
    assert cli_run(config, "connectors", "pause", db.source, "--json").exit_code == 0
    replica = local_stack.postgres_replica.connect()
    replica.autocommit = True
    connect = KafkaConnectClient(local_stack.connect.url)
    try:
        _write_rows(db, 1, 3000)
        firing, report, metrics = alerts_everywhere(config, tmp_path)
        assert "CdcLakeWalRetainedHigh" in firing, report["breaches"]
        (capture,) = report["captures"]
        assert capture["retained_bytes"] > 512 * 1024
        assert f'cdc_lake_slot_retained_wal_bytes{{connector="{connector}",slot="{slot}"' in metrics

        # A stopped connector (as after a Connect crash): nobody reads the slot.
        connect.stop(connector)
        _wait_inactive(config, slot)
        firing, report, metrics = alerts_everywhere(config, tmp_path)
        assert "CdcLakeSlotInactive" in firing, report["breaches"]
        assert (
            f'cdc_lake_slot_active{{connector="{connector}",slot="{slot}",source="{db.source}",tier="1"}} 0.0'
            in metrics
        )

        # The replica's replay paused while the primary writes: the replica lags.
        replica.execute("select pg_wal_replay_pause()")
        _write_rows(db, 10_001, 3000)
        firing, report, metrics = alerts_everywhere(config, tmp_path)
        assert "CdcLakeReplicaLagging" in firing, report["breaches"]
        (delay,) = report["replicas"]
        assert delay["replaying"] is False and delay["behind_bytes"] > 256 * 1024
        assert f'cdc_lake_replica_replaying{{source="{db.source}"}} 0.0' in metrics
        human = cli_run(config, "lag")
        assert human.exit_code == 4
        assert "docs/runbooks/replica-lagging.md" in human.stdout
        assert all(len(line) <= 80 for line in human.stdout.splitlines()), human.stdout
    finally:
        replica.execute("select pg_wal_replay_resume()")
        replica.close()
        connect.resume(connector)
        connect.close()

    # Resumed: the 6,000 rows reach Kafka, nobody applies them: the Kafka lag is over 50.
    wait_until(lambda: _kafka_lag(config) >= 6000, 120, "6,000 messages in the topic")
    firing, report, _ = alerts_everywhere(config, tmp_path)
    assert "CdcLakeKafkaLagHigh" in firing and "CdcLakeSlotInactive" not in firing, report["breaches"]

    # The connector deleted behind cdc-lake's back: MISSING.
    requests.delete(f"{local_stack.connect.url}/connectors/{connector}", timeout=30).raise_for_status()
    firing, report, _ = alerts_everywhere(config, tmp_path)
    assert "CdcLakeConnectorFailed" in firing, report["breaches"]
    assert [c["state"] for c in report["connectors"]] == ["MISSING"]


def _kafka_lag(config: Path) -> int:
    result = cli_run(config, "lag", "--json")
    return int(json.loads(result.stdout)["tables"][0]["kafka_lag_messages"] or 0)


def _wait_inactive(config: Path, slot: str) -> None:
    def inactive() -> bool:
        captures = json.loads(cli_run(config, "lag", "--json").stdout)["captures"]
        return any(c["slot"] == slot and c["active"] is False for c in captures)

    wait_until(inactive, 60, f"slot {slot} inactive")
