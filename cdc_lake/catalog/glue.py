"""AWS Glue Data Catalog sync through boto3's Glue API (Hudi's own Glue sync tool, in ``hudi-aws``, is
not resolvable from the Maven mirror here).

boto3 is the ``glue`` extra (``pip install 'cdc-lake[glue]'``): this module is imported only when the
config names ``catalog.glue`` (:func:`cdc_lake.catalog.load_catalogs`).  The entry it writes is
:func:`cdc_lake.catalog.entry.table_input`.

:meth:`GlueCatalog.sync` creates the database and the table, or updates the table in place when its
location or columns changed: one ``UpdateTable`` call, so readers see the old or the new location,
never no table.  That is the re-bootstrap switch readers see.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from pyspark.sql.types import StructType

from cdc_lake.catalog.entry import catalog_table_name, table_input
from cdc_lake.config import GlueSettings
from cdc_lake.exceptions import CatalogError
from cdc_lake.lake.format import DEFAULT_FORMAT, Partition, format_facts

_LOG = logging.getLogger(__name__)


class GlueCatalog:
    """Registers tables of the lake format ``lake_format`` in one Glue database."""

    def __init__(self, settings: GlueSettings, lake_format: str = DEFAULT_FORMAT) -> None:
        self.settings = settings
        self.facts = format_facts(lake_format)
        self.client: Any = boto3.client(
            "glue", region_name=settings.region, endpoint_url=settings.endpoint_url
        )

    def sync(
        self, qualified_name: str, location: str, columns: StructType, partition_fields: Sequence[str]
    ) -> str:
        """Create or update the table's entry; returns ``database.table``."""
        database, name = self.settings.database, catalog_table_name(qualified_name)
        wanted = table_input(self.facts, name, location, columns, partition_fields)
        try:
            self._ensure_database(database)
            try:
                current = self.client.get_table(DatabaseName=database, Name=name)["Table"]
            except ClientError as exc:
                if not _not_found(exc):
                    raise
                self.client.create_table(DatabaseName=database, TableInput=wanted)
                _LOG.info("%s: registered as glue table %s.%s at %s", qualified_name, database, name,
                          location)
                return f"{database}.{name}"
            if _same(current, wanted):
                return f"{database}.{name}"
            self.client.update_table(DatabaseName=database, TableInput=wanted)
            _LOG.info("%s: glue table %s.%s now at %s", qualified_name, database, name, location)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(qualified_name, exc) from exc
        return f"{database}.{name}"

    def sync_partitions(self, qualified_name: str, location: str, partitions: Sequence[Partition]) -> int:
        """Make the entry's partitions the ``partitions``, each at its folder under ``location``: add the
        missing, move those at another folder (a re-bootstrap's new copy), drop those the table no longer
        holds (their data stays), in Glue's batch calls; how many changed."""
        database, name = self.settings.database, catalog_table_name(qualified_name)
        try:
            storage = self.client.get_table(DatabaseName=database, Name=name)["Table"]["StorageDescriptor"]
            listing = self.client.get_paginator("get_partitions")
            pages = listing.paginate(DatabaseName=database, TableName=name)
            have = {
                tuple(found["Values"]): found["StorageDescriptor"]["Location"]
                for page in pages
                for found in page["Partitions"]
            }
            wanted: dict[tuple[str, ...], dict[str, Any]] = {
                p.values: {
                    "Values": list(p.values),
                    "StorageDescriptor": {**storage, "Location": f"{location.rstrip('/')}/{p.path}"},
                }
                for p in partitions
            }
            new = [entry for values, entry in wanted.items() if values not in have]
            moved = [
                entry
                for values, entry in wanted.items()
                if values in have and have[values] != entry["StorageDescriptor"]["Location"]
            ]
            gone = [{"Values": list(values)} for values in have if values not in wanted]
            for chunk in _chunks(new, 100):
                self._check(self.client.batch_create_partition(
                    DatabaseName=database, TableName=name, PartitionInputList=chunk
                ))
            for chunk in _chunks(moved, 100):
                self._check(self.client.batch_update_partition(
                    DatabaseName=database,
                    TableName=name,
                    Entries=[{"PartitionValueList": e["Values"], "PartitionInput": e} for e in chunk],
                ))
            for chunk in _chunks(gone, 25):
                self._check(self.client.batch_delete_partition(
                    DatabaseName=database, TableName=name, PartitionsToDelete=chunk
                ))
        except (ClientError, BotoCoreError, CatalogError) as exc:
            raise self._error(qualified_name, exc) from exc
        if new or moved or gone:
            _LOG.info(
                "%s: glue table %s.%s partitions: %d added, %d moved, %d dropped",
                qualified_name, database, name, len(new), len(moved), len(gone),
            )
        return len(new) + len(moved) + len(gone)

    @staticmethod
    def _check(response: dict[str, Any]) -> None:
        """Glue's batch calls answer 200 and list the entries they refused: the first refusal is an error."""
        for error in response.get("Errors", []):
            detail = error.get("ErrorDetail", {})
            code, message = detail.get("ErrorCode"), detail.get("ErrorMessage")
            raise CatalogError(f"partition {error.get('PartitionValues')}: {code}: {message}")

    def location(self, qualified_name: str) -> str | None:
        """The registered location of the table (None when it is not registered).

        Any other error (denied, unreachable) is a CatalogError: "not registered" must not be guessed.
        """
        name = catalog_table_name(qualified_name)
        try:
            table = self.client.get_table(DatabaseName=self.settings.database, Name=name)
        except (ClientError, BotoCoreError) as exc:
            if isinstance(exc, ClientError) and _not_found(exc):
                return None
            raise self._error(qualified_name, exc) from exc
        return str(table["Table"]["StorageDescriptor"]["Location"])

    def entry_name(self, qualified_name: str) -> str:
        """``glue table database.table``."""
        return f"glue table {self.settings.database}.{catalog_table_name(qualified_name)}"

    def _error(self, qualified_name: str, exc: Exception) -> CatalogError:
        name = f"{self.settings.database}.{catalog_table_name(qualified_name)}"
        return CatalogError(f"table {qualified_name}: glue catalog {name}: {exc}")

    def _ensure_database(self, database: str) -> None:
        try:
            self.client.get_database(Name=database)
        except ClientError as exc:
            if not _not_found(exc):
                raise
            self.client.create_database(DatabaseInput={"Name": database})


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def _not_found(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "EntityNotFoundException")


def _same(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    sd, want = current.get("StorageDescriptor", {}), wanted["StorageDescriptor"]
    return bool(
        sd.get("Location") == want["Location"]
        and [(c["Name"], c["Type"]) for c in sd.get("Columns", [])]
        == [(c["Name"], c["Type"]) for c in want["Columns"]]
        and current.get("PartitionKeys", []) == wanted["PartitionKeys"]
    )
