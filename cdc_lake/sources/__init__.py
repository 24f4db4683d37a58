"""Source database engines, looked up by the ``engine`` of a configured source.

``engine_for(source)`` imports the engine's module on first use, so a deployment with only
Postgres sources never needs the MySQL driver (and the reverse); a missing driver is an
error saying what to install.
"""

from __future__ import annotations

import importlib

from cdc_lake.config import Source
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.base import (
    Capture,
    CaptureLag,
    Change,
    ConnectorEndpoints,
    PreflightOptions,
    ReplicaDelay,
    SourceEngine,
)

__all__ = [
    "ENGINE_CLASSES",
    "Capture",
    "CaptureLag",
    "Change",
    "ConnectorEndpoints",
    "PreflightOptions",
    "ReplicaDelay",
    "SourceEngine",
    "engine_for",
]

# engine name -> (module, class, the driver module it imports, the package that provides it)
ENGINE_CLASSES: dict[str, tuple[str, str, str, str]] = {
    "postgres": ("cdc_lake.sources.postgres", "PostgresEngine", "psycopg", "psycopg[binary]"),
    "mysql": ("cdc_lake.sources.mysql", "MySqlEngine", "pymysql", "pymysql"),
    "mariadb": ("cdc_lake.sources.mysql", "MariaDbEngine", "pymysql", "pymysql"),
}


def engine_for(source: Source) -> SourceEngine:
    """The engine for ``source``, its module (and database driver) imported now."""
    try:
        module_name, class_name, driver, package = ENGINE_CLASSES[source.engine]
    except KeyError:
        known = ", ".join(sorted(ENGINE_CLASSES))
        raise SourceEngineError(f"source {source.name}: unknown engine {source.engine} ({known})") from None
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == driver:
            raise SourceEngineError(
                f"source {source.name}: the {source.engine} engine needs the {driver} driver: "
                f"pip install '{package}'"
            ) from None
        raise
    engine_class: type[SourceEngine] = getattr(module, class_name)
    return engine_class(source)
