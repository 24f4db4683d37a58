"""Checking the bootstrap's lake types against the value schema Debezium registered for the topic.

The applier derives its column types from the registered Avro schema; if the bootstrap's catalog-based
mapping ever disagreed, the applier's first batch would fail on a type change.  Comparing before reading
turns that into an error naming the column.  A column the registered schema lacks is fine (added to the
source since Debezium's last event: the applier adds it when it comes), and a topic with no schema yet
(no event so far) has nothing to compare with.
"""

from __future__ import annotations

from collections.abc import Sequence

from bootstrap.lake_types import ColumnRead
from cdc_lake.apply.lake_schema import lake_type
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.exceptions import BootstrapError, SchemaRegistryError

_NOT_REGISTERED = "has no registered versions"


def check_against_registry(
    registry: SchemaRegistry, topic: str, reads: Sequence[ColumnRead], table: str
) -> str:
    """Raise BootstrapError when a column's lake type differs from the registered schema's; returns a note."""
    subject = f"{topic}-value"
    try:
        registered = registry.latest(subject)
    except SchemaRegistryError as exc:
        if _NOT_REGISTERED in str(exc):
            return f"no value schema registered for {topic} yet: types not cross-checked"
        raise
    decoded = {field.name: lake_type(field.dataType) for field in registered.struct_type.fields}
    for read in reads:
        expected = decoded.get(read.name)
        if expected is not None and expected.simpleString() != read.lake_type.simpleString():
            raise BootstrapError(
                f"table {table}: column {read.name} would be {read.lake_type.simpleString()} in the snapshot "
                f"but {expected.simpleString()} from Debezium's schema id {registered.schema_id}; "
                "the bootstrap and the applier must agree (see docs/type-mapping.md)"
            )
    compared = sum(1 for read in reads if read.name in decoded)
    return f"{compared} column types agree with Debezium's schema id {registered.schema_id}"
