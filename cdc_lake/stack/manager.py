"""Bring the whole local stack up, down, or report on it.

The services start in dependency waves.  Trino is opt-in (``stack.trino.enabled`` or ``up --with
trino``): it joins the last wave when asked for, and ``down`` and ``status`` count it while it runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from cdc_lake.config import StackSettings
from cdc_lake.exceptions import StackError
from cdc_lake.redaction import private_directory
from cdc_lake.stack.glue import GlueCatalog
from cdc_lake.stack.hive import HiveMetastore
from cdc_lake.stack.kafka import KafkaBroker, KafkaConnect, SecureKafkaConnect
from cdc_lake.stack.keycloak import Keycloak
from cdc_lake.stack.mariadb import MariaDbPrimary, MariaDbReplica
from cdc_lake.stack.objectstore import ObjectStore
from cdc_lake.stack.postgres import PostgresPrimary, PostgresReplica
from cdc_lake.stack.process import wait_until
from cdc_lake.stack.registry import SchemaRegistry, SecureSchemaRegistry
from cdc_lake.stack.service import Service, ServiceStatus, StackLayout
from cdc_lake.stack.spark import SparkMaster, SparkWorker
from cdc_lake.stack.trino import Trino

HEALTH_TIMEOUT_SECONDS = 180.0
OPTIONAL_SERVICES = ("trino",)
"""Services that run only when asked for (``up --with NAME`` or their ``stack.<name>.enabled``)."""


@dataclass(frozen=True)
class StackTimings:
    """How long `up` took, split into installing (downloads, builds) and starting."""

    install_seconds: float
    start_seconds: float


class LocalStack:
    """Every service of the local stack, started in dependency waves."""

    def __init__(self, settings: StackSettings, with_services: Collection[str] = ()) -> None:
        unknown = sorted(set(with_services) - set(OPTIONAL_SERVICES))
        if unknown:
            raise StackError(
                f"stack: no optional service {', '.join(unknown)}; choose from {', '.join(OPTIONAL_SERVICES)}"
            )
        self.layout = StackLayout(data_dir=Path(settings.data_dir), ports=settings.ports)
        self.postgres_primary = PostgresPrimary(self.layout)
        self.postgres_replica = PostgresReplica(self.layout, self.postgres_primary)
        self.mariadb_primary = MariaDbPrimary(self.layout)
        self.mariadb_replica = MariaDbReplica(self.layout, self.mariadb_primary)
        self.kafka = KafkaBroker(self.layout)
        self.registry = SchemaRegistry(self.layout)
        self.keycloak = Keycloak(self.layout)
        self.registry_secure = SecureSchemaRegistry(self.layout, self.keycloak)
        self.connect = KafkaConnect(self.layout, self.kafka)
        self.connect_secure = SecureKafkaConnect(self.layout, self.kafka)
        self.object_store = ObjectStore(self.layout)
        self.glue = GlueCatalog(self.layout)
        self.hive_metastore = HiveMetastore(self.layout)
        self.spark_master = SparkMaster(self.layout)
        self.spark_worker = SparkWorker(self.layout, self.spark_master)
        self.trino = Trino(self.layout, settings.trino.java_home)
        trino = settings.trino.enabled or "trino" in with_services or self.trino.process.pid() is not None
        # Each wave starts together and must be healthy before the next one starts.
        self.waves: tuple[tuple[Service, ...], ...] = (
            (
                self.object_store,
                self.postgres_primary,
                self.mariadb_primary,
                self.kafka,
                self.registry,
                self.keycloak,
                self.spark_master,
            ),
            (
                self.postgres_replica,
                self.mariadb_replica,
                self.connect,
                self.connect_secure,
                self.registry_secure,
                self.glue,
                self.hive_metastore,
                self.spark_worker,
                *((self.trino,) if trino else ()),
            ),
        )

    @property
    def services(self) -> list[Service]:
        """All services in start order."""
        return [service for wave in self.waves for service in wave]

    def up(self, progress: Callable[[str], None] = lambda _: None) -> StackTimings:
        """Install what is missing, start what is not running, and wait until everything is healthy.

        A new data directory is made private to its user (0700): it holds the databases, the
        object store, the CA's key and the Connect users file (a service running as another user,
        Postgres, gets the traverse bit only, :func:`cdc_lake.stack.system.own`).
        """
        began = time.monotonic()
        private_directory(self.layout.path())
        self._install(progress)
        installed = time.monotonic()
        for wave in self.waves:
            for service in wave:
                progress(f"starting {service.name}")
                service.start()
            for service in wave:
                progress(f"waiting for {service.name}")
                wait_until(
                    service.healthy,
                    HEALTH_TIMEOUT_SECONDS,
                    f"{service.name} ({service.address()})",
                    on_timeout=service.log_excerpt,
                )
                service.after_healthy()
        wait_until(
            self.mariadb_replica.replicating,
            HEALTH_TIMEOUT_SECONDS,
            "MariaDB replication",
            on_timeout=self.mariadb_replica.detail,
        )
        return StackTimings(install_seconds=installed - began, start_seconds=time.monotonic() - installed)

    def _install(self, progress: Callable[[str], None]) -> None:
        """Install every service at once, in threads: the Go build of the object store takes both cores
        while Maven and apt download (apt-get and Maven each run one at a time, :data:`system._APT_LOCK`,
        :data:`jvm._MAVEN_LOCK`).  The first failure is raised once every install has ended."""
        pending = [service.name for service in self.services]
        progress(f"installing {', '.join(pending)}")
        with ThreadPoolExecutor(max_workers=len(self.services), thread_name_prefix="install") as pool:
            futures = {pool.submit(service.install): service.name for service in self.services}
            failures: list[BaseException] = []
            for future in as_completed(futures):
                pending.remove(futures[future])
                error = future.exception()
                if error is not None:
                    failures.append(error)
                if pending:
                    progress(f"installing {', '.join(pending)}")
        if failures:
            raise failures[0]

    def down(self) -> list[str]:
        """Stop the services this stack started (newest first); returns the names that were running."""
        return [service.name for service in reversed(self.services) if service.stop()]

    def status(self) -> list[ServiceStatus]:
        """Each service's status."""
        return [service.status() for service in self.services]
