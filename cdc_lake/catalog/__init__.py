"""Registering lake tables in catalogs, so readers query ``database.table`` instead of a base path.

A small registry, in the manner of pyiceberg's: :class:`CatalogKind` names every catalog the config can
hold (its value is the key under ``catalog:``), each kind has a loader that imports the kind's module
only when the config names it, and :func:`load_catalogs` returns the configured ones, each writing
entries for the tables of the config's ``lake.format``.  A catalog whose
library is an optional extra fails to load with one line naming the extra (:mod:`cdc_lake.extras`):
AWS Glue needs boto3 (``pip install 'cdc-lake[glue]'``); the Hive Metastore is reached through Spark's
JVM, which every install has.  So the applier and the re-bootstrap import no AWS SDK unless
``catalog.glue`` is set.

The entry every catalog writes is :mod:`cdc_lake.catalog.entry`; when entries are written (after
publish, schema changes and re-bootstrap switches) is :mod:`cdc_lake.catalog.sync`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Protocol

from cdc_lake.exceptions import CatalogError
from cdc_lake.extras import needs_extra

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from cdc_lake.config import CatalogSettings, GlueSettings, HiveMetastoreSettings
    from cdc_lake.lake.format import Partition


class CatalogKind(StrEnum):
    """A catalog the config can name, by its key under ``catalog:``."""

    GLUE = "glue"
    HIVE = "hive"


class Catalog(Protocol):
    """What the sync asks of every catalog."""

    def sync(
        self, qualified_name: str, location: str, columns: StructType, partition_fields: Sequence[str]
    ) -> str:
        """Create or update the table's entry; returns the name it is known by (``database.table``)."""

    def sync_partitions(self, qualified_name: str, location: str, partitions: Sequence[Partition]) -> int:
        """Make the entry's partitions the table's ``partitions``, each at its folder under ``location``
        (added, moved to a new copy's folder, dropped when gone); how many changed.  Readers that take a
        table's partitions from the catalog (Trino, Athena, Hive) read only registered ones."""

    def location(self, qualified_name: str) -> str | None:
        """The registered location of the table (None when it is not registered); CatalogError when the
        catalog cannot say."""

    def entry_name(self, qualified_name: str) -> str:
        """The table's entry as an operator finds it: the catalog kind and ``database.table``."""


def _load_glue(settings: GlueSettings, lake_format: str) -> Catalog:
    with needs_extra("glue", "catalog.glue: the AWS Glue catalog", CatalogError):
        from cdc_lake.catalog.glue import GlueCatalog
    return GlueCatalog(settings, lake_format)


def _load_hive(settings: HiveMetastoreSettings, lake_format: str) -> Catalog:
    from cdc_lake.catalog.hive import HiveMetastoreCatalog

    return HiveMetastoreCatalog(settings, lake_format)


_LOADERS: Final[Mapping[CatalogKind, Callable[[Any, str], Catalog]]] = {
    CatalogKind.GLUE: _load_glue,
    CatalogKind.HIVE: _load_hive,
}


def load_catalogs(settings: CatalogSettings, lake_format: str) -> list[Catalog]:
    """The catalogs ``settings`` configures for tables of the lake format ``lake_format``, in
    :class:`CatalogKind` order, their modules imported now."""
    configured = ((kind, getattr(settings, kind.value)) for kind in CatalogKind)
    return [_LOADERS[kind](found, lake_format) for kind, found in configured if found is not None]
