"""The Glue catalog against moto's in-process Glue: where an entry points, and errors that are not
"no such entry" (a path must never be taken for unregistered because the catalog could not answer)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc_lake.catalog.glue import GlueCatalog
from cdc_lake.catalog.sync import CatalogSync
from cdc_lake.config import GlueSettings
from cdc_lake.exceptions import CatalogError
from cdc_lake.lake.format import NULL_PARTITION_VALUE as NULL
from cdc_lake.lake.format import Partition

TABLE = "pg.public.orders"
COLUMNS = StructType([StructField("id", LongType())])


@pytest.fixture
def glue(monkeypatch: pytest.MonkeyPatch) -> Iterator[GlueCatalog]:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "testing")
    with mock_aws():
        yield GlueCatalog(GlueSettings(database="lake"))


def test_entries_at_names_the_catalog_entries_that_point_at_a_path(glue: GlueCatalog) -> None:
    sync = CatalogSync([glue])
    assert sync.entries_at(TABLE, "/lake/pg/public/orders") == []  # not registered: no database, no table

    sync.register(TABLE, "/lake/pg/public/orders", COLUMNS, [])

    assert sync.entries_at(TABLE, "/lake/pg/public/orders") == ["glue table lake.pg_public_orders"]
    assert sync.entries_at(TABLE, "/lake/pg/public/orders__v2") == []


def test_a_glue_error_other_than_not_found_is_not_taken_for_no_entry(glue: GlueCatalog) -> None:
    class _Denied:
        def get_table(self, **kwargs: object) -> None:
            error = {"Error": {"Code": "AccessDeniedException", "Message": "denied"}}
            raise ClientError(error, "GetTable")  # type: ignore[arg-type]

    glue.client = _Denied()

    with pytest.raises(CatalogError, match=f"^table {TABLE}: glue catalog lake.pg_public_orders: .*denied"):
        glue.location(TABLE)


def _partitions(glue: GlueCatalog) -> dict[tuple[str, ...], str]:
    found = glue.client.get_partitions(DatabaseName="lake", TableName="pg_public_orders")["Partitions"]
    return {tuple(p["Values"]): p["StorageDescriptor"]["Location"] for p in found}


def test_a_partitioned_tables_partitions_follow_the_table_and_its_copies(glue: GlueCatalog) -> None:
    """Readers that take partitions from the catalog (Trino, Athena) read only registered ones: the sync
    adds the partitions a batch created, points them at a re-bootstrap's new copy, drops those gone."""
    columns = StructType([StructField("id", LongType()), StructField("region", StringType())])
    sync = CatalogSync([glue])
    eu, null = Partition("region=eu", ("eu",)), Partition("region=__HIVE_DEFAULT_PARTITION__", (NULL,))
    us = Partition("region=us%2Fwest", ("us/west",))

    sync.register(TABLE, "/lake/orders", columns, ["region"], [eu, null])
    assert _partitions(glue) == {("eu",): "/lake/orders/region=eu", (NULL,): f"/lake/orders/{null.path}"}

    sync.after_batch(TABLE, "/lake/orders", columns, ["region"], lambda _: [eu, null, us])
    assert _partitions(glue)[("us/west",)] == "/lake/orders/region=us%2Fwest"

    sync.after_batch(TABLE, "/lake/orders__v2", columns, ["region"], lambda _: [eu, us])
    assert _partitions(glue) == {
        ("eu",): "/lake/orders__v2/region=eu",
        ("us/west",): "/lake/orders__v2/region=us%2Fwest",
    }


def test_unchanged_partitions_are_not_asked_of_the_catalog_again(glue: GlueCatalog) -> None:
    columns = StructType([StructField("id", LongType()), StructField("region", StringType())])
    sync = CatalogSync([glue])
    sync.register(TABLE, "/lake/orders", columns, ["region"], [Partition("region=eu", ("eu",))])
    glue.client = None  # any call to the catalog now fails

    sync.after_batch(TABLE, "/lake/orders", columns, ["region"], lambda _: [Partition("region=eu", ("eu",))])
