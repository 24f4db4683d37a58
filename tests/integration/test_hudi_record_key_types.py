"""The bootstrap and the applier build the same Hudi record key for every key type, through Hudi 1.1.

Hudi builds the record key itself, and not the same way on every write path: its bulk insert with the
row writer printed a ``timestamp`` key as milliseconds in the JVM's time zone (keys a microsecond apart
became one) and a ``binary`` key as ``[B@...`` (the array's identity), while the upsert writes
microseconds and hex.  A table bootstrapped one way and updated the other then held two rows per key,
and a deleted key's bootstrapped row never left.

Invariant, per key type a lake column can have (``cdc_lake.lake.schema.lake_type``), alone and in one
composite key of them all (on every layout): after the bootstrap's bulk insert of N rows, the
applier's upsert of every key and delete of some, the lake holds exactly one row per surviving key,
each the applier's, and the record key the bootstrap wrote equals the applier's.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from cdc_lake.hudi.format import HudiFormat, hudi_spec
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.columns import ORDERING_COLUMN
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.layout import IndexType, TableSpec, TableType
from cdc_lake.lake.schema import lake_type
from cdc_lake.state.records import Watermark
from cdc_lake_bootstrap.write import write_group

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("trino_reads_every_table"), pytest.mark.timeout(900)]

_UTC = dt.UTC
_T0 = dt.datetime(2024, 1, 1, 12, 0, 0, 123475, tzinfo=_UTC)
KEY_VALUES: dict[str, tuple[DataType, list[Any]]] = {
    "smallint": (ShortType(), [-32768, 0, 1, 32767]),
    "int": (IntegerType(), [-(2**31), 0, 7, 2**31 - 1]),
    "bigint": (LongType(), [-(2**63), 0, 7, 2**63 - 1]),
    "string": (StringType(), ["a", "A", "ü€😀", " x ", "1,2"]),
    "decimal": (DecimalType(12, 3), [Decimal("-1.5"), Decimal("0.000"), Decimal("1.500"), Decimal("1.501")]),
    "decimal38": (DecimalType(38, 0), [Decimal("-" + "9" * 38), Decimal(0), Decimal("9" * 38)]),
    "double": (DoubleType(), [-1.5, 0.0, 1e-300, 1.0000000000000002, 1e300]),
    "float": (FloatType(), [-1.5, 0.0, 0.25, 2.0**100]),  # exact in 32 bits
    "boolean": (BooleanType(), [False, True]),
    "date": (DateType(), [dt.date(1, 1, 1), dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(9999, 12, 1)]),
    # Microseconds apart, across a DST change (America/New_York, 2024-03-10), before the epoch.
    "timestamp": (TimestampType(), [
        _T0, _T0 + dt.timedelta(microseconds=1), _T0 + dt.timedelta(microseconds=2),
        dt.datetime(2024, 3, 10, 6, 59, 59, 999999, tzinfo=_UTC), dt.datetime(2024, 3, 10, 7, 0, tzinfo=_UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=_UTC),
    ]),
    "timestamp_ntz": (TimestampNTZType(), [
        _T0.replace(tzinfo=None), (_T0 + dt.timedelta(microseconds=1)).replace(tzinfo=None),
        dt.datetime(1900, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    ]),
    "binary": (BinaryType(), [b"\x00", b"\x00\x0f", b"\x0f", b"\xff" * 40]),
}


def _schema(keys: dict[str, DataType]) -> StructType:
    return StructType([
        # The type the lake stores (a short as an int).
        *(StructField(name, lake_type(key_type), False) for name, key_type in keys.items()),
        StructField("name", StringType(), True),
        StructField(ORDERING_COLUMN, LongType(), True),
        StructField("_hoodie_is_deleted", BooleanType(), True),
    ])


def _plain(value: Any) -> Any:
    """``value`` as Spark's collect gives it back: bytes, and naive UTC times (the session's zone)."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(_UTC).replace(tzinfo=None)
    return value


def _hashable(row: Any) -> tuple[Any, ...]:
    return tuple(_plain(v) for v in row)


def _rows(columns: dict[str, list[Any]], name: str, lsn: int, deleted: int = 0) -> list[tuple[Any, ...]]:
    """One row per index up to the longest value list (shorter lists repeat), the first ``deleted``
    flagged deleted."""
    count = max(len(values) for values in columns.values())
    return [
        (*(values[i % len(values)] for values in columns.values()), name, lsn, i < deleted)
        for i in range(count)
    ]


LAYOUTS = {
    "cow": {},
    "mor-record-index": {"table_type": TableType.MERGE_ON_READ, "index": IndexType.RECORD_INDEX},
    "bucket": {"index": IndexType.BUCKET},
}
KeyColumns = dict[str, tuple[DataType, list[Any]]]
SHORT_BINARY = (BinaryType(), [v for v in KEY_VALUES["binary"][1] if len(v) < 8])
SINGLE: dict[str, KeyColumns] = {name: {"k": key} for name, key in KEY_VALUES.items()}
COMPOSITE: KeyColumns = {
    # A row number first: every row's key is distinct even where a type has few values.
    "id": (IntegerType(), list(range(max(len(values) for _, values in KEY_VALUES.values())))),
    **{f"k_{name}": key for name, key in sorted(KEY_VALUES.items())},
}


def _check(
    spark: SparkSession, tmp_path: Path, key: KeyColumns, layout: str, partition_fields: tuple[str, ...] = ()
) -> None:
    keys = tuple(key)
    # The bootstrap's own write path (write_group through the lake format), then the applier's upsert.
    spec = TableSpec(
        name="src.public.keyed", base_path=(tmp_path / "t").as_uri(), key_fields=keys, parallelism=1,
        partition_fields=partition_fields, **LAYOUTS[layout],  # type: ignore[arg-type]
    )
    schema = _schema({name: key_type for name, (key_type, _) in key.items()})
    values = {name: key_values for name, (_, key_values) in key.items()}
    created = dt.datetime(2026, 1, 1, tzinfo=_UTC)
    watermark = Watermark(spec.name, "src.public.t", {0: 0}, None, None, created, True, ())
    snapshot = _rows(values, "boot", 0)
    write_group(HudiFormat(spark), spec, spark.createDataFrame(snapshot, schema), watermark, [0], {})
    booted = read_table(spark, spec.base_path, meta_columns=True).select(*keys, "_hoodie_record_key")
    boot_keys = {_hashable(r[:-1]): r[-1] for r in booted.collect()}

    deleted = len(snapshot) // 2
    changes = _rows(values, "apply", 1, deleted)
    write_batch(spark, hudi_spec(spec), spark.createDataFrame(changes, schema), WriteOperation.UPSERT)

    lake = read_table(spark, spec.base_path, meta_columns=True)
    found = sorted(tuple(r) for r in lake.groupBy("_hoodie_record_key").agg(F.count("*")).collect())
    rows = lake.select(*keys, "name", "_hoodie_record_key").collect()
    stored = {_hashable(r[:-2]): (r[-2], r[-1]) for r in rows}
    expected = {_hashable(row[: len(keys)]) for row in changes[deleted:]}
    n = len(expected)
    assert len(boot_keys) == len(snapshot), f"bootstrap wrote {len(boot_keys)} keys: {boot_keys}"
    assert len(rows) == n, f"lake holds {len(rows)} rows for the source's {n}: {found}"
    assert set(stored) == expected and {name for name, _ in stored.values()} == {"apply"}, stored
    for row_key, (_, record_key) in stored.items():
        written = boot_keys[row_key]
        assert written == record_key, f"{row_key}: bootstrap {written!r}, applier {record_key!r}"


@pytest.mark.parametrize("type_name", sorted(KEY_VALUES))
def test_bootstrap_and_applier_write_one_record_key_per_source_key(
    spark: SparkSession, tmp_path: Path, type_name: str
) -> None:
    _check(spark, tmp_path, SINGLE[type_name], "cow")


@pytest.mark.parametrize("type_name", ["bigint", "date", "decimal", "string"])
def test_a_single_key_with_two_partition_fields_is_written_and_keeps_its_record_key(
    spark: SparkSession, tmp_path: Path, type_name: str
) -> None:
    """Hudi's complex key generator with one key field (a table partitioned by two columns): Hudi 1.1
    refused every write of such a table until told no Hudi 0.14.1-1.0.2 wrote it (cdc_lake.hudi.options).
    Partitioned by the row's name and its key, so every row moves partition between the bootstrap and
    the upsert (the name changes)."""
    _check(spark, tmp_path, SINGLE[type_name], "cow", partition_fields=("name", "k"))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_composite_key_of_every_type_agrees_on_every_layout(
    spark: SparkSession, tmp_path: Path, layout: str
) -> None:
    key = COMPOSITE
    if layout == "mor-record-index":
        # Keys over 125 bytes are refused on the record index (test_hudi_record_keys.py): the two types the
        # row writer renders differently, with short values.
        key = {"id": COMPOSITE["id"], "k_timestamp": KEY_VALUES["timestamp"], "k_binary": SHORT_BINARY}
    _check(spark, tmp_path, key, layout)
