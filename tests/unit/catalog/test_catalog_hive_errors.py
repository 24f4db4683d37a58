"""A Hive Metastore's refusals, each one line naming the table and, where there is one, the fix."""

from __future__ import annotations

from py4j.protocol import Py4JError

from cdc_lake.catalog.hive import HiveMetastoreCatalog
from cdc_lake.config import HiveMetastoreSettings


def test_a_refused_column_change_names_the_metastore_setting() -> None:
    catalog = HiveMetastoreCatalog(HiveMetastoreSettings(uri="thrift://127.0.0.1:19083", database="lake"))
    refusal = Py4JError(
        "InvalidOperationException(message:The following columns have types incompatible with the existing "
        "columns in their respective positions :\nval)"
    )

    message = str(catalog._error("shop.public.items", refusal))

    assert "\n" not in message
    assert message.startswith(
        "table shop.public.items: hive metastore thrift://127.0.0.1:19083 lake.shop_public_items: "
    )
    assert "set hive.metastore.disallow.incompatible.col.type.changes=false" in message
