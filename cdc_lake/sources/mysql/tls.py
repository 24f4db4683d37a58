"""TLS to MySQL/MariaDB servers: one set of settings, spelled for each client that connects.

A connection's ``ssl_ca`` (PEM) means TLS is required and the server's chain is verified against
it; ``ssl_verify_identity`` also checks that the certificate names the host.  The same two facts
reach every client cdc-lake opens or renders:

- pymysql (preflight, positions, waits, lag, validate): ``ssl_ca``/``ssl_verify_cert``/
  ``ssl_verify_identity`` (:func:`pymysql_settings`);
- the bootstrap's JDBC reads: MariaDB Connector/J ``sslMode=verify-full|verify-ca`` with
  ``serverSslCert`` (a PEM path); MySQL Connector/J ``sslMode=VERIFY_IDENTITY|VERIFY_CA`` with the
  PKCS#12 truststore (``trustCertificateKeyStoreUrl``) (:func:`jdbc_properties`);
- the Debezium connector: ``database.ssl.mode`` (MariaDB ``verify-full|verify-ca``, MySQL
  ``verify_identity|verify_ca``), ``database.ssl.truststore`` and
  ``database.ssl.truststore.password=${env:VAR}`` (:func:`connector_settings`); Debezium verifies
  both its JDBC connections and its binlog reader with that truststore (a truststore from another
  CA fails the connector's validation with "PKIX path building failed", checked on the stack).

Java reads a CA from a keystore, not a PEM file: :func:`ensure_truststore` makes the PKCS#12
truststore from ``ssl_ca`` with ``keytool`` (the password read by keytool itself from the
environment variable, never on a command line), or checks that an existing one opens with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.mysql.settings import MySqlConnection

_ALIAS = "cdc-lake-ca"
_KEYTOOL_TIMEOUT = 60


def pymysql_settings(connection: MySqlConnection) -> dict[str, object]:
    """Keyword arguments for :func:`pymysql.connect` (empty: no TLS asked for)."""
    if connection.ssl_ca is None:
        return {}
    return {
        "ssl_ca": connection.ssl_ca,
        "ssl_verify_cert": True,
        "ssl_verify_identity": connection.ssl_verify_identity,
    }


def jdbc_properties(flavor: str, connection: MySqlConnection, role: str) -> dict[str, str]:
    """JDBC driver properties of ``flavor`` (``mariadb`` or ``mysql``) for ``role``'s TLS."""
    if connection.ssl_ca is None:
        return {}
    if flavor == "mariadb":
        return {
            "sslMode": "verify-full" if connection.ssl_verify_identity else "verify-ca",
            "serverSslCert": connection.ssl_ca,
        }
    return {
        "sslMode": "VERIFY_IDENTITY" if connection.ssl_verify_identity else "VERIFY_CA",
        "trustCertificateKeyStoreUrl": Path(connection.truststore_path()).resolve().as_uri(),
        "trustCertificateKeyStoreType": "PKCS12",
        "trustCertificateKeyStorePassword": truststore_password(connection, role),
    }


def connector_settings(flavor: str, connection: MySqlConnection) -> dict[str, str]:
    """``database.*`` settings of the Debezium connector for ``connection``'s TLS."""
    if connection.ssl_ca is None:
        return {}
    if flavor == "mariadb":
        mode = "verify-full" if connection.ssl_verify_identity else "verify-ca"
    else:
        mode = "verify_identity" if connection.ssl_verify_identity else "verify_ca"
    return {
        "database.ssl.mode": mode,
        "database.ssl.truststore": connection.truststore_path(),
        "database.ssl.truststore.password": f"${{env:{connection.ssl_truststore_password_env}}}",
    }


def truststore_password(connection: MySqlConnection, role: str) -> str:
    """The truststore password from the environment; unset is an error naming the setting."""
    variable = connection.ssl_truststore_password_env
    value = os.environ.get(variable)
    if not value:
        raise SourceEngineError(
            f"{role}.ssl_truststore_password_env: environment variable {variable} is not set "
            "(the truststore password, read by cdc-lake and by the Connect workers)"
        )
    return value


def ensure_truststore(connection: MySqlConnection, role: str) -> bool:
    """Make the truststore from ``ssl_ca`` if it is missing, else check it opens; True when made."""
    path = Path(connection.truststore_path())
    variable = connection.ssl_truststore_password_env
    truststore_password(connection, role)
    keytool = shutil.which("keytool")
    if keytool is None:
        raise SourceEngineError(f"{role}.ssl_truststore: keytool (a Java 17 JDK/JRE) is not on PATH")
    if path.exists():
        command = [keytool, "-list", "-keystore", str(path), "-storepass:env", variable]
        _keytool(command, f"{role}.ssl_truststore: {path} does not open with ${variable}")
        return False
    if connection.ssl_ca is None or not Path(connection.ssl_ca).is_file():
        raise SourceEngineError(f"{role}.ssl_ca: {connection.ssl_ca} is not a readable file")
    path.parent.mkdir(parents=True, exist_ok=True)
    command = [
        keytool,
        "-importcert",
        "-noprompt",
        "-alias",
        _ALIAS,
        "-file",
        connection.ssl_ca,
        "-keystore",
        str(path),
        "-storetype",
        "PKCS12",
        "-storepass:env",
        variable,
    ]
    _keytool(command, f"{role}.ssl_truststore: keytool could not make {path} from {connection.ssl_ca}")
    return True


def _keytool(command: list[str], failure: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=_KEYTOOL_TIMEOUT, check=False)
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        cause = next((line for line in lines if "error" in line.lower()), lines[-1] if lines else "")
        raise SourceEngineError(f"{failure}: {cause}")
