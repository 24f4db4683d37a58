"""The MySQL family's capture setup: nothing created on the source, and the connector's parameters.

:class:`MySqlCapture` creates only the connector's truststore when the primary's ``ssl_ca`` is set;
the binlog connector needs no slot or publication, so publishing and releasing change nothing.
"""

from __future__ import annotations

from dataclasses import replace

from cdc_lake.sources.base import Capture, Change, ConnectorEndpoints, PreflightOptions
from cdc_lake.sources.connector import ConnectorParams
from cdc_lake.sources.mysql.connection import MySqlBase
from cdc_lake.sources.mysql.settings import MySqlCaptureIds
from cdc_lake.sources.mysql.tls import connector_settings, ensure_truststore


class MySqlCapture(MySqlBase):
    """The MySQL family's capture setup role: the truststore, the connector's server id and TLS settings."""

    def planned_changes(self, capture: Capture, options: PreflightOptions) -> list[str]:
        """Nothing: a binlog connector needs no objects on the source."""
        return []

    def prepare(self, capture: Capture, options: PreflightOptions) -> list[Change]:
        """Nothing on the source; the connector's truststore when the primary's ``ssl_ca`` is set."""
        primary = self.settings.primary
        if primary.mysql_tls() and ensure_truststore(primary, "primary"):
            return [Change(f"created truststore {primary.truststore_path()} from {primary.ssl_ca}")]
        return []

    def publish(self, capture: Capture) -> list[Change]:
        """Nothing to align: the include list alone selects the tables."""
        return []

    def release(
        self, slot_name: str | None, publication_name: str | None, drop_slot: bool
    ) -> tuple[list[str], list[str]]:
        """Nothing to drop on the source (the schema history topic stays in Kafka)."""
        return [], []

    def slot_exists(self, slot_name: str) -> bool:
        """Binlog connectors have no slots."""
        return False

    def engine_connector_params(
        self, shared: ConnectorParams, capture: Capture, endpoints: ConnectorEndpoints
    ) -> ConnectorParams:
        """The binlog connector's server id, schema history clients and TLS settings."""
        return replace(
            shared,
            engine_values=MySqlCaptureIds.of(capture.ids).template_values(),
            kafka_bootstrap=endpoints.kafka_bootstrap,
            schema_history_clients=endpoints.kafka_clients,
            database_settings=connector_settings(self.flavor, self.settings.primary),
        )
