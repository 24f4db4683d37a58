"""cdc-lake's Kafka clients against the broker's SASL/SCRAM-SHA-512 over TLS listener.

The config points ``kafka.bootstrap_servers`` at the secured listener only and gives the security
settings once in ``kafka.consumer``: a client created without them cannot talk to that listener, so
onboarding (the heartbeat check), the bootstrap (watermarks, the newest-event read), the applier
(executor range reads, end offsets) and `lag` all working proves every client got them.  Debezium
writes through Connect's own (plaintext) listener; the MySQL/MariaDB connector's schema-history
clients use the secured one with ``kafka.connector_clients`` (the password as ``${env:…}``,
resolved by the Connect worker).  A wrong password fails in one line and creates
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    mariadb_db,
    postgres_db,
    state_of,
    write_db_config,
)
from support.common import cli_run, load
from support.onboard import connectors_of

from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ROWS = ", ".join(f"({i}, 'v{i}', {i})" for i in range(1, 61))
ITEMS = (
    "create table {name} (id bigint primary key, val text, n integer)",
    "insert into {name} values " + ROWS,
)


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


@pytest.fixture(scope="module")
def maria(local_stack: LocalStack) -> Iterator[SourceDb]:
    with mariadb_db(local_stack) as created:
        yield created


def _secured_kafka(local_stack: LocalStack, **override: str) -> dict[str, Any]:
    settings = {**local_stack.kafka.secure_client_settings(), **override}
    return {
        "bootstrap_servers": local_stack.kafka.secure_address(),
        "consumer": settings,
        # Debezium's MySQL/MariaDB schema-history clients reach the same listener (Java settings).
        "connector_clients": local_stack.kafka.secure_connector_client_settings(),
    }


def test_wrong_password_fails_in_one_line_and_creates_nothing(
    local_stack: LocalStack, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(*(statement.format(name="refused") for statement in ITEMS))
    kafka = _secured_kafka(local_stack, **{"sasl.password": "not-the-password"})
    config_path = write_db_config(tmp_path, db, [{"name": "refused"}], str(tmp_path / "lake"), kafka=kafka)

    result = cli_run(config_path, "onboard", db.source)

    assert result.exit_code != 0, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "refused the connection" in result.stderr and "SASL authentication" in result.stderr, result.stderr
    assert "not-the-password" not in result.stderr + result.output
    assert connectors_of(db.source) == []


@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_onboard_bootstrap_apply_lag_over_sasl_ssl_end_equal(
    spark: SparkSession, local_stack: LocalStack, request: pytest.FixtureRequest, tmp_path: Path, engine: str
) -> None:
    db: SourceDb = request.getfixturevalue("db" if engine == "postgres" else "maria")
    db.execute(*(statement.format(name="items") for statement in ITEMS))
    kafka = _secured_kafka(local_stack)
    config_path = write_db_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"), kafka=kafka)
    config = load(config_path)
    table = db.qualified("items")

    onboarded = cli_run(config_path, "onboard", db.source)
    assert onboarded.exit_code == 0, onboarded.stderr or onboarded.output
    bootstrapped = cli_run(config_path, "bootstrap", table, "--json")
    assert bootstrapped.exit_code == 0, bootstrapped.stderr
    assert json.loads(bootstrapped.stdout)[0]["state"] == "CATCHING_UP"
    db.execute(
        "update items set val = 'changed' where id <= 15",
        "delete from items where id between 30 and 35",
        "insert into items values (200, 'new', 200)",
    )
    apply_until_live(spark, config, table)
    assert state_of(config, table) is TableState.LIVE
    lag = cli_run(config_path, "lag", "--json")
    assert lag.exit_code in (0, 4), lag.stderr
    assert table in lag.stdout
    assert assert_lake_equals_source(spark, config, db, "items") == 55
