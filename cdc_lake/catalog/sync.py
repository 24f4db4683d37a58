"""When tables are registered: after publish (LIVE), after a schema change, after a re-bootstrap switch.

:class:`CatalogSync` holds the configured catalogs (AWS Glue, ``catalog.glue``, and a Hive Metastore,
``catalog.hive``) and remembers,
per process, the location and columns it last registered for each table; the applier calls
:meth:`CatalogSync.after_batch` after every batch of a LIVE table and only a new location or new
columns reach the catalog.  The re-bootstrap calls :meth:`CatalogSync.register` right after its switch.
A catalog failure is logged and tried again after the next batch: it never stops applying.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from pyspark.sql.types import StructType

from cdc_lake.catalog.glue import GlueCatalog
from cdc_lake.catalog.hive import HiveMetastoreCatalog
from cdc_lake.config import Config
from cdc_lake.exceptions import CatalogError

_LOG = logging.getLogger(__name__)


class CatalogSync:
    """The configured catalogs and what was last registered in them."""

    def __init__(self, glue: GlueCatalog | None, hive: HiveMetastoreCatalog | None = None) -> None:
        self.glue = glue
        self.hive = hive
        self._registered: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_config(cls, config: Config) -> CatalogSync | None:
        """The catalogs of ``config`` (None when it configures none)."""
        glue, hive = config.catalog.glue, config.catalog.hive
        if glue is None and hive is None:
            return None
        return cls(
            GlueCatalog(glue) if glue is not None else None,
            HiveMetastoreCatalog(hive) if hive is not None else None,
        )

    def register(
        self, table: str, location: str, columns: StructType, partition_fields: Sequence[str]
    ) -> list[str]:
        """Register ``table`` at ``location`` in every catalog; returns the names it is known by."""
        names = []
        if self.glue is not None:
            names.append(self.glue.sync(table, location, columns, partition_fields))
        if self.hive is not None:
            names.append(self.hive.sync(table, location, columns, partition_fields))
        with self._lock:
            self._registered[table] = (location, columns.simpleString())
        return names

    def knows(self, table: str, location: str) -> bool:
        """Whether ``table`` was registered at ``location`` by this process."""
        with self._lock:
            return self._registered.get(table, ("", ""))[0] == location

    def after_batch(
        self, table: str, location: str, columns: StructType, partition_fields: Sequence[str]
    ) -> None:
        """Register a LIVE table whose location or columns differ from what was last registered."""
        with self._lock:
            if self._registered.get(table) == (location, columns.simpleString()):
                return
        try:
            self.register(table, location, columns, partition_fields)
        except CatalogError as exc:
            _LOG.error("%s: catalog sync failed (tried again after the next batch): %s", table, exc)
