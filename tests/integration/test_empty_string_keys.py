"""Empty strings in a record key: one lake row per key through the bootstrap and the applier.

Found by the differential fuzzer (``fuzz_regressions/postgres-min-empty-string-in-composite-key.json``,
from seed postgres-1010, and its MariaDB twin): Hudi's bulk insert row writer refuses an empty string
component of a composite key ("Record key has to be non-null!"), so the bootstrap of such a table failed
and told the user to resume it.  The upsert writes that component as ``__empty__``; the bulk insert
now leaves the row writer for a composite key with a string column (``cdc_lake.hudi.keys``), so both
write the same record key.  A key Hudi refuses on every path (a single key column holding the empty
string) ends the bootstrap at once, naming the table, the row and the cause, with no "resume".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    postgres_db,
    write_db_config,
)
from support.common import cli_run, load

from cdc_lake.hudi.writer import read_table
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def _record_keys(spark: SparkSession, base_path: str) -> list[str]:
    lake = read_table(spark, base_path, meta_columns=True)
    return sorted(r[0] for r in lake.select("_hoodie_record_key").collect())


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as source_db:
        yield source_db


def test_a_composite_key_with_empty_strings_keeps_one_row_per_key_after_the_hand_off(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(
        "create table pairs (n integer, s text, v text, primary key (n, s))",
        "insert into pairs values (1, '', 'a'), (2, 'x', 'b'), (3, '', 'c'), (4, '', 'd')",
    )
    config_path = write_db_config(tmp_path, db, [{"name": "pairs"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    outcome = cli_run(config_path, "bootstrap", db.qualified("pairs"))
    assert outcome.exit_code == 0, outcome.stderr or outcome.output
    config = load(config_path)
    base_path = config.lake.table_base_path(db.qualified("pairs"))
    bootstrapped = _record_keys(spark, base_path)
    assert bootstrapped == ["n:1,s:__empty__", "n:2,s:x", "n:3,s:__empty__", "n:4,s:__empty__"]
    db.execute(
        "update pairs set v = 'a2' where n = 1 and s = ''",
        "delete from pairs where n = 3 and s = ''",
        "update pairs set s = '' where n = 2",
        "update pairs set s = 'y' where n = 4",
        "insert into pairs values (5, '', 'e')",
    )
    apply_until_live(spark, config, db.qualified("pairs"))
    assert_lake_equals_source(spark, config, db, "pairs", key=["n", "s"])
    keys = _record_keys(spark, base_path)
    assert keys == ["n:1,s:__empty__", "n:2,s:__empty__", "n:4,s:y", "n:5,s:__empty__"]


def test_an_empty_single_key_ends_the_bootstrap_naming_table_row_and_cause(
    db: SourceDb, tmp_path: Path
) -> None:
    db.execute(
        "create table words (w text primary key, v text)", "insert into words values ('', 'a'), ('z', 'b')"
    )
    config_path = write_db_config(tmp_path, db, [{"name": "words"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("words")
    failed = cli_run(config_path, "bootstrap", table)
    assert failed.exit_code != 0
    error = failed.stderr
    assert error.startswith("error: ") and error.count("\n") == 1, error
    for fragment in (
        f'table {table}: the record key of the row with key {{"w":""}} is empty',
        "Hudi refuses",
    ):
        assert fragment in error, error
    assert "resume" not in error, error
