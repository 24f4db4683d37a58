"""When tables are registered: after publish (LIVE), after a schema change, after a re-bootstrap switch.

:class:`CatalogSync` holds the configured catalogs (AWS Glue, ``catalog.glue``, and a Hive Metastore,
``catalog.hive``, loaded through :func:`cdc_lake.catalog.load_catalogs`) and remembers, per process,
the location and columns it last registered for each table; the applier calls
:meth:`CatalogSync.after_batch` after every batch of a LIVE table and only a new location or new
columns reach the catalog.  A partitioned table's partitions (the lake format lists them:
:meth:`cdc_lake.lake.format.LakeFormat.partitions`) reach it when they differ from the ones last synced
at that location: readers that take partitions from the catalog (Trino) read only registered ones.
The re-bootstrap calls :meth:`CatalogSync.register` right after its switch,
with the table's current copy (:meth:`cdc_lake.state.store.StateStore.current_copy`), and asks
:meth:`CatalogSync.entries_at` before it deletes a path: no path an entry names is removed.
A catalog failure is logged and tried again after the next batch: it never stops applying.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cdc_lake.catalog import Catalog, load_catalogs
from cdc_lake.exceptions import CatalogError, LakeWriteError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from cdc_lake.config import Config
    from cdc_lake.lake.format import Partition

_LOG = logging.getLogger(__name__)


class CatalogSync:
    """The configured catalogs and what was last registered in them."""

    def __init__(self, catalogs: Sequence[Catalog]) -> None:
        self.catalogs = tuple(catalogs)
        self._registered: dict[str, tuple[str, str]] = {}
        self._partitions: dict[str, tuple[str, frozenset[Partition]]] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_config(cls, config: Config) -> CatalogSync | None:
        """The catalogs of ``config`` (None when it configures none); a missing extra is a CatalogError."""
        catalogs = load_catalogs(config.catalog, config.lake.format)
        return cls(catalogs) if catalogs else None

    def register(
        self,
        table: str,
        location: str,
        columns: StructType,
        partition_fields: Sequence[str],
        partitions: Sequence[Partition] = (),
    ) -> list[str]:
        """Register ``table`` at ``location`` in every catalog, with its ``partitions`` when it is
        partitioned; returns the names it is known by."""
        names = [catalog.sync(table, location, columns, partition_fields) for catalog in self.catalogs]
        with self._lock:
            self._registered[table] = (location, columns.simpleString())
        if partition_fields:
            self._sync_partitions(table, location, partitions)
        return names

    def _sync_partitions(self, table: str, location: str, partitions: Sequence[Partition]) -> None:
        wanted = (location, frozenset(partitions))
        with self._lock:
            if self._partitions.get(table) == wanted:
                return
        for catalog in self.catalogs:
            catalog.sync_partitions(table, location, partitions)
        with self._lock:
            self._partitions[table] = wanted

    def entries_at(self, table: str, location: str) -> list[str]:
        """The catalog entries of ``table`` that name ``location`` now (asked of each catalog, not of what
        this process registered); a catalog that cannot answer is a CatalogError."""
        return [
            catalog.entry_name(table) for catalog in self.catalogs if catalog.location(table) == location
        ]

    def knows(self, table: str, location: str) -> bool:
        """Whether ``table`` was registered at ``location`` by this process."""
        with self._lock:
            return self._registered.get(table, ("", ""))[0] == location

    def after_batch(
        self,
        table: str,
        location: str,
        columns: StructType,
        partition_fields: Sequence[str],
        partitions: Callable[[str], Sequence[Partition]] | None = None,
    ) -> None:
        """Register a LIVE table whose location or columns differ from what was last registered, and a
        partitioned one's partitions (``partitions(location)``: the lake format's list, asked only of a
        partitioned table) when they differ from the ones last synced."""
        with self._lock:
            known = self._registered.get(table) == (location, columns.simpleString())
        try:
            found = partitions(location) if partitions is not None and partition_fields else ()
            if not known:
                self.register(table, location, columns, partition_fields, found)
            elif partition_fields:
                self._sync_partitions(table, location, found)
        except (CatalogError, LakeWriteError) as exc:
            _LOG.error("%s: catalog sync failed (tried again after the next batch): %s", table, exc)
