"""The one mapping from a source column (its catalog type) to its lake type, shared by every stage.

The applier's lake types come from Debezium's Avro schemas (:mod:`cdc_lake.decode.types`); the bootstrap
reads the same columns over JDBC.  For the same source value both must write the same lake value, so
for every catalog type this module says, in one place:

- the lake type (the Spark type the decoder gives Debezium's encoding of that type);
- the SQL expression the bootstrap selects, chosen so JDBC hands over a value Spark converts without
  loss (times as microseconds of the day, dates, timestamps and numerics as text in a session set to
  ISO formats and UTC), and the :class:`Conversion` from it to the lake type; or
- a :class:`Refusal`: why the type cannot be replicated exactly (Debezium's encoding loses information,
  or Debezium drops the value), and the lossless fallback a table's ``column_types`` may choose, or the
  source setting that makes it exact (Postgres ``interval``: ``interval_handling: string``, a connector
  setting and so one choice per source).

Onboarding's preflight (:func:`refusals`) and the bootstrap (``cdc_lake_bootstrap.lake_types``) both call
:func:`column_read`, so a type onboarding accepts is one the bootstrap reads, and a column refused at
onboarding is named there with its options: leave it out of the table's ``columns`` list, or, where a
fallback exists, set ``column_types: {column: string}`` (or ``decimal(p,s)`` for an unconstrained
numeric).  A fallback changes the decoder's type for that column too
(:class:`~cdc_lake.decode.types.RowConverter`), so bootstrap and applier still agree.

Each engine reads its own catalog types: its declaration names the module that does
(``EngineCapabilities.column_module``: ``sources/postgres/column_types.py``,
``sources/mysql/column_types.py``), a :data:`ColumnReader` called ``column_read``, which
:func:`column_read` imports when first asked (it needs pyspark, the declarations do not).  This module
holds what they share: the read, the refusal and the conversions.

The table of types, encodings and outcomes is ``docs/type-mapping.md``.
"""

from __future__ import annotations

import enum
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql.types import ArrayType, DataType, DecimalType, MapType, StructType

from cdc_lake.representation import MAX_PRECISION as SPARK_MAX_PRECISION
from cdc_lake.representation import ColumnType, parse_column_type
from cdc_lake.sources import capabilities_for
from cdc_lake.sources.settings import IntervalHandling
from cdc_lake.sources.snapshot import SourceColumn, TableShape

_NOT_KEY_TYPES = (ArrayType, MapType, StructType)
"""Lake types of values that are never a record key."""

Quote = Callable[[str], str]


class Conversion(enum.StrEnum):
    """How the value JDBC returns becomes the lake value."""

    CAST = "cast"
    DECIMAL_TEXT = "decimal text"
    NUMBER_TEXT = "number text"
    DATE_TEXT = "date text"
    LOCAL_TIMESTAMP_TEXT = "local timestamp text"
    UTC_TIMESTAMP_TEXT = "UTC timestamp text"
    PG_UTC_TIMESTAMP_TEXT = "Postgres UTC timestamp text"


@dataclass(frozen=True)
class ColumnRead:
    """One column of the snapshot: the SQL that selects it, its lake type and the conversion.

    With ``per_element`` the column is an array selected as text elements and ``conversion`` applies to
    each element (the lake type is then an array of the converted element type).
    """

    name: str
    select: str
    lake_type: DataType
    conversion: Conversion = Conversion.CAST
    per_element: bool = False


@dataclass(frozen=True)
class Refusal:
    """A column that cannot be replicated exactly: why, and the ``column_types`` fallback or the source
    ``setting`` that makes it exact, if one exists."""

    column: str
    declared: str
    reason: str
    fallback: str | None = None
    setting: str | None = None

    def options(self) -> str:
        """What the user can do about it, as one clause."""
        leave_out = "leave it out of the table's columns list"
        if self.setting is not None:
            return f"{leave_out}, or set {self.setting} on its source"
        if self.fallback is None:
            return leave_out
        return f"{leave_out}, or set column_types: {{{self.column}: {self.fallback}}}"

    def message(self, table: str) -> str:
        """One line naming the table and column, the reason and the options."""
        return (
            f"table {table}: column {self.column} ({self.declared}) cannot be replicated exactly: "
            f"{self.reason}; {self.options()}"
        )


def spark_decimal(precision: int, scale: int) -> DecimalType:
    """The Spark decimal the decoder uses for DECIMAL(precision, scale) (see ``docs/type-mapping.md``)."""
    if scale < 0:
        precision, scale = precision - scale, 0
    return DecimalType(min(max(precision, scale), SPARK_MAX_PRECISION), scale)


def override_decimal(override: ColumnType) -> DecimalType:
    """The Spark decimal of a ``decimal(p,s)`` override."""
    assert override.precision is not None and override.scale is not None
    return DecimalType(override.precision, override.scale)


Mapped = ColumnRead | Refusal

ColumnReader = Callable[[SourceColumn, str, ColumnType | None, IntervalHandling], Mapped]
"""An engine's ``column_read(column, quoted, override, interval_handling)``: how the bootstrap reads
``column`` (``quoted`` its quoted name) with the table's ``column_types`` override, or why it cannot
exactly.  ``interval_handling`` is the source's setting (Postgres only: other engines ignore it)."""


def bit_width(declared: str) -> int:
    """``n`` of a declared ``bit(n)`` (1 when undeclared, as in SQL)."""
    match = re.search(r"\((\d+)\)", declared)
    return int(match.group(1)) if match else 1


def column_read(
    engine: str,
    column: SourceColumn,
    quoted: str,
    override: ColumnType | None = None,
    *,
    interval_handling: IntervalHandling = "numeric",
) -> Mapped:
    """How the bootstrap reads ``column`` (``quoted`` is its quoted name), or why it cannot exactly.

    Asked of the engine's own reader (:data:`ColumnReader`); ``interval_handling`` is the source's
    setting (Postgres only).
    """
    module = importlib.import_module(capabilities_for(engine).column_module)
    read: ColumnReader = module.column_read
    return read(column, quoted, override, interval_handling)


def parsed_column_types(column_types: Mapping[str, str]) -> dict[str, ColumnType]:
    """The ``column_types`` of a table entry, parsed (the config validated them already)."""
    return {name: parse_column_type(spec) for name, spec in column_types.items()}


def unknown_columns_problem(shape: TableShape, column_types: Mapping[str, object], table: str) -> str | None:
    """The message when ``column_types`` names columns ``shape`` lacks (a typo would keep the default)."""
    unknown = sorted(set(column_types) - {column.name for column in shape.columns})
    if not unknown:
        return None
    return f"table {table}: column_types names columns it does not have: {', '.join(unknown)}"


def refusals(
    engine: str,
    shape: TableShape,
    names: Sequence[str] | None,
    column_types: Mapping[str, str],
    *,
    interval_handling: IntervalHandling = "numeric",
) -> list[Refusal]:
    """The columns among ``names`` (all when None) of ``shape`` that cannot be replicated exactly."""
    wanted = set(names) if names is not None else {c.name for c in shape.columns}
    overrides = parsed_column_types(column_types)
    found: list[Refusal] = []
    for column in shape.columns:
        if column.name not in wanted:
            continue
        mapped = column_read(
            engine, column, '"x"', overrides.get(column.name), interval_handling=interval_handling
        )
        if isinstance(mapped, Refusal):
            found.append(mapped)
    return found


def key_refusals(
    engine: str, shape: TableShape, key: Sequence[str], column_types: Mapping[str, str], qualified: str
) -> list[str]:
    """``qualified.column (declared): why`` for each column of ``key`` whose values the lake cannot
    tell apart as record keys: a type its engine's column module lists in ``KEY_REFUSALS`` (Postgres
    ``timetz``), or one whose lake value is an array, map or struct (docs/type-mapping.md, Keys)."""
    module = importlib.import_module(capabilities_for(engine).column_module)
    refused_types: Mapping[str, str] = module.KEY_REFUSALS
    overrides = parsed_column_types(column_types)
    found: list[str] = []
    for name in key:
        column = shape.column(name)
        if column is None:
            continue  # a key column the table lacks fails the primary keys check
        reason = refused_types.get(column.type_name)
        if reason is None:
            mapped = column_read(engine, column, '"x"', overrides.get(name))
            if isinstance(mapped, ColumnRead) and isinstance(mapped.lake_type, _NOT_KEY_TYPES):
                reason = "an array or composite value has no record key text both write paths agree on"
        if reason is not None:
            found.append(f"{qualified}.{name} ({column.declared}): {reason}")
    return found
