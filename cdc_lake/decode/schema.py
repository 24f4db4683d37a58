"""A schema from the registry, parsed once per id, with the converters compiled from it.

Schema ids are immutable in a Confluent-compatible registry, so everything derived from one (the
parsed Avro, the compiled row converter, the Spark struct) is computed once and reused.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Protocol

from fastavro import parse_schema
from fastavro.schema import SchemaParseException, UnknownType
from pyspark.sql.types import StructType

from cdc_lake.decode.types import RowConverter, is_envelope, row_schema, stash_logical_types
from cdc_lake.exceptions import SchemaRegistryError
from cdc_lake.representation import ColumnType, parse_column_type


class RegisteredSchema:
    """One registry schema, parsed once, and the converters compiled from it.

    ``schema`` is the fastavro-parsed schema with logical types stashed (see
    :func:`~cdc_lake.decode.types.stash_logical_types`): reading data with it yields the raw encoded
    values that :mod:`cdc_lake.decode.types` converts exactly, with field names in its errors.
    """

    def __init__(self, schema_id: int, definition: str | Mapping[str, Any]) -> None:
        self.schema_id = schema_id
        try:
            raw = json.loads(definition) if isinstance(definition, str) else dict(definition)
            schema = parse_schema(stash_logical_types(raw))
        except (ValueError, TypeError, KeyError, SchemaParseException, UnknownType) as exc:
            raise SchemaRegistryError(f"schema id {schema_id} is not a valid Avro schema: {exc}") from exc
        if not isinstance(schema, dict) or schema.get("type") != "record":
            raise SchemaRegistryError(
                f"schema id {schema_id} is not an Avro record; Debezium keys and values are records"
            )
        self.schema: dict[str, Any] = schema
        self.column_types: dict[str, ColumnType] = {}

    def with_column_types(self, column_types: Mapping[str, str]) -> RegisteredSchema:
        """This schema with a table's ``column_types`` applied to its row converter (itself when none)."""
        if not column_types:
            return self
        typed = copy.copy(self)
        typed.__dict__.pop("row_converter", None)
        typed.column_types = {name: parse_column_type(spec) for name, spec in column_types.items()}
        return typed

    @property
    def name(self) -> str:
        """Full name of the top-level record (for Debezium, ``<topic>.Envelope`` or ``<topic>.Key``)."""
        return str(self.schema["name"])

    @cached_property
    def is_envelope(self) -> bool:
        """True when this is a Debezium value (envelope) schema."""
        return is_envelope(self.schema)

    @cached_property
    def row_converter(self) -> RowConverter:
        """Converter for the envelope's before/after row, or for the record itself (key schemas)."""
        row = row_schema(self.schema) if self.is_envelope else self.schema
        return RowConverter(row, self.column_types)

    @property
    def struct_type(self) -> StructType:
        """Spark schema of the row (envelope schemas) or of the record (key schemas)."""
        return self.row_converter.struct_type

    def __repr__(self) -> str:
        return f"RegisteredSchema(id={self.schema_id}, name={self.name!r})"


class TypedSchemas:
    """A schema lookup whose schemas apply one table's ``column_types`` (each compiled once per id)."""

    def __init__(self, lookup: SchemaLookup, column_types: Mapping[str, str]) -> None:
        self._lookup = lookup
        self._column_types = dict(column_types)
        self._typed: dict[int, RegisteredSchema] = {}

    def get_schema(self, schema_id: int) -> RegisteredSchema:
        """The schema registered under ``schema_id``, with the table's column types."""
        typed = self._typed.get(schema_id)
        if typed is None:
            typed = self._lookup.get_schema(schema_id).with_column_types(self._column_types)
            self._typed[schema_id] = typed
        return typed


class SchemaLookup(Protocol):
    """Anything returning the :class:`RegisteredSchema` of an id: the registry client, or a test double."""

    def get_schema(self, schema_id: int) -> RegisteredSchema:
        """Return the schema registered under ``schema_id``; raise SchemaRegistryError if unknown."""
        ...
