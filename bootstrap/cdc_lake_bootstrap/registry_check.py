"""Aligning the bootstrap's lake types with the value schema Debezium registered for the topic.

The applier derives its column types from the registered Avro schema; if the bootstrap's catalog-based
mapping disagreed, the applier's first batch would fail on a type change.  So before reading, every
column is compared with the registered schema:

- the same type: nothing to do;
- MySQL/MariaDB ``BOOLEAN``: the catalog only knows ``tinyint(1)``, and Debezium makes it a boolean or
  a smallint depending on the DDL text it parsed (``BOOLEAN`` in a ``CREATE TABLE`` it streamed, or
  ``tinyint(1)`` from ``SHOW CREATE TABLE``): the registered type wins, read as ``value <> 0``;
- any other difference stops the bootstrap, naming the column.

A column the registered schema lacks is fine (added since Debezium's last event: the applier adds it
when it comes), and a topic with no schema yet (no event so far) has nothing to compare with.

The registered schema's character lengths (:func:`cdc_lake.lake.schema_change.char_lengths`)
are what the copy's commits record, so the applier sees a ``varchar`` narrowed after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from pyspark.sql.types import BooleanType, IntegerType

from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.exceptions import BootstrapError, SchemaRegistryError
from cdc_lake.lake.schema import lake_type
from cdc_lake.lake.schema_change import char_lengths
from cdc_lake_bootstrap.lake_types import ColumnRead, Conversion

_NOT_REGISTERED = "has no registered versions"


def _adoptable(read: ColumnRead, registered: object) -> bool:
    """A MySQL tinyint(1) read as an integer that Debezium registered as a boolean."""
    return (
        isinstance(read.lake_type, IntegerType)
        and isinstance(registered, BooleanType)
        and read.conversion is Conversion.CAST
        and read.select.endswith("AS SIGNED)")
    )


def align_with_registry(
    registry: SchemaRegistry,
    topic: str,
    reads: Sequence[ColumnRead],
    table: str,
    column_types: Mapping[str, str] | None = None,
) -> tuple[list[ColumnRead], str, dict[str, int]]:
    """``reads`` with Debezium's registered types where they legitimately differ, a note for the log,
    and the registered character lengths of the read columns (empty without a registered schema).

    Raises BootstrapError when a column's type differs otherwise.
    """
    subject = f"{topic}-value"
    try:
        registered = registry.latest(subject)
    except SchemaRegistryError as exc:
        if _NOT_REGISTERED in str(exc):
            return list(reads), f"no value schema registered for {topic} yet: types not cross-checked", {}
        raise
    if column_types:
        registered = registered.with_column_types(column_types)
    decoded = {field.name: lake_type(field.dataType) for field in registered.struct_type.fields}
    aligned = []
    for read in reads:
        expected = decoded.get(read.name)
        if expected is None or expected.simpleString() == read.lake_type.simpleString():
            aligned.append(read)
        elif _adoptable(read, expected):
            aligned.append(dataclasses.replace(read, lake_type=expected))
        else:
            raise BootstrapError(
                f"table {table}: column {read.name} would be {read.lake_type.simpleString()} in the snapshot "
                f"but {expected.simpleString()} from Debezium's schema id {registered.schema_id}; "
                "the bootstrap and the applier must agree (see docs/type-mapping.md)"
            )
    compared = sum(1 for read in reads if read.name in decoded)
    names = {read.name for read in reads}
    lengths = {name: n for name, n in char_lengths(registered).items() if name in names}
    return aligned, f"{compared} column types agree with Debezium's schema id {registered.schema_id}", lengths
