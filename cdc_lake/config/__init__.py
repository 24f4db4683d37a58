"""The YAML config: typed settings for the lake, the state store, Kafka, Spark and every source.

``load_config`` reads a file, expands ``${VAR}`` / ``${VAR:-default}`` from the
environment, validates it against strict models (an unknown key is an error
naming its dotted path), and resolves relative paths against the file's
directory.  ``Config.default()`` gives the local stack's defaults without a file.
Secrets are :class:`pydantic.SecretStr`, so printing a config never shows them.

A source's model is its engine's (:mod:`cdc_lake.sources.settings`, ``sources/<engine>/settings.py``),
found in the engine registry by its ``engine``: this package imports the sources' models, and nothing
under :mod:`cdc_lake.sources` imports it.  ``Source``, ``Connection`` and
``Table`` are importable from here as from there.

The sections' models live by subject, the root model and the loader above them:

- :mod:`.lake`: the lake tables (format, layout, object store, compaction) and their catalogs;
- :mod:`.kafka`: Kafka, the schema registry and Kafka Connect;
- :mod:`.runtime`: the state store, Spark, the applier, the bootstrap and monitoring;
- :mod:`.stack`: the local stack;
- :mod:`.paths`: the default state directory and how relative paths resolve;
- :mod:`.model`: the root :class:`Config` and its checks across sections;
- :mod:`.loader`: reading, expanding and validating a file.
"""

from __future__ import annotations

from cdc_lake.config.kafka import KafkaConnectSettings, KafkaSettings, SchemaRegistrySettings
from cdc_lake.config.lake import (
    CatalogSettings,
    GlueSettings,
    HiveMetastoreSettings,
    LakeSettings,
    S3Settings,
)
from cdc_lake.config.loader import find_config, load_config, resolve_config
from cdc_lake.config.model import Config
from cdc_lake.config.runtime import RUNBOOK_BASE_URL, MonitoringSettings, TierThresholds
from cdc_lake.config.stack import StackPorts, StackSettings, TrinoStackSettings
from cdc_lake.sources.settings import Connection, Source, Table

__all__ = [
    "RUNBOOK_BASE_URL",
    "CatalogSettings",
    "Config",
    "Connection",
    "GlueSettings",
    "HiveMetastoreSettings",
    "KafkaConnectSettings",
    "KafkaSettings",
    "LakeSettings",
    "MonitoringSettings",
    "S3Settings",
    "SchemaRegistrySettings",
    "Source",
    "StackPorts",
    "StackSettings",
    "Table",
    "TierThresholds",
    "TrinoStackSettings",
    "find_config",
    "load_config",
    "resolve_config",
]
