"""Type torture, MariaDB: every MySQL/MariaDB type of docs/type-mapping.md, bootstrapped under changes.

The same run as ``test_type_torture_postgres.py`` on the stack's MariaDB (MySQL itself is not in the
stack: its paths are covered by the recorded Debezium messages of the unit tests): the refused spatial
types are refused at onboarding by name, the rest is bootstrapped while a writer changes the table,
applied until live, and compared value by value through Spark+Hudi and the second reader.  A zero date changed
in at the end arrives as NULL (Debezium's convention), which onboarding's "zero dates" check warns of.
``DATETIME`` (lake ``timestamp_ntz``) is in a second table, compared the same way.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import SourceDb, apply_until_live, mariadb_db, write_db_config
from support.common import cli_run
from support.compare import float32
from support.torture import (
    RefusedColumn,
    TortureColumn,
    TortureTable,
    bootstrap_under_changes_and_compare,
    text_of_decimal,
)

from cdc_lake.hudi.writer import read_table
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

ROWS = 40


def _bits(width: int) -> Any:
    """BIT(n) bytes as the n-character bit string (the ``string`` fallback)."""
    return lambda value: None if value is None else format(int.from_bytes(value, "big"), f"0{width}b")


def _bit_is_set(value: bytes | None) -> bool | None:
    return None if value is None else value != b"\x00"


def _micros(value: Any) -> Any:
    """A TIME (timedelta, negative too) as microseconds."""
    return None if value is None else value // dt.timedelta(microseconds=1)


def _epoch_micros(value: Decimal | None) -> Any:
    """UNIX_TIMESTAMP(ts) seconds as the lake's instant, in epoch microseconds."""
    return None if value is None else ("µs", int(value * 1_000_000))


def _bytes(value: Any) -> Any:
    return None if value is None else bytes(value)


COLUMNS = (
    TortureColumn("ti", "tinyint", ("-128", "127", "0", "null")),
    TortureColumn("tiu", "tinyint unsigned", ("0", "255", "null")),
    TortureColumn("si", "smallint", ("-32768", "32767", "null")),
    TortureColumn("siu", "smallint unsigned", ("65535", "0", "null")),
    TortureColumn("mi", "mediumint", ("-8388608", "8388607", "null")),
    TortureColumn("miu", "mediumint unsigned", ("16777215", "null")),
    TortureColumn("i", "int", ("-2147483648", "2147483647", "null")),
    TortureColumn("iu", "int unsigned", ("4294967295", "0", "null")),
    TortureColumn("bi", "bigint", ("-9223372036854775808", "9223372036854775807", "null")),
    TortureColumn("biu", "bigint unsigned", ("18446744073709551615", "0", "null")),
    TortureColumn("d52", "decimal(5,2)", ("-999.99", "999.99", "0.01", "null")),
    TortureColumn(
        "d38", "decimal(38,10)", ("9999999999999999999999999999.9999999999", "-1.0000000001", "null")
    ),
    # column_types string: DECIMAL(65,30) keeps 35 integer digits, more than the lake's decimal(38,30).
    TortureColumn(
        "d65",
        "decimal(65,30)",
        (
            "12345678901234567890123456789012345.123456789012345678901234567890",
            "-0.000000000000000000000000000001",
            "null",
        ),
        expect=text_of_decimal,
        column_type="string",
    ),
    TortureColumn("f", "float", ("3.40282e38", "-1.17549e-38", "1.5", "null"), expect=float32),
    TortureColumn("dbl", "double", ("1.7976931348623157e308", "-2.2250738585072014e-308", "0.1", "null")),
    TortureColumn("b1", "bit(1)", ("b'1'", "b'0'", "null"), expect=_bit_is_set),
    TortureColumn("b12", "bit(12)", ("b'101000000001'", "b'000000000000'", "b'1'", "null"),
                  expect=_bits(12), column_type="string"),
    TortureColumn(
        "b64", "bit(64)", ("b'1" + "0" * 62 + "1'", "b'1'", "null"), expect=_bits(64), column_type="string"
    ),
    TortureColumn("y", "year", ("1901", "2155", "null")),
    TortureColumn("dt", "date", ("'1000-01-01'", "'9999-12-31'", "'2024-02-29'", "null")),
    TortureColumn(
        "ts",
        "timestamp(6) null",
        ("'1970-01-01 00:00:01.000000'", "'2038-01-19 03:14:07.999999'", "'2024-03-10 02:30:00.5'", "null"),
        read="UNIX_TIMESTAMP({c})",
        expect=_epoch_micros,
    ),
    TortureColumn(
        "tm", "time(6)", ("'-838:59:59'", "'838:59:59'", "'00:00:00.000001'", "null"), expect=_micros
    ),
    TortureColumn("ch", "char(5)", ("'ab'", "'abcde'", "''", "null")),
    TortureColumn("vc", "varchar(20)", ("'ünïcode ✓'", "''", "'with ''quote'''", "null")),
    TortureColumn("tx", "text", ("'line\\nbreak'", "null")),
    TortureColumn("bn", "binary(4)", ("x'00ff'", "x'deadbeef'", "null"), expect=_bytes),
    TortureColumn("vb", "varbinary(8)", ("x'00ff'", "x''", "null"), expect=_bytes),
    TortureColumn("bl", "blob", ("x'deadbeef00'", "null"), expect=_bytes),
    TortureColumn("e", "enum('a','b','c d')", ("'a'", "'c d'", "null")),
    TortureColumn("st", "set('x','y','z')", ("'x,z'", "''", "null")),
    TortureColumn("j", "json", ("'{\"b\": 1,  \"a\": [1, 2]}'", "'[]'", "null")),
)
REFUSED = (
    RefusedColumn("pt", "point", "ST_PointFromText('POINT(1.5 2.5)')"),
    RefusedColumn("g", "geometry", "ST_GeomFromText('LINESTRING(0 0,1 1)')"),
)
NTZ = (
    TortureColumn(
        "dtm",
        "datetime(6)",
        ("'1000-01-01 00:00:00'", "'9999-12-31 23:59:59.999999'", "'2024-01-01 10:00:00.123456'", "null"),
    ),
)


def _refuses_zero_dates(db: SourceDb) -> bool:
    conn = db.connect_maria()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.sql_mode")
            modes = set(str(cur.fetchone()[0]).upper().split(","))
    finally:
        conn.close()
    strict = bool(modes & {"STRICT_TRANS_TABLES", "STRICT_ALL_TABLES"})
    return strict and {"NO_ZERO_DATE", "NO_ZERO_IN_DATE"} <= modes


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with mariadb_db(local_stack) as created:
        yield created


def test_every_mariadb_type_ends_equal_in_the_lake_through_both_readers(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    torture = TortureTable(db, "torture", COLUMNS, REFUSED)
    ntz = TortureTable(db, "torture_ntz", NTZ, big_text=False)
    torture.create(ROWS)
    ntz.create(6)

    bare = write_db_config(
        tmp_path / "refused", db, [{"name": "torture"}, {"name": "torture_ntz"}], str(tmp_path / "lake")
    )
    refused = cli_run(bare, "onboard", db.source, "--json")
    assert refused.exit_code != 0
    checks = json.loads(refused.stdout)["checks"]
    [check] = [c for c in checks if c["check"] == "column types"]
    # A server accepting zero dates (MariaDB's default sql_mode) is warned about.
    [zero] = [c for c in checks if c["check"] == "zero dates"]
    assert zero["outcome"] == ("pass" if _refuses_zero_dates(db) else "warn"), zero
    assert check["outcome"] == "fail"
    for column in REFUSED:
        assert f"table {db.qualified('torture')}: column {column.name} (" in check["detail"], column.name
    assert "or set column_types: {b12: string}" in check["detail"]
    assert "column d65" not in check["detail"]  # its default (a decimal failing loudly) is not refused

    config, ntz_base = bootstrap_under_changes_and_compare(spark, tmp_path, torture, ROWS, ntz)

    # A zero date (accepted by a session without NO_ZERO_DATE) arrives as NULL: Debezium's convention,
    # which is why onboarding warns about such a server (docs/type-mapping.md).
    conn = db.connect_maria()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute("insert into torture_ntz (id, dtm) values (100, '0000-00-00 00:00:00')")
        conn.commit()
    finally:
        conn.close()
    apply_until_live(spark, config, db.qualified("torture_ntz"))
    zero_row = read_table(spark, ntz_base).where("id = 100").select("dtm").collect()
    assert [row["dtm"] for row in zero_row] == [None]
