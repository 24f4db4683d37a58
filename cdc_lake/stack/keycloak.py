"""Keycloak (from Maven Central): the OpenID Connect server behind the secured schema registry.

Apicurio Registry 2.x has no user store of its own: with ``CLIENT_CREDENTIALS_BASIC_AUTH_ENABLED``
it takes an HTTP basic ``user:password``, asks its OIDC server for a token with the client
credentials grant (client id = user, client secret = password) and admits the request only when a
token comes back.  This service is that server: Keycloak in development mode on loopback, with an
in-memory database, so every start is fresh and ``after_healthy`` creates (or updates) the one realm
(:data:`REALM`) whose confidential client is the stack's registry user, its secret the stack's
registry password.  Both passwords come from the environment (:class:`StackCredentials`) and reach
Keycloak only through its process environment and its admin API, never a file.

The in-memory H2 database is opened with ``DB_CLOSE_DELAY=-1``: without it H2 drops the database
when its last connection closes, which Keycloak's pool does once its connections have idled (about
15 minutes after start), and from then on every admin call answers HTTP 500 and every token request
is refused ("Table CLIENT not found (this database is empty)").
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import requests

from cdc_lake import jvm
from cdc_lake.exceptions import StackError
from cdc_lake.stack.service import HOST, Service

REALM = "cdc-lake"
ADMIN_USER = "admin"
REGISTRY_API_CLIENT = "registry-api"
"""The client id Apicurio names itself by (its default ``KEYCLOAK_API_CLIENT_ID``)."""


def keycloak_home() -> Path:
    """Keycloak's distribution, unpacked once from the Maven Central zip."""
    archive = jvm.fetch_archive(jvm.KEYCLOAK_DIST)
    target = jvm.cache_root() / "keycloak"
    home = target / f"keycloak-{jvm.KEYCLOAK_VERSION}"
    launcher = home / "bin" / "kc.sh"
    if not launcher.exists():
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(target)
        for script in (home / "bin").glob("*.sh"):
            script.chmod(0o755)
    if not launcher.exists():
        raise StackError(f"{archive.name} holds no bin/kc.sh")
    return home


class Keycloak(Service):
    """The secured registry's identity server; its realm holds one client per registry user."""

    name = "keycloak"

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.layout.ports.keycloak}"

    @property
    def realm_url(self) -> str:
        """The realm's issuer URL (Apicurio's ``quarkus.oidc.auth-server-url``)."""
        return f"{self.base_url}/realms/{REALM}"

    def address(self) -> str:
        return self.base_url

    def install(self) -> None:
        keycloak_home()

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        home = keycloak_home()
        self.process.start(
            [
                str(home / "bin" / "kc.sh"),
                "start-dev",
                "--db=dev-mem",
                "--db-url-properties=;DB_CLOSE_DELAY=-1",
                "--cache=local",
                "--health-enabled=true",
                f"--http-host={HOST}",
                f"--http-port={self.layout.ports.keycloak}",
            ],
            env={
                "KEYCLOAK_ADMIN": ADMIN_USER,
                "KEYCLOAK_ADMIN_PASSWORD": self.layout.credentials.keycloak_admin_password,
                "JAVA_OPTS_KC_HEAP": "-Xms64m -Xmx320m",
            },
            cwd=home,
        )

    def healthy(self) -> bool:
        return requests.get(f"{self.base_url}/health/ready", timeout=3).status_code == 200

    def after_healthy(self) -> None:
        """Create the realm, or update its clients in place (keeping its signing keys, which the
        registry caches), so the registry client's secret is the current registry password."""
        headers = {"Authorization": f"Bearer {self._admin_token()}"}
        realm_admin = f"{self.base_url}/admin/realms/{REALM}"
        clients = self._clients()
        if requests.get(realm_admin, headers=headers, timeout=10).status_code == 404:
            realm = {"realm": REALM, "enabled": True, "clients": clients}
            created = requests.post(f"{self.base_url}/admin/realms", json=realm, headers=headers, timeout=60)
            self._check(created, f"creating realm {REALM!r}")
            return
        for client in clients:
            query = {"clientId": str(client["clientId"])}
            found = requests.get(f"{realm_admin}/clients", params=query, headers=headers, timeout=10)
            self._check(found, f"reading client {client['clientId']!r}")
            existing = found.json()
            if existing:
                url = f"{realm_admin}/clients/{existing[0]['id']}"
                self._check(requests.put(url, json=client, headers=headers, timeout=30), "updating a client")
            else:
                url = f"{realm_admin}/clients"
                self._check(requests.post(url, json=client, headers=headers, timeout=30), "adding a client")

    def _clients(self) -> list[dict[str, object]]:
        creds = self.layout.credentials
        return [
            {"clientId": REGISTRY_API_CLIENT, "enabled": True, "bearerOnly": True},
            {
                "clientId": creds.registry_user,
                "enabled": True,
                "publicClient": False,
                "secret": creds.registry_password,
                "serviceAccountsEnabled": True,
                "standardFlowEnabled": False,
                "directAccessGrantsEnabled": False,
            },
        ]

    @staticmethod
    def _check(response: requests.Response, what: str) -> None:
        if response.status_code >= 300:
            raise StackError(f"keycloak: {what} in realm {REALM!r} answered HTTP {response.status_code}")

    def _admin_token(self) -> str:
        response = requests.post(
            f"{self.base_url}/realms/master/protocol/openid-connect/token",
            data={
                "grant_type": "password",
                "client_id": "admin-cli",
                "username": ADMIN_USER,
                "password": self.layout.credentials.keycloak_admin_password,
            },
            timeout=30,
        )
        if response.status_code != 200:
            raise StackError(
                f"keycloak: the admin login answered HTTP {response.status_code} "
                "(check CDC_LAKE_KEYCLOAK_ADMIN_PASSWORD)"
            )
        token = response.json().get("access_token")
        if not isinstance(token, str):
            raise StackError("keycloak: the admin login returned no access token")
        return token
