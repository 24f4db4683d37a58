"""The record key and the columns a bootstrap reads, checked against the source table's catalog.

The key is the config's ``key`` if set, else the table's primary key: the same columns the applier
keys on (Debezium's message key is the primary key).  Bootstrap partitions are ranges of this key, so
a row is in exactly one of them.  Hudi record keys cannot be null, so a nullable key column is refused,
as is a table with neither a primary key nor a configured key.
"""

from __future__ import annotations

from cdc_lake.config import Table
from cdc_lake.exceptions import BootstrapError
from cdc_lake.sources.snapshot import TableShape


def record_key(qualified: str, table: Table, shape: TableShape) -> tuple[str, ...]:
    """The key columns of ``table``; raises BootstrapError when there is no usable one."""
    key = tuple(table.key) if table.key else shape.primary_key
    if not key:
        raise BootstrapError(
            f"table {qualified} has no primary key: set key in its config entry to columns that are unique "
            "and not null"
        )
    for name in key:
        column = shape.column(name)
        if column is None:
            raise BootstrapError(f"table {qualified}: key column {name} does not exist in the source table")
        if column.nullable:
            raise BootstrapError(
                f"table {qualified}: key column {name} is nullable; record keys must not be null"
            )
    return key


def selected_columns(qualified: str, table: Table, shape: TableShape, key: tuple[str, ...]) -> list[str]:
    """The columns to read, in table order: the frozen ``columns`` list plus the key, else all."""
    if not table.columns:
        return [column.name for column in shape.columns]
    missing = [name for name in table.columns if shape.column(name) is None]
    if missing:
        raise BootstrapError(f"table {qualified}: columns {missing} of its config do not exist in the source")
    wanted = set(table.columns) | set(key)
    return [column.name for column in shape.columns if column.name in wanted]
