"""MySQL/MariaDB TLS settings: accepted only where they work, spelled right for every client.

The live proof (TLS required by the server, Debezium and the JDBC reads over it) is
``tests/integration/test_secured_stack.py``; here the config rules, the rendered connector and
JDBC properties, and the truststore ``keytool`` makes (and refuses to open with a wrong password).
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from cdc_lake.config import Source, load_config
from cdc_lake.exceptions import ConfigError, SourceEngineError
from cdc_lake.sources import engine_for
from cdc_lake.sources.base import Capture, ConnectorEndpoints
from cdc_lake.sources.mysql.settings import MySqlCaptureIds, MySqlConnection
from cdc_lake.sources.mysql.tls import ensure_truststore, jdbc_properties, pymysql_settings

PASSWORD_ENV = "TEST_TRUSTSTORE_PASSWORD"


def _config_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


def _ca(directory: Path) -> Path:
    cert = directory / "ca.crt"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=test CA", "-keyout", str(directory / "ca.key"), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert


def _tls(ca: str, **extra: object) -> MySqlConnection:
    return MySqlConnection.model_validate(
        {"port": 13306, "user": "cdc", "ssl_ca": ca, "ssl_truststore_password_env": PASSWORD_ENV, **extra}
    )


def test_ssl_ca_is_accepted_for_mariadb_and_refused_for_postgres(tmp_path: Path) -> None:
    maria = """
    sources:
      maria:
        engine: mariadb
        server_id: 7
        primary: {port: 13306, user: cdc, ssl_ca: /ca.crt, ssl_verify_identity: true}
    """
    path = tmp_path / "maria.yaml"
    path.write_text(textwrap.dedent(maria), encoding="utf-8")
    primary = load_config(path).source("maria").primary
    assert (primary.ssl_ca, primary.ssl_verify_identity, primary.truststore_path()) == (
        "/ca.crt",
        True,
        "/ca.p12",
    )
    postgres = """
    sources:
      pg:
        engine: postgres
        primary: {port: 15432, database: app, user: cdc, ssl_ca: /ca.crt}
    """
    expected = (
        "sources.pg: primary.ssl_ca applies only to mariadb/mysql sources (postgres: sslmode, sslrootcert)"
    )
    assert expected in _config_error(tmp_path, postgres)


def test_verify_identity_without_a_ca_is_refused(tmp_path: Path) -> None:
    text = """
    sources:
      maria:
        engine: mariadb
        server_id: 7
        primary: {port: 13306, user: cdc, ssl_verify_identity: true}
    """
    assert "ssl_verify_identity and ssl_truststore are used only with ssl_ca" in _config_error(tmp_path, text)


def test_every_client_gets_the_same_verification() -> None:
    full, chain = _tls("/ca.crt", ssl_verify_identity=True), _tls("/ca.crt")
    assert pymysql_settings(full) == {
        "ssl_ca": "/ca.crt",
        "ssl_verify_cert": True,
        "ssl_verify_identity": True,
    }
    assert pymysql_settings(MySqlConnection(port=1, user="u")) == {}
    assert jdbc_properties("mariadb", full, "replica") == {
        "sslMode": "verify-full",
        "serverSslCert": "/ca.crt",
    }
    assert jdbc_properties("mariadb", chain, "replica")["sslMode"] == "verify-ca"


def test_mysql_jdbc_reads_the_truststore_password_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = _tls("/tls/ca.pem", ssl_verify_identity=True)
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    with pytest.raises(SourceEngineError, match=f"replica.ssl_truststore_password_env: .*{PASSWORD_ENV}"):
        jdbc_properties("mysql", connection, "replica")
    monkeypatch.setenv(PASSWORD_ENV, "pw-123456")
    assert jdbc_properties("mysql", connection, "replica") == {
        "sslMode": "VERIFY_IDENTITY",
        "trustCertificateKeyStoreUrl": "file:///tls/ca.p12",
        "trustCertificateKeyStoreType": "PKCS12",
        "trustCertificateKeyStorePassword": "pw-123456",
    }


@pytest.mark.parametrize(("engine", "mode"), [("mariadb", "verify-full"), ("mysql", "verify_identity")])
def test_connector_gets_ssl_mode_and_truststore_with_the_password_as_a_placeholder(
    engine: str, mode: str
) -> None:
    source = Source.model_validate(
        {
            "name": "maria",
            "engine": engine,
            "server_id": 7,
            "primary": {
                "port": 13306,
                "user": "cdc",
                "ssl_ca": "/tls/ca.crt",
                "ssl_verify_identity": True,
                "ssl_truststore": "/workers/ts.p12",
            },
            "tables": [{"name": "app.items"}],
        }
    )
    capture = Capture("cdc-lake.maria", tuple(source.tables), MySqlCaptureIds(7))
    endpoints = ConnectorEndpoints("DB_PW", "http://registry", "kafka:9092")
    settings = dict(engine_for(source).connector_params(capture, endpoints).database_settings)
    assert settings == {
        "database.ssl.mode": mode,
        "database.ssl.truststore": "/workers/ts.p12",
        "database.ssl.truststore.password": "${env:CDC_LAKE_TRUSTSTORE_PASSWORD}",
    }


def test_truststore_is_made_once_and_a_wrong_password_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = _tls(str(_ca(tmp_path)))
    monkeypatch.setenv(PASSWORD_ENV, "first-password")
    assert ensure_truststore(connection, "primary") is True
    listed = subprocess.run(
        ["keytool", "-list", "-keystore", str(tmp_path / "ca.p12"), "-storepass", "first-password"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "trustedCertEntry" in listed.stdout
    assert ensure_truststore(connection, "primary") is False
    monkeypatch.setenv(PASSWORD_ENV, "another-password")
    with pytest.raises(SourceEngineError) as caught:
        ensure_truststore(connection, "primary")
    message = str(caught.value)
    assert message.startswith(
        f"primary.ssl_truststore: {tmp_path / 'ca.p12'} does not open with ${PASSWORD_ENV}"
    )
    assert "\n" not in message and "another-password" not in message
