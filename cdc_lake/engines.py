"""The names of the source engines cdc-lake knows: the one list every other module takes them from.

Each name has its engine's capabilities (:data:`cdc_lake.sources.ENGINES`), a Debezium connector plugin
and a JDBC driver (:data:`cdc_lake.jvm.DEBEZIUM_PLUGINS`, :data:`cdc_lake.jvm.JDBC_DRIVERS`) and a
connector template (``cdc_lake/connect/templates/<name>.json``).  The config checks a source's
``engine`` against the engine registry (:data:`cdc_lake.sources.ENGINES`), where these three are
registered; this list keys the facts outside an engine's package (its jars and its template).  This
module imports nothing, so the JVM artifact list and the connector rendering can use it without an
import cycle.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

EngineName = Literal["postgres", "mysql", "mariadb"]
"""A source engine's name, as the config spells it."""

ENGINE_NAMES: Final[tuple[str, ...]] = get_args(EngineName)
