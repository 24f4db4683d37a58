"""Debezium connector configs rendered from the engines' reviewed templates.

Each engine declares its template, a JSON file of package data in its own package
(:attr:`~cdc_lake.sources.capabilities.EngineCapabilities.connector_template`, e.g.
``cdc_lake/sources/postgres/connector.json``); this module reads it by the registry, so a new engine
needs no edit here (connectors/README.md says what the Connect worker needs).
A template is a flat JSON object of Kafka Connect settings whose values may hold
``{{placeholder}}`` markers.  :func:`render_connector` fills them from a typed
:class:`ConnectorParams`; a marker left without a value is an error naming it.  The
``{{...}}`` syntax is distinct from Kafka's ``${provider:key}`` config-provider syntax,
which passes through untouched: the source password is always ``${env:VAR}``, resolved
on the Connect worker and never known to cdc-lake.  The parameters are the engines' to build
(:mod:`cdc_lake.sources.connector`, re-exported here).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources

from cdc_lake import jvm
from cdc_lake.exceptions import ConfigError
from cdc_lake.sources import ENGINES, capabilities_for
from cdc_lake.sources.connector import (
    CONVERTER_SIDES,
    CONVERTERS,
    ENV_VAR,
    ConnectorParams,
    ConverterSettings,
    heartbeat_query,
    heartbeat_table_ddl,
    split_qualified,
)

__all__ = [
    "CONVERTERS",
    "ConnectorParams",
    "ConverterSettings",
    "heartbeat_table_ddl",
    "registry_api_url",
    "render_connector",
]


# Per Apicurio major line: the native REST API path its converter talks to, and the id
# handler that writes the Confluent framing (magic byte 0 + 4-byte big-endian id).
# See connectors/README.md for the sources behind both.
_APICURIO_LINES = {
    "2": ("/apis/registry/v2", "io.apicurio.registry.serde.Legacy4ByteIdHandler"),
    "3": ("/apis/registry/v3", "io.apicurio.registry.serde.Default4ByteIdHandler"),
}

# Placeholders whose value is derived from a differently named parameter.
_PARAM_FOR = {"heartbeat_action_query": "heartbeat_table"}

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}")
_NAME = re.compile(r"[A-Za-z0-9._-]+")


def schema_history_name(connector: str) -> str:
    """The schema-history topic of MySQL/MariaDB connector ``connector``."""
    return f"{connector}.schema-history"


def render_connector(engine: str, name: str, params: ConnectorParams) -> dict[str, str]:
    """The Kafka Connect config of connector ``name`` for a source of kind ``engine``.

    Raises :class:`ConfigError` naming the parameter or placeholder at fault.
    """
    if engine not in ENGINES:
        known = ", ".join(ENGINES)
        raise ConfigError(f"connector {name!r}: unknown source engine {engine!r} (expected one of {known})")
    _check_params(name, params)
    tables = [split_qualified(name, "tables", table) for table in params.tables]
    values: dict[str, str | None] = {
        "host": params.host,
        "port": str(params.port),
        "user": params.user,
        "password_env": params.password_env,
        "database": params.database,
        "topic_prefix": params.topic_prefix,
        "table_include_list": ",".join(_regex(*parts) for parts in tables),
        "database_include_list": ",".join(dict.fromkeys(_regex(db) for db, _ in tables)),
        "heartbeat_action_query": heartbeat_query(name, params.heartbeat_table),
        "heartbeat_interval_ms": str(params.heartbeat_interval_ms),
        "interval_handling": params.interval_handling,
        # MySQL/MariaDB templates: the binlog client asks the server for heartbeat events at 0.8 times
        # connect.keep.alive.interval.ms, and on an idle server only those let the connector emit its
        # heartbeats; the default (60 s) would delay the proof of streaming by up to a minute.  Half
        # the heartbeat interval makes a heartbeat due at most 40% late.
        "keep_alive_interval_ms": str(max(1000, params.heartbeat_interval_ms // 2)),
        "schema_history_topic": schema_history_name(name),
        "kafka_bootstrap": params.kafka_bootstrap,
        "registry_api_url": registry_api_url(params.registry_url),
        "apicurio_id_handler": _apicurio_line()[1],
        "topic_partitions": str(params.topic_partitions),
        "topic_replication_factor": str(params.topic_replication_factor),
    }
    shadowed = sorted(set(params.engine_values) & set(values))
    if shadowed:
        raise ConfigError(f"connector {name!r}: engine values replace shared ones: {', '.join(shadowed)}")
    values.update(params.engine_values)
    config = {key: _fill(name, engine, value, values) for key, value in _template(engine).items()}
    converter = params.converter.settings(name)
    if converter is not None:
        config = {key: value for key, value in config.items() if not key.startswith(CONVERTER_SIDES)}
        config.update(converter)
    if params.columns:
        config["column.include.list"] = _column_include_list(name, params, tables)
    if "schema.history.internal.kafka.bootstrap.servers" in config:
        for key, value in params.schema_history_clients.items():
            config[f"schema.history.internal.producer.{key}"] = value
            config[f"schema.history.internal.consumer.{key}"] = value
    for key, value in params.database_settings.items():
        if not key.startswith("database.") or key in config:
            raise ConfigError(f"connector {name!r}: {key!r} is not an extra database.* setting")
        config[key] = value
    return config


def registry_api_url(base_url: str) -> str:
    """The native Apicurio REST API under ``base_url`` that the installed converter line speaks."""
    return base_url.rstrip("/") + _apicurio_line()[0]


def _check_params(name: str, params: ConnectorParams) -> None:
    if not _NAME.fullmatch(name):
        raise ConfigError(f"connector name {name!r} must match {_NAME.pattern}")
    if not _NAME.fullmatch(params.topic_prefix):
        raise ConfigError(
            f"connector {name!r}: topic_prefix {params.topic_prefix!r} must match {_NAME.pattern}"
        )
    if not ENV_VAR.fullmatch(params.password_env):
        raise ConfigError(f"connector {name!r}: password_env must be an environment variable NAME")
    if not 0 < params.port < 65536:
        raise ConfigError(f"connector {name!r}: port {params.port} is out of range")
    for setting in ("heartbeat_interval_ms", "topic_partitions", "topic_replication_factor"):
        if getattr(params, setting) < 1:
            raise ConfigError(f"connector {name!r}: {setting} must be at least 1")
    if isinstance(params.tables, str) or not params.tables:
        raise ConfigError(f"connector {name!r}: tables must be a non-empty list of qualified table names")
    if not params.registry_url.startswith(("http://", "https://")):
        raise ConfigError(f"connector {name!r}: registry_url {params.registry_url!r} must be an http(s) URL")
    unknown = sorted(set(params.columns) - set(params.tables))
    if unknown:
        raise ConfigError(f"connector {name!r}: columns names tables not in tables: {', '.join(unknown)}")
    for table, cols in params.columns.items():
        if isinstance(cols, str) or not cols:
            raise ConfigError(f"connector {name!r}: columns of {table} must be a non-empty list")


def _column_include_list(name: str, params: ConnectorParams, tables: list[tuple[str, str]]) -> str:
    # Debezium applies column.include.list to every captured table, so a table without a
    # frozen column list must be matched whole or it would lose all its columns.
    entries: list[str] = []
    for qualified, (db, table) in zip(params.tables, tables, strict=True):
        cols = params.columns.get(qualified)
        if cols is None:
            entries.append(_regex(db, table) + r"\..+")
            continue
        for col in cols:
            if not col or "," in col:
                raise ConfigError(
                    f"connector {name!r}: column {col!r} of {qualified} is empty or has a comma"
                )
            entries.append(_regex(db, table, col))
    return ",".join(entries)


def _regex(*parts: str) -> str:
    # Debezium include lists are comma-separated Java regexes matched against the whole
    # qualified name; re.escape only adds backslashes before non-alphanumerics, which
    # Java reads as literal characters too.
    return r"\.".join(re.escape(part) for part in parts)


def _apicurio_line() -> tuple[str, str]:
    major = jvm.APICURIO_VERSION.split(".", 1)[0]
    if major not in _APICURIO_LINES:
        raise ConfigError(f"Apicurio converter {jvm.APICURIO_VERSION} has no known Confluent-format settings")
    return _APICURIO_LINES[major]


def connector_class(engine: str) -> str:
    """The Debezium connector class of ``engine``, as its template declares it."""
    return _template(engine)["connector.class"]


def _template(engine: str) -> dict[str, str]:
    declared = capabilities_for(engine).connector_template
    text = resources.files(declared.package).joinpath(declared.resource).read_text(encoding="utf-8")
    loaded: dict[str, str] = json.loads(text)
    return loaded


def _fill(name: str, engine: str, template_value: str, values: Mapping[str, str | None]) -> str:
    def substitute(match: re.Match[str]) -> str:
        placeholder = match.group(1).strip()
        where = f"connector {name!r}: template {engine}.json"
        if placeholder not in values:
            raise ConfigError(f"{where} has unknown placeholder {{{{{placeholder}}}}}")
        value = values[placeholder]
        if value is None:
            param = _PARAM_FOR.get(placeholder, placeholder)
            raise ConfigError(f"{where} placeholder {{{{{placeholder}}}}} is unresolved: set {param}")
        return value

    return _PLACEHOLDER.sub(substitute, template_value)
