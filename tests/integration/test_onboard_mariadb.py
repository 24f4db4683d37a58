"""``cdc-lake onboard`` / ``offboard`` against the stack's MariaDB primary and replica.

Each run gets its own database (``onb_<suffix>``, support.engines.maria_env), source names and server
ids, and removes its connectors, users and database at the end.  The refusals every engine gives (no
primary key, a wrong password, a missing table, a replica that is unreachable or is the primary) are in
test_onboard_behaviors.py.  Server settings the shared stack cannot change
(``log_bin``, ``binlog_format``, ``binlog_row_image``, GTIDs, retention, a stopped replica thread)
are covered by tests/unit/sources/test_onboard_mysql_checks.py on recorded values instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from support.common import assert_one_line_failure, cli_run, run_json, write_config_in
from support.engines import MariaEnv, maria_env
from support.onboard import CONNECT, connectors_of, onboard_while_writing, wait_for_keys

from cdc_lake.config import Connection, Source
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources import engine_for
from cdc_lake.stack.manager import LocalStack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def maria(local_stack: LocalStack) -> Iterator[MariaEnv]:
    with maria_env(local_stack) as env:
        yield env


def test_onboard_streams_every_table_reruns_without_change_and_adds_tables(
    maria: MariaEnv, tmp_path: Path
) -> None:
    source = f"onb_maria_{maria.suffix}"
    shared = f"cdc-lake.{source}"
    tier0 = f"cdc-lake.{source}.tier0.{maria.database}.products"
    tables: list[dict[str, Any]] = [
        {"name": maria.name("products"), "tier": 0},
        {"name": maria.name("inventory")},
    ]
    config = write_config_in(tmp_path, {source: maria.source(tables)})

    first = run_json(config, "onboard", source)

    assert first["connectors"] == {tier0: "created", shared: "created"}
    configs = {
        name: requests.get(f"{CONNECT}/connectors/{name}/config", timeout=10).json()
        for name in (tier0, shared)
    }
    assert configs[shared]["database.server.id"] == str(maria.server_id)
    assert configs[tier0]["database.server.id"] not in (str(maria.server_id), "1", "2")
    assert configs[tier0]["table.include.list"] == f"{maria.database}\\.products"
    maria.execute(
        "insert into products values (1, 'a'), (2, 'b')",
        "update products set sku = 'c' where id = 1",
        "delete from products where id = 2",
        "insert into inventory values (5, 10)",
    )
    wait_for_keys(maria.topic(source, "products"), {1, 2})
    wait_for_keys(maria.topic(source, "inventory"), {5})
    statuses = {row["name"]: row["state"] for row in run_json(config, "status")}
    assert set(statuses.values()) == {"PENDING_BOOTSTRAP"}

    again = run_json(config, "onboard", source)

    assert again["connectors"] == {tier0: "unchanged", shared: "unchanged"}
    assert again["actions"] == []
    assert {
        name: requests.get(f"{CONNECT}/connectors/{name}/config", timeout=10).json() for name in configs
    } == configs

    config = write_config_in(tmp_path, {source: maria.source([*tables, {"name": maria.name("orders")}])})
    added, written = onboard_while_writing(
        config, source, lambda key: maria.execute(f"insert into inventory values ({key}, 1)")
    )

    assert added["connectors"] == {tier0: "unchanged", shared: "updated"}
    maria.execute("insert into orders values (9, 1.25)", "insert into products values (3, 'd')")
    wait_for_keys(maria.topic(source, "orders"), {9})
    wait_for_keys(maria.topic(source, "products"), {3})
    wait_for_keys(maria.topic(source, "inventory"), written)

    offboarded = run_json(config, "offboard", source)

    assert offboarded["connectors"] == {tier0: "deleted", shared: "deleted"}
    assert offboarded["warnings"] == []
    assert connectors_of(source) == []


def test_user_without_replication_grants(
    maria: MariaEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = f"onb_{maria.suffix}"
    password = f"limited-{maria.suffix}"
    maria.users.append(user)
    maria.administer(
        f"create user '{user}'@'%' identified by '{password}'",
        f"grant select on `{maria.database}`.* to '{user}'@'%'",
    )
    monkeypatch.setenv("ONB_MARIA_LIMITED_PASSWORD", password)
    source = f"onb_maria_{maria.suffix}_limited"
    definition = maria.source([{"name": maria.name("products")}])
    for side in ("primary", "replica"):
        definition[side] |= {"user": user, "password": "${ONB_MARIA_LIMITED_PASSWORD}"}
    config = write_config_in(tmp_path, {source: definition})

    result = cli_run(config, "onboard", source)

    assert_one_line_failure(result, f"grants: {user}@% lacks REPLICATION SLAVE, REPLICATION CLIENT, RELOAD")
    assert password not in result.output
    assert connectors_of(source) == []


def test_server_id_of_the_primary(maria: MariaEnv, tmp_path: Path) -> None:
    source = f"onb_maria_{maria.suffix}_sid"
    config = write_config_in(
        tmp_path, {source: maria.source([{"name": maria.name("products")}], server_id=1)}
    )

    assert_one_line_failure(cli_run(config, "onboard", source), "server id: already used by 1 (the primary)")
    assert connectors_of(source) == []


def test_server_ids_warn_when_the_user_may_not_list_replicas(maria: MariaEnv, tmp_path: Path) -> None:
    """The stack's ``cdc`` user lacks REPLICATION MASTER ADMIN (least privilege, docs/security.md), so
    the primary refuses SHOW SLAVE HOSTS: the server-id check says what it could not compare."""
    source = f"onb_maria_{maria.suffix}_hosts"
    config = write_config_in(tmp_path, {source: maria.source([{"name": maria.name("products")}])})

    dry = run_json(config, "onboard", source, "--dry-run")

    [server_id] = [check for check in dry["checks"] if check["check"] == "server id"]
    assert server_id["outcome"] == "warn", server_id
    assert "replicas registered with the primary not checked: SHOW SLAVE HOSTS refused" in server_id["detail"]
    assert "GRANT REPLICATION MASTER ADMIN" in server_id["fix"]
    assert connectors_of(source) == []


def test_positions_of_the_primary_and_the_replica(maria: MariaEnv) -> None:
    ports = maria.stack.layout.ports
    password = maria.stack.layout.credentials.db_password
    primary = Connection(port=ports.mariadb_primary, user="cdc", password=password)
    source = Source(
        name="onb_positions",
        engine="mariadb",
        server_id=maria.server_id,
        primary=primary,
        replica=primary.model_copy(update={"port": ports.mariadb_replica}),
    )
    engine = engine_for(source)
    maria.execute("insert into orders values (9000, 9.99)")

    position = engine.current_position()
    reached = engine.wait_replica_past(position, timeout=60)

    domain, server, sequence = position.split(",")[0].split("-")
    assert int(reached.split(",")[0].split("-")[2]) >= int(sequence)
    with pytest.raises(SourceEngineError, match=rf"not {domain}-{server}-999999999, after 1s"):
        engine.wait_replica_past(f"{domain}-{server}-999999999", timeout=1)


def test_a_table_added_after_a_ddl_and_a_quiet_spell_loses_no_change_of_a_streaming_table(
    maria: MariaEnv, tmp_path: Path
) -> None:
    """Debezium's MariaDB reader takes every GTID event for a transaction's start, a standalone DDL's
    too, and then counts each server heartbeat as an event of that "transaction" to skip on restart.
    A connector restarted from such an offset (here: the update onboarding a table makes) skipped the
    first transactions it read after the DDL, changes of streaming tables included."""
    source = f"onb_maria_{maria.suffix}_ddl"
    inventory = maria.topic(source, "inventory")
    config = write_config_in(tmp_path, {source: maria.source([{"name": maria.name("inventory")}])})
    run_json(config, "onboard", source)
    maria.execute("insert into inventory values (1001, 1)")
    wait_for_keys(inventory, {1001})
    maria.execute("create table added_later (id int primary key, note varchar(10))")
    time.sleep(12)  # server heartbeats every 0.8 s, Debezium's heartbeat records every 2 s
    maria.execute("insert into added_later values (1, 'a')")  # not captured yet: no record
    config = write_config_in(
        tmp_path,
        {source: maria.source([{"name": maria.name("inventory")}, {"name": maria.name("added_later")}])},
    )

    added = run_json(config, "onboard", source)

    assert added["connectors"] == {f"cdc-lake.{source}": "updated"}
    written = list(range(1002, 1012))
    for key in written:
        maria.execute(f"insert into inventory values ({key}, 1)")
    wait_for_keys(inventory, written, timeout=60)
    run_json(config, "offboard", source)
