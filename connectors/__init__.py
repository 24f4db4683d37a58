"""Debezium connectors: reviewed config templates, their rendering, and a Kafka Connect REST client."""

from connectors.client import ConnectorPlugin, ConnectorStatus, KafkaConnectClient, TaskStatus
from connectors.render import (
    ConnectorParams,
    heartbeat_table_ddl,
    registry_api_url,
    render_connector,
)

__all__ = [
    "ConnectorParams",
    "ConnectorPlugin",
    "ConnectorStatus",
    "KafkaConnectClient",
    "TaskStatus",
    "heartbeat_table_ddl",
    "registry_api_url",
    "render_connector",
]
