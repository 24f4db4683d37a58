"""Source database engines: what each declares about itself, and its class, looked up by name.

Every engine package declares an :class:`~cdc_lake.sources.capabilities.EngineCapabilities` without
importing its driver; :data:`ENGINES` collects them, :func:`capabilities_for` finds one by the engine
name a source's config gives, :func:`capabilities_for_connector` by the ``source.connector`` value a
Debezium change event carries, :func:`codec_for_mark` an engine's position codec by the kind a stored
re-send mark names.  Shared code asks these facts rather than comparing engine names.  The lookups read
:data:`ENGINES` on every call (three entries), so an engine added to it, as the tests add a fake one, is
found everywhere.

``engine_for(source)`` imports the engine's module (and its database driver) on first use, so a
command that talks to no source, or only to Postgres sources, never loads the MySQL driver (and the
reverse).  The drivers are dependencies of every install, not plug-ins.  This package's ``__init__``
imports nothing heavier than the capabilities, so the decode path can use it without the engines'
imports, and loads nothing of the rest of ``cdc_lake`` but its exceptions and column representations:
the engine names (:mod:`cdc_lake.engines`), the JVM artifact sets (:mod:`cdc_lake.jvm`: each engine's
Debezium plugin and JDBC driver) and the connector rendering (:mod:`cdc_lake.connect.render`: each
engine's template) read an engine's declaration here.  A new engine is its package and its entry in
:data:`ENGINES`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources import mysql, postgres
from cdc_lake.sources.capabilities import EngineCapabilities, PositionCodec

if TYPE_CHECKING:
    from cdc_lake.sources.base import SourceEngine
    from cdc_lake.sources.settings import Source

__all__ = [
    "ENGINES",
    "EngineCapabilities",
    "PositionCodec",
    "capabilities_for",
    "capabilities_for_connector",
    "codec_for_mark",
    "engine_for",
]

ENGINES: Final[dict[str, EngineCapabilities]] = {
    caps.name: caps for caps in (postgres.CAPABILITIES, mysql.MARIADB, mysql.MYSQL)
}
"""Every engine's capabilities by engine name (the order of the JDBC drivers on Spark's classpath)."""


def capabilities_for(engine: str) -> EngineCapabilities:
    """The capabilities of the engine a source's config names ``engine``."""
    try:
        return ENGINES[engine]
    except KeyError:
        raise SourceEngineError(f"unknown source engine {engine!r} ({', '.join(sorted(ENGINES))})") from None


def capabilities_for_connector(connector: str) -> EngineCapabilities:
    """The capabilities of the engine whose Debezium connector writes ``source.connector = connector``."""
    for caps in ENGINES.values():
        if connector in caps.connector_values:
            return caps
    known = ", ".join(sorted(value for caps in ENGINES.values() for value in caps.connector_values))
    raise SourceEngineError(f"connector {connector!r} is not supported ({known})")


def codec_for_mark(kind: str) -> PositionCodec | None:
    """The position codec whose re-send marks are tagged ``kind``, None for a kind no engine writes."""
    return next((caps.positions for caps in ENGINES.values() if caps.positions.mark_kind == kind), None)


def engine_for(source: Source) -> SourceEngine:
    """The engine for ``source``, its module (and database driver) imported now."""
    caps = ENGINES.get(source.engine)
    if caps is None:
        known = ", ".join(sorted(ENGINES))
        raise SourceEngineError(f"source {source.name}: unknown engine {source.engine} ({known})")
    module = importlib.import_module(caps.engine_module)
    engine_class: type[SourceEngine] = getattr(module, caps.engine_class)
    return engine_class(source)
