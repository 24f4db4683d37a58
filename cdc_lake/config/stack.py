"""The local stack (``cdc-lake stack``): its data directory, its services' host ports and the opt-in
Trino."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from cdc_lake.config.paths import DEFAULT_STATE_DIR
from cdc_lake.sources.settings import ConfigModel as _Model


class StackPorts(_Model):
    """Host ports of the local stack's services."""

    postgres_primary: int = Field(default=15432, ge=1, le=65535)
    postgres_replica: int = Field(default=15433, ge=1, le=65535)
    mariadb_primary: int = Field(default=13306, ge=1, le=65535)
    mariadb_replica: int = Field(default=13307, ge=1, le=65535)
    kafka: int = Field(default=19092, ge=1, le=65535)
    kafka_controller: int = Field(default=19093, ge=1, le=65535)
    kafka_secure: int = Field(default=19094, ge=1, le=65535)
    """The broker's SASL/SCRAM-over-TLS listener (user ``cdc-lake``, the stack CA)."""
    connect: int = Field(default=18083, ge=1, le=65535)
    connect_secure: int = Field(default=18084, ge=1, le=65535)
    """The secured Connect worker (REST basic auth; its Kafka clients on ``kafka_secure``)."""
    connect_metrics: int = Field(default=18085, ge=1, le=65535)
    """The JMX exporter agent of the Connect worker: Debezium's metrics at ``/metrics``."""
    connect_secure_metrics: int = Field(default=18086, ge=1, le=65535)
    """The same for the secured Connect worker."""
    registry: int = Field(default=18081, ge=1, le=65535)
    registry_secure: int = Field(default=18082, ge=1, le=65535)
    """The secured registry: Apicurio's Confluent API behind HTTP basic auth (checked by ``keycloak``)."""
    keycloak: int = Field(default=18180, ge=1, le=65535)
    """The OpenID Connect server of the secured registry."""
    object_store: int = Field(default=17070, ge=1, le=65535)
    glue: int = Field(default=17080, ge=1, le=65535)
    hive_metastore: int = Field(default=19083, ge=1, le=65535)
    spark_master: int = Field(default=17077, ge=1, le=65535)
    spark_master_ui: int = Field(default=18090, ge=1, le=65535)
    spark_worker_ui: int = Field(default=18091, ge=1, le=65535)
    trino: int = Field(default=18095, ge=1, le=65535)


class TrinoStackSettings(_Model):
    """The stack's opt-in Trino (``cdc-lake stack up --with trino`` starts it too)."""

    enabled: bool = False
    java_home: Path | None = None
    """A JDK 24 or newer for Trino; unset: the newest one under /usr/lib/jvm."""


class StackSettings(_Model):
    """The local stack: where its data lives and which ports it listens on."""

    data_dir: Path = Path(DEFAULT_STATE_DIR) / "stack"
    ports: StackPorts = Field(default_factory=StackPorts)
    trino: TrinoStackSettings = Field(default_factory=lambda: TrinoStackSettings())
