"""The whole flow against the stack's secured mode: nothing reaches a service without TLS or credentials.

- Kafka: only the broker's SASL/SCRAM-over-TLS listener is configured (``kafka.consumer`` for
  cdc-lake's clients, ``kafka.connector_clients`` for Debezium's schema history), and the secured
  Connect worker's own clients and its connectors' producers use that listener too.
- Databases: the source's user is the stack's ``cdc_tls``, which Postgres (``pg_hba.conf``
  ``hostssl`` only) and MariaDB (``REQUIRE SSL``) admit over TLS only, on primary and replica;
  the config verifies the servers fully (``sslmode=verify-full``; ``ssl_ca`` with
  ``ssl_verify_identity``).  Debezium, the preflight, the position waits and the bootstrap's JDBC
  reads could not connect otherwise.
- Kafka Connect: the secured worker's REST API requires basic auth; cdc-lake's client sends
  ``kafka_connect.user``/``password`` on every call (onboard, the hand-off wait).

onboard → bootstrap → apply → compare (Spark+Hudi and hudi-rs) per engine; then a CA from another
authority, or no Connect credentials, fails the preflight in one line naming the setting and
changes no connector.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
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
from support.common import assert_one_line_failure, cli_run, load

from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.tls import stack_ca
from cdc_lake.state.lifecycle import TableState

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ROWS = ", ".join(f"({i}, 'v{i}', {i})" for i in range(1, 61))
ITEMS = (
    "create table {name} (id bigint primary key, val varchar(40), n integer)",
    "insert into {name} values " + ROWS,
)
KAFKA_PASSWORD_REF = "${CDC_LAKE_KAFKA_PASSWORD:-cdc-lake-local-kafka}"
CONNECT_PASSWORD_REF = "${CDC_LAKE_CONNECT_PASSWORD:-cdc-lake-local-connect}"
TRUSTSTORE_ENV = "CDC_LAKE_TRUSTSTORE_PASSWORD"


@pytest.fixture(scope="module")
def pg(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


@pytest.fixture(scope="module")
def maria(local_stack: LocalStack) -> Iterator[SourceDb]:
    with mariadb_db(local_stack) as created:
        yield created


@pytest.fixture(autouse=True)
def _truststore_password(local_stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> None:
    """cdc-lake reads the truststore password from the same variable the secured worker got."""
    monkeypatch.setenv(TRUSTSTORE_ENV, local_stack.layout.credentials.truststore_password)


def _secured_config(
    tmp_path: Path, db: SourceDb, table: str, ca: Path, connect_credentials: bool = True
) -> Path:
    stack = db.stack
    creds = stack.layout.credentials
    entry = db.source_config([{"name": table}])
    for role in ("primary", "replica"):
        connection: dict[str, Any] = {**entry[role], "user": creds.tls_db_user}
        if db.engine == "postgres":
            connection.update(sslmode="verify-full", sslrootcert=str(ca))
        else:
            truststore = str(tmp_path / f"{role}-truststore.p12")
            connection.update(ssl_ca=str(ca), ssl_verify_identity=True, ssl_truststore=truststore)
        entry[role] = connection
    kafka = {
        "bootstrap_servers": stack.kafka.secure_address(),
        "consumer": {**stack.kafka.secure_client_settings(), "sasl.password": KAFKA_PASSWORD_REF},
        "connector_clients": stack.kafka.secure_connector_client_settings(),
    }
    connect: dict[str, str] = {"url": stack.connect_secure.url}
    if connect_credentials:
        connect.update(user=creds.connect_user, password=CONNECT_PASSWORD_REF)
    config_path = write_db_config(
        tmp_path, db, [{"name": table}], str(tmp_path / "lake"), kafka=kafka, kafka_connect=connect
    )
    data = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    data["sources"][db.source] = entry
    config_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return config_path


def _secure_connect(stack: LocalStack) -> KafkaConnectClient:
    creds = stack.layout.credentials
    return KafkaConnectClient(stack.connect_secure.url, auth=(creds.connect_user, creds.connect_password))


def _connectors(stack: LocalStack, source: str) -> dict[str, dict[str, str]]:
    """The connectors of ``source`` on the secured worker, with their stored configs."""
    with _secure_connect(stack) as connect:
        return {
            name: connect.get_config(name)
            for name in connect.list_connectors()
            if name == f"cdc-lake.{source}" or name.startswith(f"cdc-lake.{source}.")
        }


def _other_ca(directory: Path) -> Path:
    cert = directory / "other-ca.crt"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other CA",
            "-keyout", str(directory / "other-ca.key"), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert


@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_onboard_bootstrap_apply_end_equal_in_secured_mode(
    spark: SparkSession, local_stack: LocalStack, request: pytest.FixtureRequest, tmp_path: Path, engine: str
) -> None:
    db: SourceDb = request.getfixturevalue("pg" if engine == "postgres" else "maria")
    db.execute(*(statement.format(name="items") for statement in ITEMS))
    config_path = _secured_config(tmp_path, db, "items", stack_ca(local_stack.layout))
    config = load(config_path)
    table = db.qualified("items")

    onboarded = cli_run(config_path, "onboard", db.source)
    assert onboarded.exit_code == 0, onboarded.stderr or onboarded.output
    rendered = _connectors(local_stack, db.source)
    assert len(rendered) == 1
    connector = next(iter(rendered.values()))
    assert connector["database.user"] == local_stack.layout.credentials.tls_db_user
    if engine == "postgres":
        assert connector["database.sslmode"] == "verify-full"
    else:
        assert connector["database.ssl.mode"] == "verify-full"
        assert connector["database.ssl.truststore.password"] == f"${{env:{TRUSTSTORE_ENV}}}"
        assert Path(connector["database.ssl.truststore"]).is_file()
    assert local_stack.layout.credentials.truststore_password not in json.dumps(connector)

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
    assert assert_lake_equals_source(spark, config, db, "items") == 55


@pytest.mark.parametrize(
    ("engine", "case", "named"),
    [
        ("mariadb", "wrong_ca", "primary.ssl_ca"),
        ("postgres", "wrong_ca", "primary.sslrootcert"),
        ("postgres", "no_connect_credentials", "kafka_connect.user"),
    ],
)
def test_wrong_ca_or_missing_credentials_fail_preflight_in_one_line(
    local_stack: LocalStack,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    engine: str,
    case: str,
    named: str,
) -> None:
    db: SourceDb = request.getfixturevalue("pg" if engine == "postgres" else "maria")
    db.execute(*(statement.format(name=f"refused_{case}") for statement in ITEMS))
    ca = _other_ca(tmp_path) if case == "wrong_ca" else stack_ca(local_stack.layout)
    config_path = _secured_config(
        tmp_path, db, f"refused_{case}", ca, connect_credentials=case != "no_connect_credentials"
    )

    registered = _connectors(local_stack, db.source)

    result = cli_run(config_path, "onboard", db.source)

    assert_one_line_failure(result, "preflight check(s) failed", named)
    assert _connectors(local_stack, db.source) == registered
    assert local_stack.layout.credentials.connect_password not in result.stderr + result.output


def test_connector_verifies_the_server_with_its_truststore(
    local_stack: LocalStack, maria: SourceDb, tmp_path: Path
) -> None:
    """A truststore holding another CA (the preflight's pymysql trusts the right one) stops Debezium."""
    maria.execute(*(statement.format(name="other_truststore") for statement in ITEMS))
    config_path = _secured_config(tmp_path, maria, "other_truststore", stack_ca(local_stack.layout))
    other = _other_ca(tmp_path)
    for role in ("primary", "replica"):
        subprocess.run(
            [
                "keytool", "-importcert", "-noprompt", "-alias", "other", "-file", str(other),
                "-keystore", str(tmp_path / f"{role}-truststore.p12"), "-storetype", "PKCS12",
                "-storepass:env", TRUSTSTORE_ENV,
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
    registered = _connectors(local_stack, maria.source)

    result = cli_run(config_path, "onboard", maria.source)

    assert_one_line_failure(result, "PKIX path building failed")
    assert _connectors(local_stack, maria.source) == registered
