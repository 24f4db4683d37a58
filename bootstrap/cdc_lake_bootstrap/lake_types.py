"""How a JDBC read is turned into exactly the lake type of every source column.

The lake type of each catalog type, the SQL the bootstrap selects for it and the conversion (or why the
type is refused) live in :mod:`cdc_lake.sources.column_types`, the one mapping onboarding's preflight
and the bootstrap share, and which gives for each type the Spark type the decoder gives Debezium's
encoding of it (``docs/type-mapping.md``).  This module applies it: :func:`column_reads` picks the
reads of a table's columns (honouring its ``column_types``) and :func:`to_lake_types` converts what
JDBC returned.  A value the lake type cannot hold (``infinity``, ``NaN`` in a numeric, a decimal with
more digits, a year beyond 9999) fails the read naming the column, the key of the row and what to do
(a ``column_types`` fallback; for ``NaN``, that Debezium cannot encode it), never a silent null or
rounding: the applier refuses the same values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    DecimalType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from cdc_lake.exceptions import BootstrapError
from cdc_lake.lake.schema import lake_type
from cdc_lake.representation import STRING
from cdc_lake.sources.column_types import (
    ColumnRead,
    Conversion,
    Quote,
    Refusal,
    column_read,
    parsed_column_types,
    spark_decimal,
    unknown_columns_problem,
)
from cdc_lake.sources.settings import IntervalHandling
from cdc_lake.sources.snapshot import TableShape
from cdc_lake.spark.errors import REFUSED_VALUE

__all__ = [
    "REFUSED_VALUE",
    "ColumnRead",
    "Conversion",
    "column_reads",
    "lake_columns",
    "refusal",
    "spark_column",
    "spark_decimal",
    "to_lake_types",
]


def column_reads(
    engine: str,
    shape: TableShape,
    names: Sequence[str],
    quote: Quote,
    column_types: Mapping[str, str] | None = None,
    *,
    interval_handling: IntervalHandling = "numeric",
) -> list[ColumnRead]:
    """How to read ``names`` of ``shape`` (in table order) into lake types; raises for unmappable types.

    ``column_types`` is the table's per-column representation (``string``, ``decimal(p,s)``);
    ``interval_handling`` the source's (Postgres ``interval`` as text or refused).
    """
    overrides = parsed_column_types(column_types or {})
    unknown = unknown_columns_problem(shape, column_types or {}, shape.name)
    if unknown is not None:
        raise BootstrapError(unknown)
    wanted = set(names)
    reads = []
    for column in shape.columns:
        if column.name not in wanted:
            continue
        override = overrides.get(column.name)
        read = column_read(engine, column, quote(column.name), override, interval_handling=interval_handling)
        if isinstance(read, Refusal):
            raise BootstrapError(read.message(shape.name))
        reads.append(
            ColumnRead(read.name, read.select, lake_type(read.lake_type), read.conversion, read.per_element)
        )
    return reads


def lake_columns(reads: Sequence[ColumnRead]) -> StructType:
    """The source columns of the lake table (all nullable, as the applier writes them)."""
    return StructType([StructField(read.name, read.lake_type, True) for read in reads])


# Spark's string-to-date/timestamp cast ignores text it does not expect (``0044-03-15 BC`` becomes 44 AD)
# and accepts years beyond 9999; the decoder refuses both, so only this exact shape is cast.
_ISO_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"
_DATE_TEXT = _ISO_DATE + "$"
_TIMESTAMP_TEXT = _ISO_DATE + r" [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?$"
_PG_UTC_TIMESTAMP_TEXT = _TIMESTAMP_TEXT.removesuffix("$") + r"\+00$"
_NUMBER_TEXT = r"^-?[0-9]+(\.[0-9]+)?$"


def spark_column(name: str) -> Column:
    """The column ``name`` of a frame, whatever characters its name holds."""
    return F.col("`" + name.replace("`", "``") + "`")


def _converted_value(conversion: Conversion, lake: DataType, source: Column) -> Column:
    match conversion:
        case Conversion.CAST:
            return source.cast(lake)
        case Conversion.DECIMAL_TEXT:
            assert isinstance(lake, DecimalType)
            fraction = F.regexp_extract(source, r"\.(\d*?)0*$", 1)
            return F.when(F.length(fraction) <= lake.scale, source.cast(lake))
        case Conversion.NUMBER_TEXT:
            # Debezium cannot encode NaN and infinities (its connector stops): refuse them here as well.
            return F.when(source.rlike(_NUMBER_TEXT), source)
        case Conversion.DATE_TEXT:
            return F.when(source.rlike(_DATE_TEXT), source.cast(DateType()))
        case Conversion.LOCAL_TIMESTAMP_TEXT:
            return F.when(source.rlike(_TIMESTAMP_TEXT), source.cast(TimestampNTZType()))
        case Conversion.UTC_TIMESTAMP_TEXT:
            return F.when(source.rlike(_TIMESTAMP_TEXT), F.concat(source, F.lit("Z")).cast(TimestampType()))
        case Conversion.PG_UTC_TIMESTAMP_TEXT:
            utc = F.regexp_replace(source, r"\+00$", "")
            valid = source.rlike(_PG_UTC_TIMESTAMP_TEXT)
            return F.when(valid, F.concat(utc, F.lit("Z")).cast(TimestampType()))


def _converted(read: ColumnRead, source: Column) -> tuple[Column, Column]:
    """The converted column, and whether a non-null source value (or array element) was lost."""
    if not read.per_element:
        converted = _converted_value(read.conversion, read.lake_type, source)
        return converted, source.isNotNull() & converted.isNull()
    assert isinstance(read.lake_type, ArrayType)
    element = read.lake_type.elementType
    converted = F.transform(source, lambda value: _converted_value(read.conversion, element, value))
    lost = F.exists(F.zip_with(source, converted, lambda a, b: a.isNotNull() & b.isNull()), lambda x: x)
    return converted, source.isNotNull() & lost


_NUMBER_CONVERSIONS = frozenset({Conversion.DECIMAL_TEXT, Conversion.NUMBER_TEXT})


def refusal(read: ColumnRead, number: bool) -> str:
    """What a value of ``read`` that its lake type refused means, and what to do (``number``: it is a
    number, not NaN or an infinity)."""
    lake = read.lake_type.simpleString()
    if read.per_element:
        return f"holds an element its lake type {lake} cannot hold exactly (docs/type-mapping.md)"
    if read.conversion in _NUMBER_CONVERSIONS and not number:
        return (
            "holds NaN or ±Infinity, which Debezium cannot encode (its connector task fails on it as "
            "well): replace it at the source (docs/runbooks/connector-failed.md)"
        )
    if read.conversion is Conversion.DECIMAL_TEXT:
        return (
            f"holds a value with more digits than its lake type {lake} holds; set column_types: "
            f"{{{read.name}: {STRING}}} in the table's config (docs/type-mapping.md)"
        )
    return f"holds a value its lake type {lake} cannot hold exactly (docs/type-mapping.md)"


def _refusal_message(read: ColumnRead, source: Column, table: str, key: Sequence[str]) -> Column:
    """The query's error for a refused value of ``read``: table, column, the row's key, why, what to do."""
    row_key = F.to_json(F.struct(*[spark_column(k) for k in key]))
    why = F.lit(refusal(read, number=False))
    if read.conversion is Conversion.DECIMAL_TEXT and not read.per_element:
        why = F.when(source.rlike(_NUMBER_TEXT), F.lit(refusal(read, number=True))).otherwise(why)
    head = f"table {table}: column {read.name} {REFUSED_VALUE} "
    return F.concat(F.lit(head), row_key, F.lit(" "), why)


def to_lake_types(frame: DataFrame, reads: Sequence[ColumnRead], table: str, key: Sequence[str]) -> DataFrame:
    """``frame`` (as JDBC read it) with every column converted to its lake type, failing on lossy values.

    The failure names the table, the column and the ``key`` of the first row found holding such a value
    (:func:`refusal` says why and what to do).
    """
    columns = []
    for read in reads:
        source = spark_column(read.name)
        converted, lost = _converted(read, source)
        failure = F.raise_error(_refusal_message(read, source, table, key)).cast(read.lake_type)
        checked = F.when(lost, failure)
        columns.append(checked.otherwise(converted).alias(read.name))
    return frame.select(*columns)
