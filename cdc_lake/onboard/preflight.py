"""Preflight checks: each one a pass, warning or failure with what it found and how to fix it.

Source engines check their database (:meth:`cdc_lake.sources.base.SourceEngine.preflight`);
the result type they answer with is :class:`cdc_lake.sources.checks.CheckResult`; this module holds
the checks of the services every source needs:
Kafka Connect with the engine's Debezium plugin, the schema registry, Kafka, and connector
names that are free or already ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from cdc_lake.config import Config
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.connect.render import connector_class, registry_api_url
from cdc_lake.decode.registry import CREDENTIALS_HINT, tls_problem
from cdc_lake.exceptions import ConnectError, PreflightError
from cdc_lake.sources.checks import CheckResult, name_list

# Connector settings that say which database and topics a connector captures: when a
# registered connector differs from ours in one of them, it belongs to someone else.
IDENTITY_KEYS = (
    "connector.class",
    "database.hostname",
    "database.port",
    "database.dbname",
    "topic.prefix",
    "slot.name",
)

_SERVICE_TIMEOUT = 5.0


def raise_for_failures(source: str, results: Sequence[CheckResult]) -> None:
    """Raise :class:`PreflightError` naming every failed check of ``source`` and its fix, if any failed."""
    failed = [result for result in results if result.failed]
    if failed:
        found = "; ".join(f"{result.name}: {result.detail} (fix: {result.fix})" for result in failed)
        raise PreflightError(f"source {source}: {len(failed)} preflight check(s) failed: {found}")


def shown_url(url: str) -> str:
    """``url`` without user info, fit for a message."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def registry_base_url(url: str) -> str:
    """The registry server's base URL (``scheme://host:port``) from the configured Confluent API URL."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def check_connect(client: KafkaConnectClient, engine: str) -> CheckResult:
    """Kafka Connect answers and has the Debezium plugin of ``engine`` installed."""
    name = "kafka connect"
    try:
        plugins = {plugin.class_name: plugin.version for plugin in client.plugins()}
    except ConnectError as exc:
        if "HTTP 401" in str(exc) or "HTTP 403" in str(exc):
            return CheckResult.fail(
                name,
                f"refused: {exc}",
                "set kafka_connect.user and kafka_connect.password (the REST API's basic auth credentials)",
            )
        return CheckResult.fail(
            name, f"unreachable: {exc}", "start Kafka Connect or fix kafka_connect.url in the config"
        )
    wanted = connector_class(engine)
    if wanted not in plugins:
        return CheckResult.fail(
            name,
            f"{client.url} has no {wanted} plugin",
            f"install the Debezium {engine} connector on every Connect worker (plugin.path)",
        )
    return CheckResult.ok(name, f"{client.url}: {wanted} {plugins[wanted]}")


def check_registry(config: Config) -> CheckResult:
    """The schema registry answers on its Confluent API (the decoder; Confluent's converter) and, with the
    Apicurio converter, on Apicurio's native API."""
    name = "schema registry"
    settings = config.schema_registry
    urls = [settings.url.rstrip("/") + "/subjects"]
    if settings.converter == "apicurio":
        urls.append(registry_api_url(registry_base_url(settings.url)) + "/system/info")
    for url in urls:
        try:
            response = requests.get(
                url,
                timeout=_SERVICE_TIMEOUT,
                auth=settings.basic_auth(),
                headers=settings.auth_headers(),
                verify=settings.ca_cert or True,
                cert=settings.client_certificate(),
            )
        except requests.exceptions.SSLError as exc:
            what, fix = tls_problem(exc, client_certificate=settings.client_certificate() is not None)
            return CheckResult.fail(name, f"{shown_url(url)}: {what}", fix)
        except requests.RequestException as exc:
            return CheckResult.fail(
                name,
                f"{shown_url(url)} unreachable ({type(exc).__name__})",
                "start the schema registry or fix schema_registry.url in the config",
            )
        if response.status_code in (401, 403):
            refused = f"{shown_url(url)} refused the credentials (HTTP {response.status_code})"
            return CheckResult.fail(name, refused, CREDENTIALS_HINT)
        if response.status_code != 200:
            return CheckResult.fail(
                name,
                f"{shown_url(url)} answered HTTP {response.status_code}",
                "point schema_registry.url at the registry's Confluent API (…/apis/ccompat/v7)",
            )
    return CheckResult.ok(name, shown_url(settings.url))


def check_kafka(config: Config) -> CheckResult:
    """The Kafka cluster answers a metadata request."""
    name = "kafka"
    servers = config.kafka.bootstrap_servers
    seen: list[KafkaError] = []
    admin = kafka_admin(config, seen)
    try:
        metadata = admin.list_topics(timeout=_SERVICE_TIMEOUT)
    except KafkaException as exc:
        # A failed login or TLS handshake surfaces as "broker transport failure": say what it was
        # (error events reach ``seen`` only when the client is polled).
        admin.poll(0)
        refused = [e for e in seen if e.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL)]
        if refused:
            return CheckResult.fail(
                name,
                f"{servers} refused the connection: {refused[-1].str()}",
                "check the security settings (sasl.*, ssl.*) in kafka.consumer",
            )
        return CheckResult.fail(
            name, f"{servers} unreachable: {exc}", "start Kafka or fix kafka.bootstrap_servers in the config"
        )
    return CheckResult.ok(name, f"{servers}: {len(metadata.brokers)} broker(s)")


def kafka_admin(config: Config, errors: list[KafkaError] | None = None) -> AdminClient:
    """An admin client for the configured cluster, with the consumer settings (security, etc.) too.

    librdkafka's own log is off: it would print a line to stderr per failed connection attempt,
    and every failure reaches the caller as an exception (and a check result) anyway; ``errors``
    collects the client's error events (a failed authentication is only reported there).
    """
    settings: dict[str, Any] = {
        **config.kafka.consumer,
        "bootstrap.servers": config.kafka.bootstrap_servers,
        "log_level": 0,
    }
    if errors is not None:
        settings["error_cb"] = errors.append
    return AdminClient(settings)


def check_connector_names(
    client: KafkaConnectClient, desired: Mapping[str, Mapping[str, str]]
) -> tuple[CheckResult, dict[str, dict[str, str]]]:
    """Each planned connector name is free in Connect or registered with our identity.

    Returns the check and the configs of the planned connectors already registered.
    """
    name = "connector names"
    try:
        existing = set(client.list_connectors())
        registered = {
            connector: client.get_config(connector) for connector in desired if connector in existing
        }
    except ConnectError as exc:
        return CheckResult.fail(name, f"cannot list connectors: {exc}", "start Kafka Connect"), {}
    clashes = []
    for connector, current in registered.items():
        differs = [
            f"{key}={current.get(key, '')}"
            for key in IDENTITY_KEYS
            if key in desired[connector] and current.get(key) != desired[connector][key]
        ]
        if differs:
            clashes.append(f"{connector} ({', '.join(differs)})")
    if clashes:
        return (
            CheckResult.fail(
                name,
                f"registered in Kafka Connect for another source: {name_list(clashes)}",
                "delete or rename that connector, or give this source another name",
            ),
            {},
        )
    fresh = [connector for connector in desired if connector not in registered]
    detail = f"{len(registered)} already ours, {len(fresh)} new"
    return CheckResult.ok(name, detail), registered
