"""What a source's Debezium connector template is filled with: the parameters an engine's hook builds.

:class:`ConnectorParams` holds every template parameter of one connector; each engine's
``SourceEngine.engine_connector_params`` adds its own (Postgres: database, heartbeat table;
MySQL/MariaDB: schema-history clients; each its capture ids' template values).
:class:`ConverterSettings` chooses the Avro converter. :mod:`cdc_lake.connect.render` fills the
templates from them; this module sits below it and below the config, so the engines build their
parameters without importing either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cdc_lake.exceptions import ConfigError
from cdc_lake.sources.settings import DEFAULT_HEARTBEAT_SECONDS

ENV_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An environment variable name (the ``VAR`` of ``${env:VAR}``)."""

CONVERTERS = ("apicurio", "confluent")
"""Avro converters a connector can write with; both write the Confluent wire format the decoder reads."""

CONFLUENT_AVRO_CONVERTER = "io.confluent.connect.avro.AvroConverter"
CONVERTER_SIDES = ("key.converter", "value.converter")


@dataclass(frozen=True)
class ConverterSettings:
    """Which Avro converter the connector uses and how it authenticates to the registry.

    ``apicurio`` (the local stack's) takes its settings from the engine templates.  ``confluent``
    is Confluent's ``AvroConverter`` against ``confluent_url`` (any Confluent-API registry).
    ``credentials_env`` names the environment variable on the Connect workers holding the
    registry credentials (``user:password`` for ``user_info``, a token for ``bearer``); the
    connector config carries only the ``${env:VAR}`` placeholder.
    """

    kind: str = "apicurio"
    confluent_url: str | None = None
    credentials_env: str | None = None
    credentials_kind: str = "user_info"

    def settings(self, connector: str) -> dict[str, str] | None:
        """The converter settings replacing the templates' (None: keep the templates' Apicurio block)."""
        if self.kind not in CONVERTERS:
            raise ConfigError(
                f"connector {connector!r}: unknown converter {self.kind!r} (expected one of {CONVERTERS})"
            )
        if self.kind == "apicurio":
            if self.credentials_env is not None:
                raise ConfigError(
                    f"connector {connector!r}: registry credentials for the Connect workers need "
                    "schema_registry.converter: confluent (the Apicurio converter is rendered without auth)"
                )
            return None
        if not self.confluent_url:
            raise ConfigError(f"connector {connector!r}: the Confluent converter needs the registry URL")
        block: dict[str, str] = {}
        for side in CONVERTER_SIDES:
            block[side] = CONFLUENT_AVRO_CONVERTER
            block[f"{side}.schema.registry.url"] = self.confluent_url
            if self.credentials_env is None:
                continue
            if not ENV_VAR.fullmatch(self.credentials_env):
                raise ConfigError(
                    f"connector {connector!r}: {self.credentials_env!r} is not an environment variable name"
                )
            secret = f"${{env:{self.credentials_env}}}"
            if self.credentials_kind == "bearer":
                block[f"{side}.bearer.auth.credentials.source"] = "STATIC_TOKEN"
                block[f"{side}.bearer.auth.token"] = secret
            else:
                block[f"{side}.basic.auth.credentials.source"] = "USER_INFO"
                block[f"{side}.basic.auth.user.info"] = secret
        return block


@dataclass(frozen=True)
class ConnectorParams:
    """Everything a connector template needs, for one source and one connector.

    ``tables`` are fully qualified: ``schema.table`` for Postgres, ``database.table`` for
    MySQL/MariaDB.  ``columns`` maps some of those tables to their frozen column lists;
    tables absent from it keep all their columns.  ``password_env`` is the NAME of the
    environment variable holding the password on the Connect worker.  ``registry_url``
    is the registry server's base URL (``http://host:port``); the API path is added to
    match the installed converter.  Postgres needs ``database`` and ``heartbeat_table``
    (``schema.table``); MySQL/MariaDB need ``kafka_bootstrap`` (for the schema history topic).
    ``interval_handling`` is the Postgres connector's ``interval.handling.mode`` (the source's setting).
    ``database_settings`` are extra ``database.*`` connector settings (TLS), added as given.
    ``converter`` chooses the Avro converter (:class:`ConverterSettings`).
    ``schema_history_clients`` are Java Kafka client settings (security) for the MySQL/MariaDB
    schema-history producer and consumer.  ``engine_values`` are the template values the engine's
    capture ids fill (:meth:`~cdc_lake.sources.settings.CaptureIds.template_values`: Postgres
    ``slot_name`` and ``publication_name``, MySQL/MariaDB ``server_id``), added to the shared ones.
    """

    host: str
    port: int
    user: str
    password_env: str
    topic_prefix: str
    tables: Sequence[str]
    registry_url: str
    database: str | None = None
    columns: Mapping[str, Sequence[str]] = field(default_factory=dict)
    heartbeat_table: str | None = None
    kafka_bootstrap: str | None = None
    heartbeat_interval_ms: int = round(DEFAULT_HEARTBEAT_SECONDS * 1000)
    interval_handling: str = "numeric"
    topic_partitions: int = 1
    topic_replication_factor: int = 1
    database_settings: Mapping[str, str] = field(default_factory=dict)
    converter: ConverterSettings = field(default_factory=ConverterSettings)
    schema_history_clients: Mapping[str, str] = field(default_factory=dict)
    engine_values: Mapping[str, str | None] = field(default_factory=dict)


def split_qualified(name: str, setting: str, qualified: str) -> tuple[str, str]:
    parts = qualified.split(".")
    if len(parts) != 2 or not all(parts) or "," in qualified:
        raise ConfigError(
            f"connector {name!r}: {setting} entry {qualified!r} must be 'schema.table' without commas"
        )
    return parts[0], parts[1]


def _pg_ident(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def heartbeat_table_ddl(table: str) -> str:
    """Postgres DDL for the heartbeat table (``schema.table``) the connector's heartbeat query writes.

    One row per connector; the table must also be in the connector's publication so that
    heartbeat writes reach the slot and let it confirm WAL on an otherwise idle database.
    """
    schema, name = split_qualified("heartbeat", "heartbeat_table", table)
    return (
        f"CREATE TABLE IF NOT EXISTS {_pg_ident(schema)}.{_pg_ident(name)} "
        "(connector text PRIMARY KEY, ts timestamptz NOT NULL)"
    )


def heartbeat_query(connector: str, table: str | None) -> str | None:
    if table is None:
        return None
    schema, name = split_qualified(connector, "heartbeat_table", table)
    literal = "'" + connector.replace("'", "''") + "'"
    return (
        f"INSERT INTO {_pg_ident(schema)}.{_pg_ident(name)} (connector, ts) VALUES ({literal}, now()) "
        "ON CONFLICT (connector) DO UPDATE SET ts = EXCLUDED.ts"
    )
