"""The local stack itself: idempotent `up`, per-service status, and state that survives restarts."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pymysql
import pytest
import requests

from cdc_lake.stack.kafka import KafkaBroker
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.service import HOST, StackLayout
from cdc_lake.stack.tls import stack_ca

pytestmark = [pytest.mark.integration, pytest.mark.serial]

SERVICES = {
    "object-store",
    "postgres-primary",
    "postgres-replica",
    "mariadb-primary",
    "mariadb-replica",
    "kafka",
    "schema-registry",
    "keycloak",
    "schema-registry-secure",
    "kafka-connect",
    "kafka-connect-secure",
    "glue-catalog",
    "spark-master",
    "spark-worker",
    "hive-metastore",
    # Opt-in, and started for the tests (tests/integration/conftest.py): they read through it.
    "trino",
}


def test_up_again_changes_nothing_and_every_service_is_healthy(local_stack: LocalStack) -> None:
    began = time.monotonic()
    local_stack.up()

    assert time.monotonic() - began < 30
    statuses = local_stack.status()
    assert {s.name for s in statuses} == SERVICES
    assert all(s.healthy for s in statuses), [s for s in statuses if not s.healthy]
    assert all("127.0.0.1" in s.address for s in statuses)


def test_cli_status_json_lists_every_service(local_stack: LocalStack) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cdc_lake", "stack", "status", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr
    reported = json.loads(proc.stdout)
    assert {entry["name"] for entry in reported} == SERVICES
    assert all(entry["healthy"] and entry["log"].endswith(".log") for entry in reported)


def test_secured_mode_lets_its_user_in_over_verified_tls_only(local_stack: LocalStack) -> None:
    creds, ports = local_stack.layout.credentials, local_stack.layout.ports
    ca = str(stack_ca(local_stack.layout))
    login = {"host": HOST, "user": creds.tls_db_user, "password": creds.db_password}
    for port in (ports.postgres_primary, ports.postgres_replica):
        with pytest.raises(psycopg.OperationalError, match="no encryption"):
            psycopg.connect(port=port, dbname="app", sslmode="disable", **login)
        with psycopg.connect(port=port, dbname="app", sslmode="verify-full", sslrootcert=ca, **login) as conn:
            row = conn.execute("select ssl from pg_stat_ssl where pid = pg_backend_pid()").fetchone()
            assert row == (True,)
    for port in (ports.mariadb_primary, ports.mariadb_replica):
        with pytest.raises(pymysql.err.OperationalError, match="Access denied"):
            pymysql.connect(port=port, ssl_disabled=True, **login)
        tls = {"ssl_ca": ca, "ssl_verify_cert": True, "ssl_verify_identity": True}
        with pymysql.connect(port=port, **login, **tls) as conn, conn.cursor() as cur:
            cur.execute("show session status like 'Ssl_version'")
            assert str(cur.fetchone()[1]).startswith("TLS")
    url = f"{local_stack.connect_secure.url}/connectors"
    assert requests.get(url, timeout=10).status_code == 401
    assert requests.get(url, timeout=10, auth=(creds.connect_user, "wrong")).status_code == 401
    assert requests.get(url, timeout=10, auth=(creds.connect_user, creds.connect_password)).status_code == 200
    subjects = f"{local_stack.registry_secure.confluent_url}/subjects"
    assert requests.get(subjects, timeout=10).status_code == 401
    assert requests.get(subjects, timeout=10, auth=(creds.registry_user, "wrong")).status_code == 401
    admitted = (creds.registry_user, creds.registry_password)
    assert requests.get(subjects, timeout=10, auth=admitted).status_code == 200


def test_registry_keeps_schema_ids_across_a_restart(local_stack: LocalStack) -> None:
    registry = local_stack.registry
    schema = {"type": "record", "name": f"probe_{time.time_ns()}", "fields": [{"name": "id", "type": "long"}]}
    subject = f"stack-test-{time.time_ns()}-value"
    registered = requests.post(
        f"{registry.confluent_url}/subjects/{subject}/versions",
        json={"schema": json.dumps(schema)},
        timeout=10,
    )
    registered.raise_for_status()
    schema_id = registered.json()["id"]

    assert registry.stop() is True
    local_stack.up()

    fetched = requests.get(f"{registry.confluent_url}/schemas/ids/{schema_id}", timeout=10)
    assert fetched.status_code == 200
    assert json.loads(fetched.json()["schema"])["name"] == schema["name"]


def test_kafka_storage_formats_with_a_cluster_id_starting_with_a_dash(tmp_path: Path) -> None:
    """A random cluster id starts with "-" once in 64 stacks; it must not read as an option."""
    broker = KafkaBroker(StackLayout(data_dir=tmp_path))
    cluster_id = ""
    while not cluster_id.startswith("-"):
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    broker.config_file.parent.mkdir(parents=True)
    broker.config_file.write_text(
        "".join(f"{key}={value}\n" for key, value in broker._properties().items()), encoding="utf-8"
    )

    broker.format_storage(cluster_id)

    meta = (tmp_path / "kafka" / "data" / "meta.properties").read_text(encoding="utf-8")
    assert f"cluster.id={cluster_id}" in meta


def test_keycloak_keeps_its_realm_after_its_pool_closes_every_connection(
    local_stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """H2 drops an in-memory database when its last connection closes; Keycloak's pool closes idle
    connections after minutes, so a stack up for a quarter of an hour answered HTTP 500 to every admin
    call and refused every registry login.  Here the pool retires connections after 3 s.

    One restart: on success Keycloak keeps running with the short pool lifetime (it has just shown that
    it works with it); on failure both services are restarted with their usual settings."""
    keycloak, registry = local_stack.keycloak, local_stack.registry_secure
    log_before = keycloak.process.log_file.stat().st_size
    try:
        registry.stop()
        keycloak.stop()
        with monkeypatch.context() as env:
            env.setenv("QUARKUS_DATASOURCE_JDBC_MIN_SIZE", "0")
            env.setenv("QUARKUS_DATASOURCE_JDBC_MAX_LIFETIME", "3S")
            env.setenv("QUARKUS_DATASOURCE_JDBC_IDLE_REMOVAL_INTERVAL", "2S")
            keycloak.start()
        local_stack.up()
        time.sleep(15)  # every pooled connection has been closed at least once by now

        local_stack.up()  # reads the realm's clients through the admin API

        subjects = f"{registry.confluent_url}/subjects"
        assert requests.get(subjects, timeout=10, auth=registry.auth()).status_code == 200
        with keycloak.process.log_file.open("rb") as log:
            log.seek(log_before)
            assert b"this database is empty" not in log.read()
    except BaseException:
        registry.stop()
        keycloak.stop()
        local_stack.up()
        raise
