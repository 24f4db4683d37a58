"""The shape every local stack service shares, and where its files live."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from cdc_lake.config import StackPorts
from cdc_lake.stack.process import ManagedProcess


@dataclass(frozen=True)
class StackCredentials:
    """Credentials of the local stack, read from the environment with loopback-only defaults."""

    db_user: str = "cdc"
    db_password: str = field(default_factory=lambda: os.environ.get("CDC_LAKE_DB_PASSWORD", "cdc-lake-local"))
    s3_access_key: str = field(default_factory=lambda: os.environ.get("CDC_LAKE_S3_ACCESS_KEY", "cdclake"))
    s3_secret_key: str = field(
        default_factory=lambda: os.environ.get("CDC_LAKE_S3_SECRET_KEY", "cdc-lake-local-secret")
    )
    kafka_user: str = "cdc-lake"
    kafka_password: str = field(
        default_factory=lambda: os.environ.get("CDC_LAKE_KAFKA_PASSWORD", "cdc-lake-local-kafka")
    )

    tls_db_user: str = "cdc_tls"
    """The secured mode's database user/role: Postgres and MariaDB accept it over TLS only (its password
    is ``db_password``)."""
    connect_user: str = "cdc-lake"
    connect_password: str = field(
        default_factory=lambda: os.environ.get("CDC_LAKE_CONNECT_PASSWORD", "cdc-lake-local-connect")
    )
    """Basic auth of the secured Connect worker's REST API."""
    registry_user: str = "cdc-lake"
    registry_password: str = field(
        default_factory=lambda: os.environ.get("CDC_LAKE_REGISTRY_PASSWORD", "cdc-lake-local-registry")
    )
    """Basic auth of the secured schema registry (a client of the Keycloak realm, by its secret)."""
    keycloak_admin_password: str = field(
        default_factory=lambda: os.environ.get("CDC_LAKE_KEYCLOAK_ADMIN_PASSWORD", "cdc-lake-local-keycloak")
    )
    """Keycloak's bootstrap administrator (user ``admin``), which creates the registry's realm."""
    truststore_password: str = field(
        default_factory=lambda: os.environ.get("CDC_LAKE_TRUSTSTORE_PASSWORD", "cdc-lake-local-truststore")
    )
    """The password of the PKCS#12 truststores Debezium's MySQL/MariaDB connectors verify the servers with."""

    def __repr__(self) -> str:
        return f"StackCredentials(db_user={self.db_user!r}, secrets=******)"


HOST = "127.0.0.1"
DEMO_DATABASE = "app"
LAKE_BUCKET = "lake"


@dataclass(frozen=True)
class StackLayout:
    """The one data directory of a local stack and the ports and credentials it serves with."""

    data_dir: Path
    ports: StackPorts = field(default_factory=StackPorts)
    credentials: StackCredentials = field(default_factory=StackCredentials)

    @property
    def marker(self) -> str:
        """A string only our processes carry (in argv or environment): the absolute data dir."""
        return str(self.data_dir.resolve())

    def path(self, *parts: str) -> Path:
        """A path inside the data directory (not created)."""
        return self.data_dir.resolve().joinpath(*parts)

    def process(self, name: str, stop_signal: int | None = None) -> ManagedProcess:
        """The managed process record for service `name`."""
        kwargs = {} if stop_signal is None else {"stop_signal": stop_signal}
        return ManagedProcess(name, self.path("run"), self.path("logs"), self.marker, **kwargs)


@dataclass(frozen=True)
class ServiceStatus:
    """What `stack status` reports for one service."""

    name: str
    running: bool
    healthy: bool
    address: str
    log: str
    detail: str = ""


class Service(ABC):
    """A local stack service: installed from a registry, started detached, checked, stopped."""

    name: str

    def __init__(self, layout: StackLayout) -> None:
        self.layout = layout

    @property
    def process(self) -> ManagedProcess:
        """This service's managed process."""
        return self.layout.process(self.name)

    @abstractmethod
    def address(self) -> str:
        """Where clients reach the service."""

    @abstractmethod
    def install(self) -> None:
        """Make the binaries/artifacts available (idempotent; may download)."""

    @abstractmethod
    def start(self) -> None:
        """Start the process if it is not running (idempotent); does not wait for health."""

    @abstractmethod
    def healthy(self) -> bool:
        """Whether the service answers as expected right now."""

    def after_healthy(self) -> None:  # noqa: B027 - optional hook, most services need nothing
        """One-time setup once the service is healthy (users, buckets, replication); idempotent."""

    def log_excerpt(self) -> str:
        """The end of the service log, for errors about a service that failed to start."""
        return f"last lines of {self.process.log_file}:\n{self.process.log_tail()}"

    def detail(self) -> str:
        """Extra facts for `stack status` (replication lag, ...); empty by default."""
        return ""

    def stop(self) -> bool:
        """Stop our process; returns whether it was running."""
        return self.process.stop()

    def status(self) -> ServiceStatus:
        """Current status without changing anything."""
        running = self.process.pid() is not None
        detail = ""
        try:
            healthy = running and self.healthy()
            detail = self.detail() if healthy else ""
        except Exception as exc:
            healthy, detail = False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return ServiceStatus(self.name, running, healthy, self.address(), str(self.process.log_file), detail)
