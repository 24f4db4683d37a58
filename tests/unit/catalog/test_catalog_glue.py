"""The Glue catalog against moto's in-process Glue: where an entry points, and errors that are not
"no such entry" (a path must never be taken for unregistered because the catalog could not answer)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from pyspark.sql.types import LongType, StructField, StructType

from cdc_lake.catalog.glue import GlueCatalog
from cdc_lake.catalog.sync import CatalogSync
from cdc_lake.config import GlueSettings
from cdc_lake.exceptions import CatalogError

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
