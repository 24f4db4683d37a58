"""Merging writer schemas into the lake columns: additions, exact widening, and refused type changes."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from cdc_lake.exceptions import SchemaChangeError
from cdc_lake.lake.columns import METADATA_FIELDS, lake_struct
from cdc_lake.lake.schema import holds, lake_type, merge_columns, row_columns


def _struct(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, data_type, False) for name, data_type in fields])  # type: ignore[arg-type]


def test_the_first_schema_defines_nullable_columns_with_lake_types() -> None:
    evolution = merge_columns(
        None, _struct(("id", LongType()), ("qty", ShortType()), ("tags", ArrayType(ByteType())))
    )

    assert [(f.name, f.dataType, f.nullable) for f in evolution.columns.fields] == [
        ("id", LongType(), True),
        ("qty", IntegerType(), True),
        ("tags", ArrayType(IntegerType()), True),
    ]
    assert evolution.added == ("id", "qty", "tags") and evolution.missing == ()


def test_added_columns_are_appended_and_missing_ones_reported() -> None:
    current = _struct(("id", LongType()), ("name", StringType()), ("gone", StringType()))

    evolution = merge_columns(
        current, _struct(("id", LongType()), ("email", StringType()), ("name", StringType()))
    )

    assert evolution.columns.fieldNames() == ["id", "name", "gone", "email"]
    assert (evolution.added, evolution.missing) == (("email",), ("gone",))


def test_a_type_the_stored_column_holds_exactly_keeps_the_stored_type() -> None:
    current = _struct(("n", LongType()), ("d", DecimalType(12, 4)), ("f", DoubleType()))

    evolution = merge_columns(
        current, _struct(("n", IntegerType()), ("d", DecimalType(10, 2)), ("f", FloatType()))
    )

    assert [f.dataType for f in evolution.columns.fields] == [LongType(), DecimalType(12, 4), DoubleType()]


@pytest.mark.parametrize(
    ("stored", "incoming"),
    [
        (StringType(), IntegerType()),
        (DecimalType(12, 2), DecimalType(12, 3)),
        (DecimalType(12, 2), DecimalType(14, 2)),
        (DoubleType(), StringType()),
    ],
)
def test_other_type_changes_are_refused_naming_the_column(stored: object, incoming: object) -> None:
    with pytest.raises(SchemaChangeError, match=r"column 'c' changes type"):
        merge_columns(_struct(("c", stored)), _struct(("c", incoming)))
    assert not holds(stored, incoming)  # type: ignore[arg-type]


def test_a_widened_source_column_takes_the_wider_type() -> None:
    current = _struct(("n", IntegerType()), ("f", FloatType()))

    evolution = merge_columns(current, _struct(("n", LongType()), ("f", DoubleType())))

    assert [f.dataType for f in evolution.columns.fields] == [LongType(), DoubleType()]


def test_row_columns_drop_hudi_and_cdc_lake_metadata() -> None:
    row = _struct(("id", LongType()))
    stored = StructType([StructField("_hoodie_commit_time", StringType()), *lake_struct(row).fields])

    assert row_columns(stored).fieldNames() == ["id"]
    assert len(METADATA_FIELDS) == 6
    assert lake_type(StructType([StructField("s", ShortType())])) == StructType(
        [StructField("s", IntegerType())]
    )
