"""The bootstrap's lake types against Debezium's registered schema: agree, adopt MySQL booleans, or stop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)
from support.debezium import PG_TOPIC, POSTGRES_SOURCE, character, envelope, optional, required

from cdc_lake.exceptions import BootstrapError, SchemaRegistryError
from cdc_lake_bootstrap.lake_types import ColumnRead
from cdc_lake_bootstrap.registry_check import align_with_registry


@dataclass
class Registered:
    schema_id: int
    struct_type: StructType
    schema: dict[str, Any]


# What Debezium registered: a varchar(40) ``label`` besides the read columns; ``added`` is not in it.
SCHEMA = envelope(
    PG_TOPIC,
    [required("id", "long"), optional("label", character(40)), optional("gone", character(9, "BPCHAR"))],
    POSTGRES_SOURCE,
)


class FakeRegistry:
    def __init__(self, struct: StructType | None) -> None:
        self.struct = struct

    def latest(self, subject: str) -> Registered:
        if self.struct is None:
            raise SchemaRegistryError(
                f"schema registry at http://r: subject {subject!r} has no registered versions"
            )
        return Registered(42, self.struct, SCHEMA)


ROW = StructType(
    [
        StructField("id", LongType()),
        StructField("small", ShortType()),
        StructField("flag", BooleanType()),
    ]
)
READS = [
    ColumnRead("id", "`id`", LongType()),
    ColumnRead("small", "CAST(`small` AS SIGNED)", IntegerType()),
    ColumnRead("flag", "CAST(`flag` AS SIGNED)", IntegerType()),
    ColumnRead("added", "`added`", StringType()),
    ColumnRead("label", "`label`", StringType()),
]


def test_agreeing_types_and_registered_booleans_are_kept() -> None:
    aligned, note, lengths = align_with_registry(FakeRegistry(ROW), "t", READS, "s.d.t")  # type: ignore[arg-type]

    assert [(r.name, r.lake_type) for r in aligned] == [
        ("id", LongType()),
        ("small", IntegerType()),
        ("flag", BooleanType()),
        ("added", StringType()),
        ("label", StringType()),
    ]
    assert aligned[2].select == "CAST(`flag` AS SIGNED)"
    assert note == "3 column types agree with Debezium's schema id 42"
    assert lengths == {"label": 40}, "the copy's commits record the registered lengths of its columns"


def test_no_registered_schema_leaves_the_catalog_types() -> None:
    aligned, note, lengths = align_with_registry(FakeRegistry(None), "t", READS, "s.d.t")  # type: ignore[arg-type]

    assert aligned == READS and lengths == {}
    assert "no value schema registered for t yet" in note


def test_any_other_difference_stops_the_bootstrap() -> None:
    reads = [ColumnRead("id", "`id`", IntegerType())]

    with pytest.raises(
        BootstrapError, match="column id would be int in the snapshot but bigint from Debezium"
    ):
        align_with_registry(FakeRegistry(ROW), "t", reads, "s.d.t")  # type: ignore[arg-type]
