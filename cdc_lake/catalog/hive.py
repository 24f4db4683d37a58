"""Hive Metastore sync through the metastore's own Java client in Spark's JVM.

pyspark ships Hive 2.3's ``HiveMetaStoreClient`` on the driver's classpath, so the sync talks thrift
to the configured metastore (``catalog.hive.uri``) from the JVM the applier and the re-bootstrap
already run, without turning on Spark's Hive catalog support in the session (a static setting that
would change every other table operation of the process).  The entry is the same as the Glue one
(:func:`cdc_lake.catalog.entry.table_input`: an external table at the current base path, the lake
format's input format and SerDe, ``spark.sql.sources.provider``, ``path``), so Spark with Hive support,
Hive and Trino read ``database.table``.

:meth:`HiveMetastoreCatalog.sync` creates the database and the table, or alters the table in place
(``alter_table``: one metastore call) when its location or columns changed: readers see the old or the
new location, never no table.  That is the re-bootstrap switch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark import SparkContext
from pyspark.sql.types import StructType

from cdc_lake.catalog.entry import catalog_table_name, table_input
from cdc_lake.config import HiveMetastoreSettings
from cdc_lake.exceptions import CatalogError
from cdc_lake.lake.format import DEFAULT_FORMAT, Partition, format_facts

_LOG = logging.getLogger(__name__)

_NOT_FOUND = "org.apache.hadoop.hive.metastore.api.NoSuchObjectException"
INCOMPATIBLE_COLUMNS = (
    "columns have types incompatible with the existing columns in their respective positions"
)
"""What a metastore with ``hive.metastore.disallow.incompatible.col.type.changes`` (Hive's default) says
when an entry's column at some position changes to a type it cannot convert to."""
INCOMPATIBLE_COLUMNS_FIX = (
    "set hive.metastore.disallow.incompatible.col.type.changes=false in the metastore's own hive-site.xml "
    "(docs/operations.md, Reading the lake with Trino)"
)


def _jvm() -> Any:
    context = SparkContext._active_spark_context
    if context is None or context._jvm is None:
        raise CatalogError("hive metastore sync needs the process's SparkSession (none is running)")
    return context._jvm


def _reason(exc: Py4JError) -> str:
    """The Java exception's one-line text (py4j's own message names only the call)."""
    if isinstance(exc, Py4JJavaError):
        return str(exc.java_exception.toString()).splitlines()[0]
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _not_found(exc: Py4JJavaError) -> bool:
    return str(exc.java_exception.getClass().getName()) == _NOT_FOUND


class HiveMetastoreCatalog:
    """Registers tables of the lake format ``lake_format`` in one Hive Metastore database."""

    def __init__(self, settings: HiveMetastoreSettings, lake_format: str = DEFAULT_FORMAT) -> None:
        self.settings = settings
        self.facts = format_facts(lake_format)

    @contextmanager
    def _client(self) -> Iterator[tuple[Any, Any]]:
        jvm = _jvm()
        conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
        conf.set("hive.metastore.uris", self.settings.uri)
        client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
        try:
            yield jvm, client
        finally:
            client.close()

    def sync(
        self, qualified_name: str, location: str, columns: StructType, partition_fields: Sequence[str]
    ) -> str:
        """Create or alter the table's entry; returns ``database.table``."""
        database, name = self.settings.database, catalog_table_name(qualified_name)
        wanted = table_input(self.facts, name, location, columns, partition_fields)
        try:
            with self._client() as (jvm, client):
                self._ensure_database(jvm, client, database)
                table = _hive_table(jvm, database, wanted)
                if not client.tableExists(database, name):
                    client.createTable(table)
                    _LOG.info(
                        "%s: registered as hive table %s.%s at %s", qualified_name, database, name, location
                    )
                    return f"{database}.{name}"
                current = client.getTable(database, name)
                if _same(current, table):
                    return f"{database}.{name}"
                client.alter_table(database, name, table)
                _LOG.info("%s: hive table %s.%s now at %s", qualified_name, database, name, location)
        except (Py4JError, Py4JJavaError) as exc:
            raise self._error(qualified_name, exc) from exc
        return f"{database}.{name}"

    def sync_partitions(self, qualified_name: str, location: str, partitions: Sequence[Partition]) -> int:
        """Make the entry's partitions the ``partitions``, each at its folder under ``location``: add the
        missing, move those at another folder (a re-bootstrap's new copy), drop those the table no longer
        holds (their data stays); how many changed."""
        database, name = self.settings.database, catalog_table_name(qualified_name)
        try:
            with self._client() as (jvm, client):
                table = client.getTable(database, name)
                have = {tuple(p.getValues()): p for p in client.listPartitions(database, name, -1)}
                wanted = {p.values: _hive_partition(jvm, table, location, p) for p in partitions}
                new = [p for values, p in wanted.items() if values not in have]
                moved = [
                    p
                    for values, p in wanted.items()
                    # The metastore qualifies a local folder (``file:/lake/t/...``): compared as configured.
                    if values in have
                    and _plain(str(have[values].getSd().getLocation())) != p.getSd().getLocation()
                ]
                gone = [values for values in have if values not in wanted]
                if moved:
                    client.alter_partitions(database, name, _list(jvm, moved))
                if new:
                    client.add_partitions(_list(jvm, new))
                for values in gone:
                    client.dropPartition(database, name, _list(jvm, values), False)
        except (Py4JError, Py4JJavaError) as exc:
            raise self._error(qualified_name, exc) from exc
        if new or moved or gone:
            _LOG.info(
                "%s: hive table %s.%s partitions: %d added, %d moved, %d dropped",
                qualified_name, database, name, len(new), len(moved), len(gone),
            )
        return len(new) + len(moved) + len(gone)

    def location(self, qualified_name: str) -> str | None:
        """The registered location of the table (None when it is not registered; any other error is a
        CatalogError)."""
        try:
            with self._client() as (_, client):
                try:
                    table = client.getTable(self.settings.database, catalog_table_name(qualified_name))
                except Py4JJavaError as exc:
                    if _not_found(exc):
                        return None
                    raise
                return _plain(str(table.getSd().getLocation()))
        except (Py4JError, Py4JJavaError) as exc:
            raise self._error(qualified_name, exc) from exc

    def entry_name(self, qualified_name: str) -> str:
        """``hive table database.table``."""
        return f"hive table {self.settings.database}.{catalog_table_name(qualified_name)}"

    def _error(self, qualified_name: str, exc: Py4JError) -> CatalogError:
        name = f"{self.settings.database}.{catalog_table_name(qualified_name)}"
        where = f"hive metastore {self.settings.uri} {name}"
        reason = _reason(exc)
        if INCOMPATIBLE_COLUMNS in reason:
            # A dropped or retyped source column moves the entry's later columns; a metastore that checks
            # positions refuses that (as it refuses Hudi's own Hive sync after such a change).
            reason = f"{reason.split('(')[0]}: {INCOMPATIBLE_COLUMNS}; {INCOMPATIBLE_COLUMNS_FIX}"
        return CatalogError(f"table {qualified_name}: {where}: {reason}")

    @staticmethod
    def _ensure_database(jvm: Any, client: Any, database: str) -> None:
        try:
            client.getDatabase(database)
        except Py4JJavaError as exc:
            if not _not_found(exc):
                raise
            api = jvm.org.apache.hadoop.hive.metastore.api
            client.createDatabase(api.Database(database, "cdc-lake tables", None, _map(jvm, {})))


def _map(jvm: Any, values: Mapping[str, str]) -> Any:
    result = jvm.java.util.HashMap()
    for key, value in values.items():
        result.put(key, value)
    return result


def _list(jvm: Any, values: Sequence[Any]) -> Any:
    result = jvm.java.util.ArrayList()
    for value in values:
        result.add(value)
    return result


def _hive_partition(jvm: Any, table: Any, location: str, partition: Partition) -> Any:
    """The metastore partition of ``table`` (registered at ``location``) for ``partition``'s folder."""
    storage = table.getSd().deepCopy()
    storage.setLocation(f"{location.rstrip('/')}/{partition.path}")
    api = jvm.org.apache.hadoop.hive.metastore.api
    return api.Partition(
        _list(jvm, partition.values), table.getDbName(), table.getTableName(), 0, 0, storage, _map(jvm, {})
    )


def _fields(jvm: Any, columns: Sequence[Mapping[str, str]]) -> Any:
    field = jvm.org.apache.hadoop.hive.metastore.api.FieldSchema
    return _list(jvm, [field(column["Name"], column["Type"], None) for column in columns])


def _hive_table(jvm: Any, database: str, wanted: Mapping[str, Any]) -> Any:
    """The metastore ``Table`` of a Glue ``TableInput`` (the two catalogs hold the same entry)."""
    api = jvm.org.apache.hadoop.hive.metastore.api
    storage = wanted["StorageDescriptor"]
    serde = api.SerDeInfo()
    serde.setSerializationLib(storage["SerdeInfo"]["SerializationLibrary"])
    serde.setParameters(_map(jvm, storage["SerdeInfo"]["Parameters"]))
    descriptor = api.StorageDescriptor()
    descriptor.setCols(_fields(jvm, storage["Columns"]))
    descriptor.setLocation(storage["Location"])
    descriptor.setInputFormat(storage["InputFormat"])
    descriptor.setOutputFormat(storage["OutputFormat"])
    descriptor.setSerdeInfo(serde)
    table = api.Table()
    table.setDbName(database)
    table.setTableName(wanted["Name"])
    table.setTableType(wanted["TableType"])
    table.setParameters(_map(jvm, wanted["Parameters"]))
    table.setPartitionKeys(_fields(jvm, wanted["PartitionKeys"]))
    table.setSd(descriptor)
    return table


def _plain(location: str) -> str:
    """A local location as configured: the metastore qualifies ``/lake/t`` as ``file:/lake/t``."""
    parsed = urlparse(location)
    return parsed.path if parsed.scheme == "file" else location


def _columns(table: Any) -> list[tuple[str, str]]:
    return [(str(c.getName()), str(c.getType())) for c in table.getSd().getCols()]


def _same(current: Any, wanted: Any) -> bool:
    return bool(
        _plain(str(current.getSd().getLocation())) == _plain(str(wanted.getSd().getLocation()))
        and _columns(current) == _columns(wanted)
        and [str(c.getName()) for c in current.getPartitionKeys()]
        == [str(c.getName()) for c in wanted.getPartitionKeys()]
    )
