"""Which connectors a source gets, what they are called, and their rendered Kafka Connect configs.

Tier-0 tables each get a connector of their own (and, on Postgres, their own slot and
publication), so a busy or stuck shared connector cannot delay them; every other table of
the source shares one connector.  Every connector of a source keeps the source's
``topic.prefix``, so a table's topic (``<prefix>.<schema>.<table>``) never depends on its tier.

Names are stable functions of the source and table names, so re-running onboarding plans
exactly the same connectors, and ``lag`` (what the primary keeps per connector) and ``validate``
(a table's topic) plan what onboarding made without asking Kafka Connect:

* connectors: ``cdc-lake.<source>`` and ``cdc-lake.<source>.tier0.<schema>.<table>``
* what names each connector's capture on the source is the engine's (``Source.capture_ids``):
  Postgres slots and publications (the source's ``slot_name`` / ``publication_name``, and for tier 0
  ``<slot_name>_t0_<schema>_<table>_<hash>``, at most 63 characters), MySQL/MariaDB server ids (the
  source's ``server_id``; tier 0 a stable id derived from it)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cdc_lake.config import Source, Table
from cdc_lake.connect.render import ConnectorParams, render_connector, schema_history_name
from cdc_lake.connect.streaming import HEARTBEAT_TOPIC_PREFIX, heartbeat_topic
from cdc_lake.exceptions import ConfigError
from cdc_lake.sources import capabilities_for
from cdc_lake.sources.base import Capture
from cdc_lake.sources.settings import short_digest

CONNECTOR_PREFIX = "cdc-lake"
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class ConnectorPlan:
    """One connector of a source: what it captures and where its heartbeats go.

    ``heartbeat_key`` is what :func:`cdc_lake.connect.streaming.heartbeat_topic` turns into this
    connector's heartbeat topic; tier-0 connectors set Debezium's ``topic.heartbeat.prefix``
    (``heartbeat_prefix``) so that each has a heartbeat topic of its own.
    """

    name: str
    capture: Capture
    tier0: bool
    heartbeat_key: str
    heartbeat_prefix: str | None = None

    @property
    def heartbeat_topic(self) -> str:
        """The topic this connector's heartbeats land in."""
        return heartbeat_topic(self.heartbeat_key)


def name_slug(table_name: str) -> str:
    """``schema.table`` made safe for connector and topic names (a hash marks any character replaced)."""
    safe = _UNSAFE_NAME_CHARS.sub("_", table_name)
    return safe if safe == table_name else f"{safe}-{short_digest(table_name)}"


def shared_connector_name(source: Source) -> str:
    """The connector of a source's tables outside tier 0."""
    return f"{CONNECTOR_PREFIX}.{source.name}"


def tier0_connector_name(source: Source, table_name: str) -> str:
    """The connector of one tier-0 table (``schema.table``)."""
    return f"{CONNECTOR_PREFIX}.{source.name}.tier0.{name_slug(table_name)}"


def topic_prefix(source: Source) -> str:
    """The ``topic.prefix`` of every connector of ``source``: its ``topic_prefix``, else its name."""
    return source.topic_prefix or source.name


def table_topic(source: Source, table: Table) -> str:
    """The Kafka topic Debezium writes ``table``'s change events to: ``<topic_prefix>.<schema>.<table>``."""
    return f"{topic_prefix(source)}.{table.name}"


def schema_history_topic(source: Source, table: Table) -> str | None:
    """The schema-history topic of the connector that captures ``table``, where its DDL statements are
    recorded (MySQL/MariaDB); None where the engine reports no table renames (Postgres)."""
    if capabilities_for(source.engine).table_renames is None:
        return None
    connector = tier0_connector_name(source, table.name) if table.tier == 0 else shared_connector_name(source)
    return schema_history_name(connector)


def plan_source(source: Source, tables: Sequence[Table]) -> list[ConnectorPlan]:
    """The connectors for ``tables`` of ``source``: one per tier-0 table (by name), then the shared one."""
    prefix = topic_prefix(source)
    tier0 = sorted((table for table in tables if table.tier == 0), key=lambda table: table.name)
    shared = [table for table in tables if table.tier != 0]
    ids = source.capture_ids([table.name for table in tier0])
    plans = []
    for table in tier0:
        slug = name_slug(table.name)
        plans.append(
            ConnectorPlan(
                name=tier0_connector_name(source, table.name),
                capture=Capture(
                    connector=tier0_connector_name(source, table.name), tables=(table,), ids=ids[table.name]
                ),
                tier0=True,
                heartbeat_key=f"tier0.{slug}.{prefix}",
                heartbeat_prefix=f"{HEARTBEAT_TOPIC_PREFIX}.tier0.{slug}",
            )
        )
    if shared:
        name = shared_connector_name(source)
        plans.append(
            ConnectorPlan(
                name=name,
                capture=Capture(
                    connector=name, tables=tuple(sorted(shared, key=lambda table: table.name)), ids=ids[None]
                ),
                tier0=False,
                heartbeat_key=prefix,
            )
        )
    return plans


def render_config(engine: str, plan: ConnectorPlan, params: ConnectorParams) -> dict[str, str]:
    """The template's config for ``plan`` plus the settings the plan decides per connector.

    * ``custom.metric.tags`` names the connector in Debezium's JMX metrics: connectors of one
      source share ``topic.prefix``, and without a distinct tag a second connector waits a
      minute for the first one's metrics name to free up.  Debezium appends it to the MBean
      name (``...,server=<prefix>,connector=<name>``), and the shipped JMX exporter rules
      (``cdc_lake/stack/resources/jmx-exporter-connect.yaml``) make it the ``connector`` label
      the Debezium alert and dashboard panels match on.
    * ``topic.heartbeat.prefix`` gives a tier-0 connector its own heartbeat topic.
    * ``message.key.columns`` keys the events of tables with a configured key.
    """
    config = render_connector(engine, plan.name, params)
    config["custom.metric.tags"] = f"connector={plan.name}"
    if plan.heartbeat_prefix is not None:
        config["topic.heartbeat.prefix"] = plan.heartbeat_prefix
    keyed = [table for table in plan.capture.tables if table.key]
    if keyed:
        config["message.key.columns"] = ";".join(_key_columns(plan.name, table) for table in keyed)
    return config


def _key_columns(connector: str, table: Table) -> str:
    columns = table.key or []
    bad = [column for column in columns if not column or "," in column or ";" in column]
    if bad:
        raise ConfigError(
            f"connector {connector}: key column {bad[0]!r} of {table.name} has a comma or semicolon"
        )
    return f"{re.escape(table.schema_name)}\\.{re.escape(table.table_name)}:{','.join(columns)}"
