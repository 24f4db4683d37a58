"""The third reader: Trino, through the catalog entry ``catalog.hive`` registers, as a user queries it.

The stack's Trino (``cdc-lake stack up --with trino``) has one catalog, ``hudi``, on the stack's Hive
Metastore; a table registered as ``<database>.<source>_<schema>_<table>`` is read with Trino's DB-API
client (PyPI ``trino``) as ``hudi.<database>.<entry>``.  Values come back as the client builds them;
:func:`trino_rows` turns Trino ``real`` values (printed by Trino in their shortest decimal form) back
into the float32 they are, so they compare with Spark's and the source's.  Rows are returned as a
list, duplicates kept: callers count keys before they index rows by key.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any

import trino
from pyspark.sql.types import StructType

from cdc_lake.catalog.entry import catalog_table_name
from cdc_lake.catalog.hive import HiveMetastoreCatalog
from cdc_lake.config import Config, HiveMetastoreSettings
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.trino import CATALOG


def _float32(value: Any) -> Any:
    if isinstance(value, list):
        return [_float32(v) for v in value]
    return value if value is None else struct.unpack("f", struct.pack("f", value))[0]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def trino_query(
    stack: LocalStack, sql: str, schema: str = "default"
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column types and rows of ``sql`` run on the stack's Trino in catalog ``hudi``, ``schema``."""
    port = stack.layout.ports.trino
    with trino.dbapi.connect(
        host="127.0.0.1", port=port, user="cdc-lake", catalog=CATALOG, schema=schema
    ) as conn:
        cursor = conn.cursor()
        cursor.execute(sql)
        rows = [tuple(row) for row in cursor.fetchall()]
        types = [str(column[1]) for column in cursor.description or ()]
    return types, rows


def trino_rows(
    stack: LocalStack, config: Config, table: str, columns: Sequence[str], timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Every row of ``table``'s catalog entry as Trino reads it, only ``columns``, soft-deleted rows kept.

    Waits up to ``timeout`` for the entry (the applier registers a table after its first batch as LIVE).
    """
    hive = config.catalog.hive
    assert hive is not None, "the config registers no catalog.hive entry for Trino to read"
    return catalog_rows(stack, hive.database, table, columns, timeout)


def catalog_rows(
    stack: LocalStack, database: str, table: str, columns: Sequence[str], timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Every row of ``table``'s entry in the stack's metastore ``database`` as Trino reads it, ``columns``
    only; waits up to ``timeout`` for the entry."""
    entry = catalog_table_name(table)
    deadline = time.monotonic() + timeout
    while entry not in {row[0] for row in trino_query(stack, "show tables", database)[1]}:
        assert time.monotonic() < deadline, f"no Trino table {CATALOG}.{database}.{entry} in {timeout:.0f}s"
        time.sleep(1)
    select = ", ".join(_quote(c) for c in columns)
    types, rows = trino_query(stack, f"select {select} from {_quote(entry)}", database)
    reals = [column_type in ("real", "array(real)") for column_type in types]
    return [
        {c: (_float32(v) if real else v) for c, v, real in zip(columns, row, reals, strict=True)}
        for row in rows
    ]


WRITER_TESTS_DATABASE = "lake_writer_tests"
"""Where tests that write tables without a product verb register them, as ``catalog.hive`` would."""


def register(stack: LocalStack, table: str, base_path: str, columns: StructType) -> None:
    """Register the lake table at ``base_path`` in the stack's Hive Metastore (database
    :data:`WRITER_TESTS_DATABASE`) through the product's own catalog sync, so Trino reads it as a user
    would read a table the applier registered."""
    settings = HiveMetastoreSettings(uri=stack.hive_metastore.uri, database=WRITER_TESTS_DATABASE)
    HiveMetastoreCatalog(settings).sync(table, base_path, columns, ())
