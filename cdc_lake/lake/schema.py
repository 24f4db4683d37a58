"""The lake table's columns, and how a new writer schema may change them.

Each writer schema version in a batch gives a row struct (:attr:`RegisteredSchema.struct_type`).  The
batch is written with the union of the lake table's columns and every version's columns:

- a column the lake lacks is added (nullable; Hudi evolves the table in place);
- a column with the same type, or a type the stored one holds exactly (int into bigint, float into
  double, a decimal into a wider decimal), keeps the stored type (an older writer version);
- a column whose new type holds every stored value and that Hudi promotes in place (the source widened
  it: int to bigint, float to double; :func:`promotes`) takes the new type on write;
- a column whose type changes otherwise is a :class:`SchemaChangeError`, a decimal's precision or scale
  too even when every value still fits: Hudi writes a decimal as an Avro ``fixed`` sized by its
  precision, and a write with another one fails mid-batch (``MISSING_UNION_BRANCH``), so the table is
  re-bootstrapped instead (:mod:`cdc_lake.lake.schema_change` stops it first);
- a lake column missing from a writer schema is fine if that schema is an older version (its events
  predate the column and write null); the caller checks that against the latest registered version.

Avro has no 8- or 16-bit integers, so Hudi stores TINYINT/SMALLINT (Spark byte/short) as int:
:func:`lake_type` maps them up front, so the lake schema read back equals the one written.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructField,
    StructType,
)

from cdc_lake.exceptions import SchemaChangeError
from cdc_lake.lake.columns import METADATA_FIELDS
from cdc_lake.lake.format import FORMATS, format_facts

_METADATA_NAMES = frozenset(f.name for f in METADATA_FIELDS)


def lake_type(data_type: DataType) -> DataType:
    """The type a Hudi table stores for ``data_type`` (byte and short become int), recursively."""
    if isinstance(data_type, ByteType | ShortType):
        return IntegerType()
    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, lake_type(f.dataType), f.nullable) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(lake_type(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, MapType):
        key, value = lake_type(data_type.keyType), lake_type(data_type.valueType)
        return MapType(key, value, data_type.valueContainsNull)
    return data_type


def row_columns(lake_schema: StructType) -> StructType:
    """The source columns of a lake table's schema: without cdc-lake's metadata columns and the columns
    a lake format adds (those of every registered format, so the caller need not name the table's)."""
    facts = [format_facts(name) for name in FORMATS]
    return StructType([
        f
        for f in lake_schema.fields
        if f.name not in _METADATA_NAMES and not any(fmt.is_meta_column(f.name) for fmt in facts)
    ])


def _same(a: DataType, b: DataType) -> bool:
    """Type equality ignoring nullability."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        return [f.name for f in a.fields] == [f.name for f in b.fields] and all(
            _same(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields, strict=True)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same(a.elementType, b.elementType)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return _same(a.keyType, b.keyType) and _same(a.valueType, b.valueType)
    return a == b


def holds(stored: DataType, incoming: DataType) -> bool:
    """Whether a column of type ``stored`` holds every value of ``incoming`` exactly."""
    if _same(stored, incoming):
        return True
    if isinstance(stored, LongType) and isinstance(incoming, IntegerType):
        return True
    if isinstance(stored, DoubleType) and isinstance(incoming, FloatType | IntegerType):
        return True
    if isinstance(stored, DecimalType) and isinstance(incoming, DecimalType):
        return (
            stored.scale >= incoming.scale
            and stored.precision - stored.scale >= incoming.precision - incoming.scale
        )
    return False


def promotes(stored: DataType, incoming: DataType) -> bool:
    """Whether Hudi takes a column of type ``stored`` to ``incoming`` in place, keeping every value:
    ``incoming`` holds every stored value and is not another decimal (its precision sizes the Avro
    ``fixed`` Hudi writes, which no write changes)."""
    if isinstance(stored, DecimalType) and isinstance(incoming, DecimalType):
        return stored == incoming
    return holds(incoming, stored)


@dataclass(frozen=True)
class Evolution:
    """The columns after merging one writer schema: which it added and which lake columns it lacks."""

    columns: StructType
    added: tuple[str, ...]
    missing: tuple[str, ...]


def merge_columns(current: StructType | None, incoming: StructType) -> Evolution:
    """Merge a writer schema's row struct into the current lake columns (None before the table exists).

    Every column stays nullable.  Raises SchemaChangeError naming the column whose type changed.
    """
    incoming_types = {f.name: lake_type(f.dataType) for f in incoming.fields}
    if current is None:
        columns = StructType([StructField(name, t, True) for name, t in incoming_types.items()])
        return Evolution(columns, tuple(incoming_types), ())
    fields = []
    for stored in current.fields:
        new_type = incoming_types.get(stored.name)
        if new_type is not None and not holds(stored.dataType, new_type):
            if not promotes(stored.dataType, new_type):
                raise SchemaChangeError(
                    f"column {stored.name!r} changes type from {stored.dataType.simpleString()} to "
                    f"{new_type.simpleString()}"
                )
            fields.append(StructField(stored.name, new_type, True))
            continue
        fields.append(StructField(stored.name, stored.dataType, True))
    known = {f.name for f in current.fields}
    added = tuple(name for name in incoming_types if name not in known)
    fields.extend(StructField(name, incoming_types[name], True) for name in added)
    missing = tuple(f.name for f in current.fields if f.name not in incoming_types)
    return Evolution(StructType(fields), added, missing)
