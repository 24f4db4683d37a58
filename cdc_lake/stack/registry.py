"""Apicurio Registry (from Maven Central) serving the Confluent schema registry REST API.

Two instances run side by side: ``schema-registry``, open (the connectors' and tests' registry),
and ``schema-registry-secure``, the same server requiring HTTP basic auth on every API call, so the
decoder's authenticated path runs against a real registry.  Apicurio checks basic credentials
against its OpenID Connect server (:mod:`cdc_lake.stack.keycloak`) with the client credentials
grant; it holds no secret itself.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import requests

from cdc_lake import jvm
from cdc_lake.exceptions import StackError
from cdc_lake.stack.java import runnable_jar_argv
from cdc_lake.stack.keycloak import Keycloak
from cdc_lake.stack.service import HOST, Service, StackLayout

CONFLUENT_API_PATH = "/apis/ccompat/v7"
NATIVE_API_PATH = "/apis/registry/v2"


def registry_runner_jar() -> Path:
    """The registry's runnable jar, unpacked once from the Maven Central distribution archive."""
    archive = jvm.fetch_archive(jvm.APICURIO_REGISTRY_APP)
    target = jvm.cache_root() / "apicurio" / jvm.APICURIO_VERSION
    runner = target / f"apicurio-registry-app-{jvm.APICURIO_VERSION}-runner.jar"
    if not runner.exists():
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
    if not runner.exists():
        raise StackError(f"{archive.name} holds no {runner.name}")
    return runner


class SchemaRegistry(Service):
    """Schemas persist in an H2 file database in the stack's data dir, so ids survive restarts."""

    name = "schema-registry"
    files = "registry"

    @property
    def port(self) -> int:
        """The HTTP port this instance listens on."""
        return self.layout.ports.registry

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def confluent_url(self) -> str:
        """The Confluent-compatible API root that decoders and tools use."""
        return self.base_url + CONFLUENT_API_PATH

    def address(self) -> str:
        return self.confluent_url

    def install(self) -> None:
        registry_runner_jar()

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        db = self.layout.path(self.files, "registry")
        db.parent.mkdir(parents=True, exist_ok=True)
        self.process.start(
            runnable_jar_argv(
                "384m",
                registry_runner_jar(),
                f"-Dquarkus.http.host={HOST}",
                f"-Dquarkus.http.port={self.port}",
            ),
            env={"REGISTRY_DATASOURCE_URL": f"jdbc:h2:file:{db};DB_CLOSE_ON_EXIT=FALSE", **self._auth_env()},
        )

    def _auth_env(self) -> dict[str, str]:
        """Apicurio's authentication settings (none: the open instance)."""
        return {}

    def healthy(self) -> bool:
        response = requests.get(f"{self.confluent_url}/subjects", timeout=3)
        return response.status_code == 200


class SecureSchemaRegistry(SchemaRegistry):
    """The secured mode's registry: every request needs basic auth (``credentials.registry_user``).

    Its schemas live in their own H2 database, so its ids are independent of the open instance's.
    Healthy means both halves of the check work: the stack's credentials are admitted and a request
    without them is refused (HTTP 401).
    """

    name = "schema-registry-secure"
    files = "registry-secure"

    def __init__(self, layout: StackLayout, identity: Keycloak) -> None:
        super().__init__(layout)
        self.identity = identity

    @property
    def port(self) -> int:
        return self.layout.ports.registry_secure

    def _auth_env(self) -> dict[str, str]:
        return {
            "REGISTRY_AUTH_ENABLED": "true",
            "CLIENT_CREDENTIALS_BASIC_AUTH_ENABLED": "true",
            "REGISTRY_AUTH_URL_CONFIGURED": self.identity.realm_url,
            "TOKEN_ENDPOINT": f"{self.identity.realm_url}/protocol/openid-connect/token",
        }

    def auth(self) -> tuple[str, str]:
        """The basic credentials the registry admits."""
        creds = self.layout.credentials
        return creds.registry_user, creds.registry_password

    def healthy(self) -> bool:
        url = f"{self.confluent_url}/subjects"
        if requests.get(url, timeout=3).status_code != 401:
            return False
        return requests.get(url, timeout=10, auth=self.auth()).status_code == 200
