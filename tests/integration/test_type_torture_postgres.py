"""Type torture, Postgres: every type of docs/type-mapping.md, bootstrapped under concurrent changes, applied.

One table holds a column of every mapped type (extremes, NULLs, NULL array elements, a TOASTed text, the
``column_types`` fallbacks), plus the types the docs list as refused.  Onboarding must refuse those by
name; with them left out, the table is onboarded, bootstrapped while a writer updates, deletes,
deletes-and-re-inserts and inserts rows, and applied until live.  Then every value of every row is
compared with the source through Spark+Hudi and through the second reader: zero differences, except the
representation changes each :class:`TortureColumn` names (and the docs list).

A numeric ``NaN`` changed in at the end stops the connector naming the column, never a NULL in the lake.

Wall-clock timestamps (``timestamp``, lake ``timestamp_ntz``) are in a second table, compared the same
way.

``interval`` (refused above: the source keeps Debezium's lossy numeric encoding) replicates as text on a
source with ``interval_handling: string``: its own small table, bootstrapped and then changed through the
stream, must hold the same text from both, read by both readers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import SourceDb, apply_until_live, onboard, postgres_db, write_db_config
from support.common import cli_run, load
from support.compare import float32
from support.second_reader import second_reader_rows
from support.torture import (
    RefusedColumn,
    TortureColumn,
    TortureTable,
    bootstrap_under_changes_and_compare,
    each,
    failed_task_trace,
    micros_of_time_text,
    text_of_decimal,
    trimmed_text_of_decimal,
)

from cdc_lake.hudi.writer import read_table
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

ROWS = 40


def _utc_time_text(value: str | None) -> str | None:
    """Postgres ``timetz`` text (``10:15:30.5+05:30``) as Debezium sends it: UTC, ``Z`` (``04:45:30.5Z``)."""
    if value is None:
        return None
    sign_at = max(value.rfind("+"), value.rfind("-"))
    clock, offset = value[:sign_at], value[sign_at:]
    parts = [int(p) for p in offset[1:].split(":")] + [0, 0]
    offset_seconds = (parts[0] * 3600 + parts[1] * 60 + parts[2]) * (1 if offset[0] == "+" else -1)
    micros = micros_of_time_text(clock) - offset_seconds * 1_000_000
    micros %= 86_400 * 1_000_000
    seconds, fraction = divmod(micros, 1_000_000)
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if fraction:
        text += "." + f"{fraction:06d}".rstrip("0")
    return text + "Z"


def _bit_is_set(value: str | None) -> bool | None:
    return None if value is None else value == "1"


def _bytes(value: Any) -> Any:
    return None if value is None else bytes(value)


def _str(value: Any) -> Any:
    return None if value is None else str(value)


COLUMNS = (
    TortureColumn("si", "smallint", ("-32768", "32767", "0", "null")),
    TortureColumn("i", "integer", ("-2147483648", "2147483647", "null")),
    TortureColumn("bi", "bigint", ("-9223372036854775808", "9223372036854775807", "null", "0")),
    TortureColumn(
        "r", "real", ("'NaN'", "'Infinity'", "'-Infinity'", "3.4028235e38", "1.1754944e-38", "null", "1.5"),
        expect=float32,
    ),
    TortureColumn(
        "dp",
        "double precision",
        ("'NaN'", "'-Infinity'", "1.7976931348623157e308", "5e-324", "null", "'Infinity'", "-0.5"),
    ),
    TortureColumn("n", "numeric(12,2)", ("-9999999999.99", "9999999999.99", "0.01", "null")),
    TortureColumn(
        "n38", "numeric(38,10)", ("9999999999999999999999999999.9999999999", "-1.0000000001", "null")
    ),
    TortureColumn(
        "nfree",
        "numeric",
        ("99999999999999999999.999999999999999999", "-0.000000000000000001", "1.50", "null"),
    ),
    # column_types string: the exact text, any size.
    TortureColumn(
        "nfree_s",
        "numeric",
        ("0.000000000000000000000000000001", "123456789012345678901234567890.5", "1.500", "100", "null"),
        expect=trimmed_text_of_decimal,
        column_type="string",
    ),
    # column_types decimal(30,4): a chosen size.
    TortureColumn(
        "nfree_d", "numeric", ("12345678901234567890123456.1234", "-1.5", "null"), column_type="decimal(30,4)"
    ),
    TortureColumn(
        "nwide",
        "numeric(50,5)",
        ("123456789012345678901234567890123456789012345.12345", "-0.00001", "null"),
        expect=text_of_decimal,
        column_type="string",
    ),
    TortureColumn(
        "m", "money", ("-92233720368547758.08", "92233720368547758.07", "1.5", "null"), read="{c}::numeric"
    ),
    TortureColumn("b", "boolean", ("true", "false", "null")),
    TortureColumn("vc", "varchar(20)", ("'ünïcode ✓'", "''", "'with ''quote'''", "null")),
    TortureColumn("ch", "char(5)", ("'ab'", "'abcde'", "null")),
    TortureColumn("tx", "text", ("'line\nbreak'", "'tab\there'", "null")),
    TortureColumn("by", "bytea", ("'\\x00ff'", "''::bytea", "'\\xdeadbeef'", "null"), expect=_bytes),
    TortureColumn("d", "date", ("'0001-01-01'", "'9999-12-31'", "'2024-02-29'", "null")),
    TortureColumn(
        "tm", "time(6)", ("'00:00:00'", "'23:59:59.999999'", "'24:00:00'", "null"), read="{c}::text",
        expect=micros_of_time_text,
    ),
    TortureColumn(
        "tstz",
        "timestamptz(6)",
        ("'0001-01-01 00:00:00+00'", "'9999-12-31 23:59:59.999999+00'", "'2024-03-10 02:30:00.5-07'", "null"),
    ),
    TortureColumn(
        "ttz",
        "timetz(6)",
        ("'10:15:30.5+05:30'", "'00:00:00+00'", "'23:59:59.999999-14'", "'12:00:00.000001+01'", "null"),
        read="{c}::text",
        expect=_utc_time_text,
    ),
    TortureColumn(
        "u",
        "uuid",
        ("'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'", "null"),
        expect=_str,
    ),
    TortureColumn(
        "j", "json", ("'{\"b\": 1,  \"a\": [1, 2]}'", "'[]'", "'\"str\"'", "null"), read="{c}::text"
    ),
    TortureColumn("jb", "jsonb", ("'{\"b\": 1,  \"a\": [1, 2.50]}'", "'null'", "null"), read="{c}::text"),
    TortureColumn("x", "xml", ("'<r a=\"1\"><k>v</k></r>'", "'text only'", "null"), read="{c}::text"),
    TortureColumn("e", "mood", ("'happy'", "'sad'", "null"), read="{c}::text"),
    TortureColumn("dom", "posint", ("1", "2147483647", "null")),
    # The output text (10.0.0.1), which Debezium sends; inet::text would add /32.
    TortureColumn("ip", "inet", ("'192.168.0.1/24'", "'::1'", "'10.0.0.1'", "null"), read="abbrev({c})"),
    TortureColumn("net", "cidr", ("'10.0.0.0/8'", "'2001:db8::/32'", "null"), read="{c}::text"),
    TortureColumn("mac", "macaddr", ("'08:00:2b:01:02:03'", "null"), read="{c}::text"),
    TortureColumn("mac8", "macaddr8", ("'08:00:2b:01:02:03:04:05'", "null"), read="{c}::text"),
    TortureColumn("ci", "citext", ("'MiXed Case'", "null"), read="{c}::text"),
    TortureColumn("lt", "ltree", ("'top.mid.leaf'", "''", "null"), read="{c}::text"),
    TortureColumn("tsv", "tsvector", ("'a fat cat'", "''", "null"), read="{c}::text"),
    TortureColumn("rng", "int4range", ("'[1,5)'", "'empty'", "'(,3]'", "null"), read="{c}::text"),
    TortureColumn("nrng", "numrange", ("'[1.5,2.25]'", "'(,)'", "null"), read="{c}::text"),
    TortureColumn("drng", "daterange", ("'[2024-01-01,2024-02-01)'", "null"), read="{c}::text"),
    TortureColumn("b1", "bit(1)", ("B'1'", "B'0'", "null"), read="{c}::text", expect=_bit_is_set),
    # column_types string: bit(n) as its bit string (Debezium sends bytes of a number).
    TortureColumn("bt", "bit(12)", ("B'101000000001'", "B'000000000000'", "null"), read="{c}::text",
                  column_type="string"),
    TortureColumn(
        "a_text", "text[]", ("array['a', null, '']", "'{}'::text[]", "array[null]::text[]", "null")
    ),
    TortureColumn("a_vc", "varchar(10)[]", ("array['x'::varchar, null]", "null")),
    TortureColumn("a_int", "integer[]", ("array[1, null, -2147483648]", "null")),
    TortureColumn("a_big", "bigint[]", ("array[9223372036854775807, null]", "null")),
    TortureColumn("a_s", "smallint[]", ("array['-32768'::smallint, null]", "null")),
    TortureColumn("a_bool", "boolean[]", ("array[true, null, false]", "null")),
    TortureColumn("a_r", "real[]", ("array['NaN'::real, null, 1.5]", "null"), expect=each(float32)),
    TortureColumn("a_dp", "double precision[]", ("array['-Infinity'::float8, null, 2.5]", "null")),
    TortureColumn("a_num", "numeric[]", ("array[1.5, null, -0.000000000000000001]", "null")),
    TortureColumn("a_date", "date[]", ("array['0001-01-01'::date, null, '9999-12-31']", "null")),
    TortureColumn(
        "a_uuid", "uuid[]", ("array['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, null]", "null"),
        read="{c}::text[]",
    ),
    TortureColumn(
        "a_tstz", "timestamptz[]", ("array['2024-01-01 10:00:00.123456+02'::timestamptz, null]", "null")
    ),
    TortureColumn("a_json", "jsonb[]", ("array['{\"a\": 1}'::jsonb, null]", "null"), read="{c}::text[]"),
)
REFUSED = (
    RefusedColumn("iv", "interval", "'1 year 2 mons -3 days 04:05:06.789'"),
    RefusedColumn("hs", "hstore", "'a=>1, b=>NULL'"),
    RefusedColumn("pt", "point", "'(1.5,2.5)'"),
    RefusedColumn("vb", "bit varying(8)", "B'101'"),
    RefusedColumn("tzr", "tstzrange", "'[2024-01-01 00:00+00,2024-02-01 00:00+00)'"),
    RefusedColumn("a_mood", "mood[]", "array['happy'::mood, null]"),
)
NTZ = (
    TortureColumn(
        "ts",
        "timestamp(6)",
        ("'0001-01-01 00:00:00'", "'9999-12-31 23:59:59.999999'", "'2024-01-01 10:00:00.123456'", "null"),
    ),
)
# The array columns Debezium 3.5 sends no placeholder for when TOASTed and unchanged, with their elements.
NO_TOAST_PLACEHOLDER = (
    ("a_s", "int2"),
    ("a_bool", "bool"),
    ("a_r", "float4"),
    ("a_dp", "float8"),
    ("a_num", "numeric"),
    ("a_tstz", "timestamptz"),
)
TYPES_DDL = (
    "create extension if not exists hstore",
    "create extension if not exists citext",
    "create extension if not exists ltree",
    "create type mood as enum ('happy', 'sad')",
    "create domain posint as integer check (value > 0)",
)


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def _entry(table: TortureTable, **extra: Any) -> dict[str, Any]:
    return {"name": table.name, **extra}


def test_every_postgres_type_ends_equal_in_the_lake_through_both_readers(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(*TYPES_DDL)
    torture = TortureTable(db, "torture", COLUMNS, REFUSED)
    ntz = TortureTable(db, "torture_ntz", NTZ, big_text=False)
    torture.create(ROWS)
    ntz.create(6)

    # Onboarding refuses every refused column by name, and a fallback-capable one without its fallback.
    bare = write_db_config(tmp_path / "refused", db, [_entry(torture), _entry(ntz)], str(tmp_path / "lake"))
    refused = cli_run(bare, "onboard", db.source, "--json")
    assert refused.exit_code != 0
    report = json.loads(refused.stdout)
    [check] = [c for c in report["checks"] if c["check"] == "column types"]
    assert check["outcome"] == "fail"
    for column in REFUSED:
        assert f"table {db.qualified('torture')}: column {column.name} (" in check["detail"], column.name
    assert "column bt (bit(12)) cannot be replicated exactly" in check["detail"]
    assert "or set column_types: {bt: string}" in check["detail"]
    assert "column nfree_s" not in check["detail"]  # the unconstrained numeric's default is exact (or loud)
    assert "column iv (interval) cannot" in check["detail"]
    assert "or set interval_handling: string on its source" in check["detail"]
    # Arrays Debezium 3.5 has no TOAST placeholder for stop the connector when an update leaves one
    # unchanged under REPLICA IDENTITY DEFAULT: refused by name, unless never TOASTed (PLAIN storage).
    [arrays] = [c for c in report["checks"] if c["check"] == "TOASTed arrays"]
    assert arrays["outcome"] == "fail"
    for name, element in NO_TOAST_PLACEHOLDER:
        assert f"{name} ({element}[])" in arrays["detail"], name
    db.execute(
        "alter table public.torture "
        + ", ".join(f"alter column {name} set storage plain" for name, _ in NO_TOAST_PLACEHOLDER)
    )

    # With the refused columns left out and the fallbacks chosen, onboarding passes.
    bootstrap_under_changes_and_compare(spark, tmp_path, torture, ROWS, ntz)

    # A numeric NaN cannot be encoded by Debezium's precise mode: the connector stops naming the column
    # (event.converting.failure.handling.mode=fail) instead of the lake getting a NULL without a word.
    db.execute("update public.torture set nfree = 'NaN' where id = (select min(id) from public.torture)")
    trace = failed_task_trace(db)
    assert "Failed to properly convert data value for 'public.torture.nfree'" in trace, trace[-3000:]


# An interval literal and its lake text: Debezium's interval.handling.mode=string, every field with its own
# sign as Postgres splits the value (months, days, time), seconds exact to the microsecond.
INTERVALS = (
    ("'1 year 2 mons 3 days 04:05:06.78'", "P1Y2M3DT4H5M6.78S"),
    ("'-1 year -2 mons +3 days -04:05:06.78'", "P-1Y-2M3DT-4H-5M-6.78S"),
    ("'-1 year +2 mons -3 days 04:05:06.78'", "P0Y-10M-3DT4H5M6.78S"),
    ("'-1 day +23:59:59.999999'", "P0Y0M-1DT23H59M59.999999S"),
    ("'0'", "P0Y0M0DT0H0M0S"),
    ("'-0.000001 sec'", "P0Y0M0DT0H0M-0.000001S"),
    ("'1.003691 sec'", "P0Y0M0DT0H0M1.003691S"),  # Debezium sends 1.003690999
    ("'1000 hours'", "P0Y0M0DT1000H0M0S"),
    ("'178956970 years 7 mons -2147483648 days'", "P178956970Y7M-2147483648DT0H0M0S"),
    ("null", None),
)


def _lake_intervals(spark: SparkSession, base_path: str) -> tuple[dict[int, Any], dict[int, Any]]:
    """``id -> iv`` of the lake table, read by Spark+Hudi and by the second reader."""
    by_spark = {int(r["id"]): r["iv"] for r in read_table(spark, base_path).select("id", "iv").collect()}
    by_second = {int(r["id"]): r["iv"] for r in second_reader_rows(base_path, ["id", "iv"])}
    return by_spark, by_second


def test_intervals_as_text_are_the_same_from_the_bootstrap_and_the_stream(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    count = len(INTERVALS)
    with postgres_db(local_stack) as db:
        values = ", ".join(f"({key}, {literal})" for key, (literal, _) in enumerate(INTERVALS))
        db.execute(
            "create table public.intervals (id bigint primary key, iv interval)",
            f"insert into public.intervals values {values}",
        )
        config_path = write_db_config(
            tmp_path, db, [{"name": "intervals"}], str(tmp_path / "lake"), {"interval_handling": "string"}
        )
        onboard(config_path, db.source)
        config = load(config_path)
        table = db.qualified("intervals")
        result = cli_run(config_path, "bootstrap", table)
        assert result.exit_code == 0, result.stderr or result.output
        apply_until_live(spark, config, table)
        base = config.lake.table_base_path(table)

        bootstrapped = {key: text for key, (_, text) in enumerate(INTERVALS)}
        assert _lake_intervals(spark, base) == (bootstrapped, bootstrapped)

        # Through the stream: every row takes the next value, and new rows take every value.
        db.execute(
            *(f"update public.intervals set iv = {INTERVALS[(key + 1) % count][0]} where id = {key}"
              for key in range(count)),
            f"insert into public.intervals select id + 100, iv from public.intervals where id < {count}",
        )
        apply_until_live(spark, config, table)
        streamed = {key: INTERVALS[(key + 1) % count][1] for key in range(count)}
        streamed |= {key + 100: text for key, text in streamed.items()}
        assert _lake_intervals(spark, base) == (streamed, streamed)
