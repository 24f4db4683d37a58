"""The names of the source engines cdc-lake knows: the one list every other module takes them from.

Each name has its engine's capabilities (:data:`cdc_lake.sources.ENGINES`), a Debezium connector plugin
and a JDBC driver (:data:`cdc_lake.jvm.DEBEZIUM_PLUGINS`, :data:`cdc_lake.jvm.JDBC_DRIVERS`) and a
connector template (``cdc_lake/connect/templates/<name>.json``),
and is what a source's ``engine`` in the config may say.  This module imports nothing, so the config,
the JVM artifact list and the connector rendering can all use it without an import cycle.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

EngineName = Literal["postgres", "mysql", "mariadb"]
"""A source engine's name, as the config spells it."""

ENGINE_NAMES: Final[tuple[str, ...]] = get_args(EngineName)
