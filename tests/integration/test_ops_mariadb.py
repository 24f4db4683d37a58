"""Operating a MariaDB source: the connector's binlog position against the binlogs kept, the replica's
SQL thread, in `lag`, the metrics and the rules (evaluated by promtool).

"Near purge" is provoked with a threshold (`binlog_min_files_ahead` above the number of binlogs the
primary keeps) rather than by purging binlogs the other tests' connectors need.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.bootstrap import SourceDb, mariadb_db, onboard, write_db_config
from support.common import cli_run
from support.ops import alerts_everywhere

from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.serial, pytest.mark.timeout(600)]


@pytest.fixture
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with mariadb_db(local_stack) as found:
        found.execute("create table items (id bigint primary key, note varchar(40) not null)")
        yield found


def _captures(config: Path) -> list[dict[str, object]]:
    return list(json.loads(cli_run(config, "lag", "--json").stdout)["captures"])


def test_binlog_position_and_replica_show_in_lag_metrics_and_rule(
    db: SourceDb, local_stack: LocalStack, tmp_path: Path
) -> None:
    config = write_db_config(
        tmp_path / "cfg",
        db,
        [{"name": "items", "tier": 1}],
        str(tmp_path / "lake"),
        monitoring={"alert_for_seconds": 0, "binlog_min_files_ahead": 0},
    )
    onboard(config, db.source)
    db.execute("insert into items values (1, 'a')")
    deadline = time.monotonic() + 90
    while _captures(config)[0]["status"] == "unknown":
        assert time.monotonic() < deadline, "the connector committed no binlog offset"
        time.sleep(2)

    firing, report, metrics = alerts_everywhere(config, tmp_path)
    assert firing == set(), report["breaches"]
    (capture,) = report["captures"]
    assert capture["status"] == "retained" and capture["files_ahead_of_purge"] >= 0
    assert ":" in str(capture["position"]) and capture["retained_bytes"] is not None
    connector = f"cdc-lake.{db.source}"
    assert (
        f'cdc_lake_binlog_files_ahead_of_purge{{connector="{connector}",slot="",source="{db.source}"'
        in metrics
    )

    near = write_db_config(
        tmp_path / "near",
        db,
        [{"name": "items", "tier": 1}],
        str(tmp_path / "lake"),
        monitoring={"alert_for_seconds": 0, "binlog_min_files_ahead": 10_000},
    )
    near_state = tmp_path / "near" / "state.db"
    near_state.write_bytes((tmp_path / "cfg" / "state.db").read_bytes())
    firing, report, _ = alerts_everywhere(near, tmp_path)
    assert "CdcLakeBinlogNearPurge" in firing, report["breaches"]

    # Stopping replication is administration (REPLICATION SLAVE ADMIN): root, not the application user.
    replica = local_stack.mariadb_replica.root_connection()
    try:
        with replica.cursor() as cur:
            cur.execute("STOP SLAVE SQL_THREAD")
        firing, report, metrics = alerts_everywhere(config, tmp_path)
        assert "CdcLakeReplicaLagging" in firing, report["breaches"]
        assert report["replicas"][0]["replaying"] is False
        assert f'cdc_lake_replica_replaying{{source="{db.source}"}} 0.0' in metrics
    finally:
        with replica.cursor() as cur:
            cur.execute("START SLAVE SQL_THREAD")
        replica.close()
