"""The Postgres engine: pgoutput logical decoding through one publication and one slot per connector.

This module declares the engine's facts (:data:`CAPABILITIES`) and imports no driver;
:mod:`cdc_lake.sources.postgres.codec` reads its change events' positions (the decode path's hook),
:mod:`cdc_lake.sources.postgres.settings` holds a source's own settings (the config's hook),
:mod:`cdc_lake.sources.postgres.engine` is the engine (it imports psycopg), its roles combined
(``preflight``, ``capture``, ``snapshot``, ``operations``, over ``connection`` and ``catalog``),
:mod:`cdc_lake.sources.postgres.checks` its preflight checks, judged on recorded facts, and
:mod:`cdc_lake.sources.postgres.column_types` the bootstrap's read of each catalog type.
"""

from __future__ import annotations

from typing import Final

from cdc_lake.sources.capabilities import ConnectorTemplate, EngineCapabilities, JvmArtifacts
from cdc_lake.sources.postgres.codec import CODEC
from cdc_lake.sources.postgres.settings import PostgresSource

CAPABILITIES: Final = EngineCapabilities(
    name="postgres",
    connector_values=frozenset({"postgresql"}),
    positions=CODEC,
    replication_slots=True,
    source_model=PostgresSource,
    engine_module="cdc_lake.sources.postgres.engine",
    engine_class="PostgresEngine",
    column_module="cdc_lake.sources.postgres.column_types",
    connector_template=ConnectorTemplate(__name__, "connector.json"),
    jvm_artifacts=JvmArtifacts("debezium-connector-postgres", "org.postgresql:postgresql:42.7.7"),
    rewrite_log=True,
    unavailable_placeholders=True,
)
