"""The MySQL family: MySQL and MariaDB (a flavour of it), row-based binlog capture, positions as GTID sets.

This module declares both engines' facts (:data:`MYSQL`, :data:`MARIADB`) and imports no driver;
:mod:`cdc_lake.sources.mysql.codec` reads their change events' positions (the decode path's hook),
:mod:`cdc_lake.sources.mysql.settings` holds a source's own settings (the config's hook),
:mod:`cdc_lake.sources.mysql.engine` holds the engines (they import pymysql), their roles combined
(``preflight``, ``capture``, ``snapshot``, ``operations``, over ``connection``),
:mod:`cdc_lake.sources.mysql.checks` their preflight checks, :mod:`cdc_lake.sources.mysql.tls`
their TLS settings for every client, :mod:`cdc_lake.sources.mysql.column_types` the bootstrap's
read of each catalog type and :mod:`cdc_lake.sources.mysql.ddl` the table renames of a schema-history
statement (the swap detection's hook).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from cdc_lake.sources.capabilities import ConnectorTemplate, EngineCapabilities, JvmArtifacts
from cdc_lake.sources.mysql.codec import CODEC
from cdc_lake.sources.mysql.ddl import table_renames
from cdc_lake.sources.mysql.settings import MySqlSource

MYSQL: Final = EngineCapabilities(
    name="mysql",
    connector_values=frozenset({"mysql"}),
    positions=CODEC,
    replication_slots=False,
    source_model=MySqlSource,
    engine_module="cdc_lake.sources.mysql.engine",
    engine_class="MySqlEngine",
    column_module="cdc_lake.sources.mysql.column_types",
    connector_template=ConnectorTemplate(__name__, "connector-mysql.json"),
    jvm_artifacts=JvmArtifacts("debezium-connector-mysql", "com.mysql:mysql-connector-j:9.1.0"),
    table_renames=table_renames,
    transaction_progress_offset_keys=("event", "row"),
)

MARIADB: Final = replace(
    MYSQL,
    name="mariadb",
    connector_values=frozenset({"mariadb"}),
    engine_class="MariaDbEngine",
    connector_template=ConnectorTemplate(__name__, "connector-mariadb.json"),
    jvm_artifacts=JvmArtifacts("debezium-connector-mariadb", "org.mariadb.jdbc:mariadb-java-client:3.5.3"),
)
"""MariaDB, the MySQL family's flavour: the same capture, its own connector and engine class."""
