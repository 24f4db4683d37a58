"""``cdc-lake onboard`` / ``offboard`` / ``connectors`` against the stack's Postgres, Connect and Kafka.

Each run gets its own database (``onb_<suffix>``, support.engines.pg_env) and source names, and removes
its connectors, slots, roles and database at the end.  The refusals every engine gives (no primary key,
a wrong password, a missing table, a replica that is unreachable or is the primary) are in
test_onboard_behaviors.py.  Preflight failures that the shared server cannot be put
into (``wal_level``, slot and sender limits, ``max_slot_wal_keep_size``, paused replay) are covered
by tests/unit/sources/test_onboard_postgres_checks.py on recorded values instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from psycopg import sql
from support.common import assert_one_line_failure, cli_run, run_json, wait_until, write_config_in
from support.engines import PgEnv, pg_env
from support.onboard import CONNECT, connectors_of, onboard_while_writing, wait_for_keys

from cdc_lake.config import Connection, Source
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.redaction import MASK
from cdc_lake.sources import engine_for
from cdc_lake.sources.postgres.settings import tier0_pg_name
from cdc_lake.stack.manager import LocalStack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg(local_stack: LocalStack) -> Iterator[PgEnv]:
    with pg_env(local_stack) as env:
        yield env


def test_onboard_streams_every_table_reruns_without_change_and_adds_tables(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}"
    shared = f"cdc-lake.{source}"
    tier0 = f"cdc-lake.{source}.tier0.shop.customers"
    tier0_slot = tier0_pg_name(f"cdc_lake_{source}", "shop.customers")
    tables: list[dict[str, Any]] = [{"name": "shop.customers", "tier": 0}, {"name": "shop.orders"}]
    config = write_config_in(tmp_path, {source: pg.source(tables)})

    first = run_json(config, "onboard", source)

    assert first["connectors"] == {tier0: "created", shared: "created"}
    assert pg.slots(source) == {f"cdc_lake_{source}": True, tier0_slot: True}
    assert pg.publications(source) == {
        f"cdc_lake_{source}": {"cdc_lake.heartbeat", "shop.orders"},
        tier0_slot: {"cdc_lake.heartbeat", "shop.customers"},
    }
    statuses = {row["name"]: row["state"] for row in run_json(config, "status")}
    assert statuses == {
        f"{source}.shop.customers": "PENDING_BOOTSTRAP",
        f"{source}.shop.orders": "PENDING_BOOTSTRAP",
    }
    connectors = run_json(config, "connectors", "status", source)
    assert {(row["name"], row["state"], row["tasks"][0]["state"]) for row in connectors} == {
        (tier0, "RUNNING", "RUNNING"),
        (shared, "RUNNING", "RUNNING"),
    }

    pg.execute(
        "insert into shop.customers values (1, 'ann'), (2, 'bob');"
        "update shop.customers set name = 'cy' where id = 1;"
        "delete from shop.customers where id = 2; insert into shop.orders values (10, 1.50)"
    )
    wait_for_keys(f"{source}.shop.customers", {1, 2})
    wait_for_keys(f"{source}.shop.orders", {10})

    registered = {
        name: requests.get(f"{CONNECT}/connectors/{name}/config", timeout=10).json()
        for name in (tier0, shared)
    }
    again = run_json(config, "onboard", source)

    assert again["connectors"] == {tier0: "unchanged", shared: "unchanged"}
    assert again["actions"] == []
    assert {
        name: requests.get(f"{CONNECT}/connectors/{name}/config", timeout=10).json() for name in registered
    } == (registered)
    assert pg.slots(source) == {f"cdc_lake_{source}": True, tier0_slot: True}

    # Add a table while the shared connector's other table keeps changing: no event may be lost.
    config = write_config_in(tmp_path, {source: pg.source([*tables, {"name": "shop.events"}])})
    added, written = onboard_while_writing(
        config, source, lambda key: pg.execute("insert into shop.orders values (%s, 2.00)", (key,))
    )

    assert added["connectors"] == {tier0: "unchanged", shared: "updated"}
    assert f"added shop.events to publication cdc_lake_{source}" in added["actions"]
    assert pg.publications(source)[f"cdc_lake_{source}"] == {
        "cdc_lake.heartbeat",
        "shop.orders",
        "shop.events",
    }
    pg.execute("insert into shop.events values (7, 'click'); insert into shop.customers values (3, 'dee')")
    wait_for_keys(f"{source}.shop.events", {7})
    wait_for_keys(f"{source}.shop.customers", {3})
    wait_for_keys(f"{source}.shop.orders", written)

    offboarded = run_json(config, "offboard", f"{source}.shop.orders")

    assert offboarded["connectors"] == {tier0: "unchanged", shared: "updated"}
    assert pg.publications(source)[f"cdc_lake_{source}"] == {"cdc_lake.heartbeat", "shop.events"}
    assert {row["name"]: row["state"] for row in run_json(config, "status")}[
        f"{source}.shop.orders"
    ] == "OFFBOARDED"

    kept = run_json(config, "offboard", source)

    assert connectors_of(source) == []
    assert set(pg.publications(source)) == {f"cdc_lake_{source}", tier0_slot}
    assert sorted(kept["warnings"]) == sorted(
        f"replication slot {slot} and publication {slot} kept: the slot holds WAL on the primary "
        "until dropped, and onboard resumes from it (offboard with --drop-slot, "
        f"or SELECT pg_drop_replication_slot('{slot}'))"
        for slot in (f"cdc_lake_{source}", tier0_slot)
    )
    wait_until(lambda: not any(pg.slots(source).values()), 30, "slots released by the deleted connectors")

    # Changes made while offboarded stay in the kept slots; onboarding again resumes from them.
    pg.execute(
        "insert into shop.events values (8, 'offboarded'); insert into shop.customers values (4, 'eve')"
    )
    resumed = run_json(config, "onboard", source)

    assert resumed["connectors"] == {tier0: "created", shared: "created"}
    wait_for_keys(f"{source}.shop.events", {8})
    wait_for_keys(f"{source}.shop.customers", {4})
    assert {row["state"] for row in run_json(config, "status")} == {"PENDING_BOOTSTRAP"}

    dropped = run_json(config, "offboard", source, "--drop-slot")

    assert set(dropped["connectors"].values()) == {"deleted"}
    assert dropped["warnings"] == []
    pg.assert_nothing_made(source)


def test_dry_run_prints_checks_and_redacted_configs_and_changes_nothing(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_dry"
    config = write_config_in(
        tmp_path, {source: pg.source([{"name": "shop.customers", "tier": 0}, {"name": "shop.orders"}])}
    )

    result = cli_run(config, "onboard", source, "--dry-run")
    as_json = run_json(config, "onboard", source, "--dry-run")

    assert result.exit_code == 0, result.stderr
    assert f'"database.password": "{MASK}"' in result.stdout
    assert "cdc-lake-local" not in result.stdout
    assert "register connector" in result.stdout
    assert [c["name"] for c in as_json["connectors"]] == [
        f"cdc-lake.{source}.tier0.shop.customers",
        f"cdc-lake.{source}",
    ]
    assert {c["config"]["database.password"] for c in as_json["connectors"]} == {MASK}
    assert {check["outcome"] for check in as_json["checks"]} <= {"pass", "warn"}
    pg.assert_nothing_made(source)


def test_configured_key_with_replica_identity_full(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_key"
    config = write_config_in(tmp_path, {source: pg.source([{"name": "shop.keyless", "key": ["code"]}])})

    refused = cli_run(config, "onboard", source)
    assert_one_line_failure(
        refused, "replica identity: updates and deletes would have no old key: shop.keyless (DEFAULT)"
    )
    pg.assert_nothing_made(source)

    report = run_json(config, "onboard", source, "--replica-identity-full")

    assert "set REPLICA IDENTITY FULL on shop.keyless" in report["actions"]
    assert pg.execute("select relreplident::text from pg_class where oid = 'shop.keyless'::regclass") == [
        ("f",)
    ]
    pg.execute("insert into shop.keyless values (41, 1); update shop.keyless set v = 2 where code = 41")
    wait_for_keys(f"{source}.shop.keyless", {41})
    run_json(config, "offboard", source, "--drop-slot")
    pg.assert_nothing_made(source)


def test_failed_connector_is_rolled_back(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_rb"
    # Preflight reads the default; the Connect worker has no such variable, so the connector cannot log in.
    sources = {source: pg.source([{"name": "shop.orders"}])}
    for role in ("primary", "replica"):
        sources[source][role]["password"] = "${ONB_NOT_ON_THE_WORKER:-cdc-lake-local}"
    config = write_config_in(tmp_path, sources)

    result = cli_run(config, "onboard", source, "--timeout", "60")

    assert_one_line_failure(
        result,
        f"source {source}: onboarding failed:",
        "Rolled back:",
        f"dropped publication cdc_lake_{source}",
    )
    assert "Fix the cause and re-run cdc-lake onboard" in result.stderr
    pg.assert_nothing_made(source)
    assert run_json(config, "status") == []


def test_replica_identity_nothing(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_nothing"
    config = write_config_in(tmp_path, {source: pg.source([{"name": "shop.nothing"}])})

    assert_one_line_failure(
        cli_run(config, "onboard", source),
        "replica identity: updates and deletes would have no old key: shop.nothing (NOTHING)",
    )
    pg.assert_nothing_made(source)


def test_a_key_of_a_type_the_lake_cannot_tell_apart_is_refused_by_name(pg: PgEnv, tmp_path: Path) -> None:
    """``04:45:30+02`` and ``02:45:30+00`` are two keys to Postgres, one record key in the lake (UTC)."""
    pg.execute("create table shop.shifts (starts timetz primary key, note text)")
    source = f"onb_pg_{pg.suffix}_timetz"
    config = write_config_in(tmp_path, {source: pg.source([{"name": "shop.shifts"}])})

    assert_one_line_failure(
        cli_run(config, "onboard", source),
        "key types: ",
        "shifts.starts (time with time zone): two offsets of one UTC time of day",
    )
    pg.assert_nothing_made(source)


def test_unknown_source_and_unknown_table(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_known"
    config = write_config_in(tmp_path, {source: pg.source([{"name": "shop.orders"}])})

    assert_one_line_failure(
        cli_run(config, "onboard", "nosuch"), f"source nosuch is not in the config (configured: {source})"
    )
    assert_one_line_failure(
        cli_run(config, "onboard", source, "--tables", "shop.ghost"),
        f"table {source}.shop.ghost is not in the config",
    )
    assert_one_line_failure(
        cli_run(config, "offboard", f"{source}.shop.orders"), f"source {source} is not onboarded"
    )


def test_user_without_replication_or_select(
    pg: PgEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    role = f"onb_{pg.suffix}_limited"
    pg.roles.append(role)
    password = f"limited-{pg.suffix}"
    with pg.connect() as conn:
        conn.execute(
            sql.SQL("create role {} login password {}").format(sql.Identifier(role), sql.Literal(password))
        )
        conn.execute(sql.SQL("grant usage on schema shop to {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("grant select on shop.customers to {}").format(sql.Identifier(role)))
    monkeypatch.setenv("ONB_LIMITED_PASSWORD", password)
    source = f"onb_pg_{pg.suffix}_limited"
    definition = pg.source([{"name": "shop.customers"}, {"name": "shop.orders"}])
    for side in ("primary", "replica"):
        definition[side] |= {"user": role, "password": "${ONB_LIMITED_PASSWORD}"}
    config = write_config_in(tmp_path, {source: definition})

    result = cli_run(config, "onboard", source)

    assert_one_line_failure(
        result,
        f"replication privilege: {role} lacks REPLICATION",
        f"select privilege: {role} may not SELECT shop.orders",
        f"{role} does not own shop.customers, shop.orders",
    )
    assert password not in result.output
    pg.assert_nothing_made(source)


def test_literal_password_is_refused(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_literal"
    definition = pg.source([{"name": "shop.orders"}])
    definition["primary"]["password"] = "cdc-lake-local"
    config = write_config_in(tmp_path, {source: definition})

    result = cli_run(config, "onboard", source)

    assert_one_line_failure(
        result, f"sources.{source}.primary.password must be exactly ${{VAR}}", exit_code=2
    )
    assert "cdc-lake-local" not in result.output


@pytest.mark.parametrize(
    ("plugin", "database", "problem"),
    [
        ("test_decoding", None, "exists with plugin test_decoding"),
        ("pgoutput", "postgres", "exists on database postgres"),
    ],
)
def test_slot_that_belongs_to_someone_else(
    pg: PgEnv, tmp_path: Path, plugin: str, database: str | None, problem: str
) -> None:
    source = f"onb_pg_{pg.suffix}_{plugin}"
    slot = f"cdc_lake_{source}"
    with pg.connect(database) as conn:
        conn.execute("select pg_create_logical_replication_slot(%s, %s)", (slot, plugin))
    try:
        config = write_config_in(tmp_path, {source: pg.source([{"name": "shop.orders"}])})

        result = cli_run(config, "onboard", source)

        assert_one_line_failure(result, f"replication slot: belongs to someone else: {slot} {problem}")
        assert pg.slots(source) == {slot: False}
        assert connectors_of(source) == []
        assert pg.publications(source) == {}
    finally:
        pg.execute("select pg_drop_replication_slot(%s)", (slot,))


def test_publication_for_all_tables_under_our_name(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_pub"
    pg.execute(
        sql.SQL("create publication {} for all tables")
        .format(sql.Identifier(f"cdc_lake_{source}"))
        .as_string()
    )
    config = write_config_in(tmp_path, {source: pg.source([{"name": "shop.orders"}])})

    result = cli_run(config, "onboard", source)

    assert_one_line_failure(result, f"publication: cdc_lake_{source} exists FOR ALL TABLES")
    assert connectors_of(source) == []
    assert pg.slots(source) == {}


def test_kafka_connect_unreachable(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_noconnect"
    config = write_config_in(
        tmp_path, {source: pg.source([{"name": "shop.orders"}])}, kafka_connect={"url": "http://127.0.0.1:1"}
    )

    result = cli_run(config, "onboard", source)

    assert_one_line_failure(result, "kafka connect: unreachable: Kafka Connect at http://127.0.0.1:1")
    pg.assert_nothing_made(source)


def test_schema_registry_at_a_wrong_url(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_noregistry"
    config = write_config_in(
        tmp_path,
        {source: pg.source([{"name": "shop.orders"}])},
        schema_registry={"url": "http://127.0.0.1:1/apis/ccompat/v7"},
    )

    result = cli_run(config, "onboard", source)

    assert_one_line_failure(
        result, "schema registry: http://127.0.0.1:1/apis/ccompat/v7/subjects unreachable"
    )
    pg.assert_nothing_made(source)


def test_connector_name_taken_by_another_source(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_taken"
    name = f"cdc-lake.{source}"
    config = write_config_in(tmp_path, {source: pg.source([{"name": "shop.orders"}])})
    planned = run_json(config, "onboard", source, "--dry-run")["connectors"][0]["config"]
    foreign = {**planned, "database.dbname": "postgres", "database.password": "${env:CDC_LAKE_DB_PASSWORD}"}
    response = requests.post(
        f"{CONNECT}/connectors",
        data=json.dumps({"name": name, "config": foreign, "initial_state": "STOPPED"}),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    try:
        result = cli_run(config, "onboard", source)

        assert_one_line_failure(
            result,
            "connector names: registered in Kafka Connect for another source: "
            f"{name} (database.dbname=postgres)",
        )
        assert (
            requests.get(f"{CONNECT}/connectors/{name}/config", timeout=10).json()["database.dbname"]
            == "postgres"
        )
        assert pg.publications(source) == {}
    finally:
        requests.delete(f"{CONNECT}/connectors/{name}", timeout=30)


def test_kafka_unreachable(pg: PgEnv, tmp_path: Path) -> None:
    source = f"onb_pg_{pg.suffix}_nokafka"
    config = write_config_in(
        tmp_path, {source: pg.source([{"name": "shop.orders"}])}, kafka={"bootstrap_servers": "127.0.0.1:1"}
    )

    result = cli_run(config, "onboard", source)

    assert_one_line_failure(result, "kafka: 127.0.0.1:1 unreachable:")
    pg.assert_nothing_made(source)


def test_positions_of_the_primary_and_the_replica(pg: PgEnv) -> None:
    ports = pg.stack.layout.ports
    password = pg.stack.layout.credentials.db_password
    primary = Connection(port=ports.postgres_primary, database=pg.database, user="cdc", password=password)
    source = Source(
        name="onb_positions",
        engine="postgres",
        primary=primary,
        replica=primary.model_copy(update={"port": ports.postgres_replica}),
    )
    engine = engine_for(source)
    pg.execute("insert into shop.events values (9000, 'position')")

    position = engine.current_position()
    reached = engine.wait_replica_past(position, timeout=60)

    assert pg.execute("select pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn) >= 0", (reached, position)) == [(True,)]
    assert pg.execute(
        "select pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn) >= 0", (engine.replica_position(), position)
    ) == [(True,)]
    with pytest.raises(SourceEngineError, match=r"replica replayed \S+, not past FFFFFFFF/0, after 1s"):
        engine.wait_replica_past("FFFFFFFF/0", timeout=1)
