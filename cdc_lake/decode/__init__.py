"""Decoding of Debezium change events carried as Confluent-framed Avro on Kafka.

The pieces, each in its own module:

- :mod:`.framing`: the Confluent wire format (magic byte, schema id, Avro body).
- :mod:`.registry`: a cached, retrying client for the Confluent schema registry REST API.
- :mod:`.schema`: a registered schema, parsed once, with its row converters.
- :mod:`.types`: exact mapping of Debezium/Connect types to Python values and Spark SQL types.
- :mod:`.ordering`: the numeric source position of an event, usable as a Hudi ordering field.
- :mod:`.envelope`: unwrapping the Debezium envelope into a :class:`ChangeEvent` or :class:`Tombstone`.
"""

from __future__ import annotations

from cdc_lake.decode.envelope import ChangeEvent, EnvelopeSource, Tombstone, decode_message
from cdc_lake.decode.framing import MessageRef
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE, SourcePosition
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.decode.schema import RegisteredSchema, SchemaLookup
from cdc_lake.decode.types import UNAVAILABLE, RowConverter, convert_row, spark_schema_for

__all__ = [
    "SNAPSHOT_ORDERING_VALUE",
    "UNAVAILABLE",
    "ChangeEvent",
    "EnvelopeSource",
    "MessageRef",
    "RegisteredSchema",
    "RowConverter",
    "SchemaLookup",
    "SchemaRegistry",
    "SourcePosition",
    "Tombstone",
    "convert_row",
    "decode_message",
    "spark_schema_for",
]
