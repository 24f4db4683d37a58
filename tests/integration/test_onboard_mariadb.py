"""``cdc-lake onboard`` / ``offboard`` against the stack's MariaDB primary and replica.

Each run gets its own database (``onb_<suffix>``), source names and server ids, and removes its
connectors, users and database at the end.  Server settings the shared stack cannot change
(``log_bin``, ``binlog_format``, ``binlog_row_image``, GTIDs, retention, a stopped replica thread)
are covered by tests/unit/test_onboard_mysql_checks.py on recorded values instead.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
import pytest
import requests
from onboard_fixtures import (
    CONNECT,
    PASSWORD_REF,
    assert_one_line_failure,
    connectors_of,
    delete_connectors,
    run,
    run_json,
    suffix,
    wait_for_keys,
    write_config,
)

from cdc_lake.config import Connection, Source
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources import engine_for
from cdc_lake.stack.manager import LocalStack

pytestmark = pytest.mark.integration


@dataclass
class MariaEnv:
    """This run's database on the stack's MariaDB primary, and the users tests created."""

    stack: LocalStack
    database: str
    suffix: str
    server_id: int
    users: list[str] = field(default_factory=list)

    def connect(self) -> pymysql.connections.Connection[Any]:
        return self.stack.mariadb_primary.connect(self.database)

    def execute(self, *statements: str) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def source(self, tables: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
        ports = self.stack.layout.ports
        primary = {"port": ports.mariadb_primary, "user": "cdc", "password": PASSWORD_REF}
        replica = {**primary, "port": ports.mariadb_replica}
        return {
            "engine": "mariadb",
            "server_id": self.server_id,
            "primary": primary,
            "replica": replica,
            "tables": [{**table, "name": f"{self.database}.{table['name']}"} for table in tables],
            **overrides,
        }

    def topic(self, source: str, table: str) -> str:
        return f"{source}.{self.database}.{table}"


@pytest.fixture(scope="module")
def maria(local_stack: LocalStack) -> Iterator[MariaEnv]:
    unique = suffix()
    env = MariaEnv(
        stack=local_stack,
        database=f"onb_{unique}",
        suffix=unique,
        server_id=random.randint(100_000, 4_000_000_000),
    )
    with local_stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"create database `{env.database}`")
    env.execute(
        "create table products (id int primary key, sku varchar(20))",
        "create table inventory (id int primary key, quantity int)",
        "create table orders (id int primary key, amount decimal(10, 2))",
        "create table nopk (x int)",
    )
    yield env
    delete_connectors(env.suffix)
    with local_stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"drop database if exists `{env.database}`")
        for user in env.users:
            cur.execute(f"drop user if exists '{user}'@'%'")


def test_onboard_streams_every_table_reruns_without_change_and_adds_tables(
    maria: MariaEnv, tmp_path: Path
) -> None:
    source = f"onb_maria_{maria.suffix}"
    shared = f"cdc-lake.{source}"
    tier0 = f"cdc-lake.{source}.tier0.{maria.database}.products"
    tables: list[dict[str, Any]] = [{"name": "products", "tier": 0}, {"name": "inventory"}]
    config = write_config(tmp_path, {source: maria.source(tables)})

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

    config = write_config(tmp_path, {source: maria.source([*tables, {"name": "orders"}])})
    written: list[int] = []
    stop = threading.Event()

    def write_inventory() -> None:
        with maria.connect() as conn, conn.cursor() as cur:
            item = 100
            while not stop.is_set():
                cur.execute("insert into inventory values (%s, 1)", (item,))
                written.append(item)
                item += 1
                time.sleep(0.1)

    writer = threading.Thread(target=write_inventory)
    writer.start()
    try:
        added = run_json(config, "onboard", source)
    finally:
        stop.set()
        writer.join()

    assert added["connectors"] == {tier0: "unchanged", shared: "updated"}
    maria.execute("insert into orders values (9, 1.25)", "insert into products values (3, 'd')")
    wait_for_keys(maria.topic(source, "orders"), {9})
    wait_for_keys(maria.topic(source, "products"), {3})
    assert len(written) > 20
    wait_for_keys(maria.topic(source, "inventory"), written)

    offboarded = run_json(config, "offboard", source)

    assert offboarded["connectors"] == {tier0: "deleted", shared: "deleted"}
    assert offboarded["warnings"] == []
    assert connectors_of(source) == []


def test_table_without_primary_key(maria: MariaEnv, tmp_path: Path) -> None:
    source = f"onb_maria_{maria.suffix}_nopk"
    config = write_config(tmp_path, {source: maria.source([{"name": "products"}, {"name": "nopk"}])})

    result = run(config, "onboard", source)

    assert_one_line_failure(
        result, f"primary keys: no primary key and no configured key: {maria.database}.nopk"
    )
    assert connectors_of(source) == []


def test_user_without_replication_grants(
    maria: MariaEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = f"onb_{maria.suffix}"
    password = f"limited-{maria.suffix}"
    maria.users.append(user)
    maria.execute(
        f"create user '{user}'@'%' identified by '{password}'",
        f"grant select on `{maria.database}`.* to '{user}'@'%'",
    )
    monkeypatch.setenv("ONB_MARIA_LIMITED_PASSWORD", password)
    source = f"onb_maria_{maria.suffix}_limited"
    definition = maria.source([{"name": "products"}])
    for side in ("primary", "replica"):
        definition[side] |= {"user": user, "password": "${ONB_MARIA_LIMITED_PASSWORD}"}
    config = write_config(tmp_path, {source: definition})

    result = run(config, "onboard", source)

    assert_one_line_failure(result, f"grants: {user}@% lacks REPLICATION SLAVE, REPLICATION CLIENT, RELOAD")
    assert password not in result.output
    assert connectors_of(source) == []


def test_wrong_password(maria: MariaEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONB_MARIA_WRONG_PASSWORD", "not-the-password")
    source = f"onb_maria_{maria.suffix}_badpw"
    definition = maria.source([{"name": "products"}])
    definition["primary"]["password"] = "${ONB_MARIA_WRONG_PASSWORD}"
    config = write_config(tmp_path, {source: definition})

    result = run(config, "onboard", source)

    assert_one_line_failure(result, "primary connection: primary 127.0.0.1:", "Access denied for user 'cdc'")
    assert "not-the-password" not in result.output
    assert connectors_of(source) == []


def test_server_id_of_the_primary(maria: MariaEnv, tmp_path: Path) -> None:
    source = f"onb_maria_{maria.suffix}_sid"
    config = write_config(tmp_path, {source: maria.source([{"name": "products"}], server_id=1)})

    assert_one_line_failure(run(config, "onboard", source), "server id: already used by 1 (the primary)")
    assert connectors_of(source) == []


def test_table_missing_from_the_database(maria: MariaEnv, tmp_path: Path) -> None:
    source = f"onb_maria_{maria.suffix}_missing"
    config = write_config(tmp_path, {source: maria.source([{"name": "ghost"}])})

    assert_one_line_failure(
        run(config, "onboard", source), f"tables: not found, or not visible to cdc@%: {maria.database}.ghost"
    )
    assert connectors_of(source) == []


@pytest.mark.parametrize(
    ("replica_port", "detail"),
    [
        (1, "replica: 127.0.0.1:1: cannot connect as cdc:"),
        (None, "replicates from nowhere (no replication status)"),
    ],
)
def test_replica_unreachable_or_not_a_replica(
    maria: MariaEnv, tmp_path: Path, replica_port: int | None, detail: str
) -> None:
    source = f"onb_maria_{maria.suffix}_replica{replica_port or 0}"
    definition = maria.source([{"name": "products"}])
    definition["replica"]["port"] = replica_port or maria.stack.layout.ports.mariadb_primary
    config = write_config(tmp_path, {source: definition})

    assert_one_line_failure(run(config, "onboard", source), detail)
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
