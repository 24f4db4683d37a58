"""Trino reads a soft-delete table whose timeline Hudi has archived, through the catalog, as a user would.

Issue 36 measured two ways Trino 476 failed a user: a table whose timeline had been archived could not be
read at all (``TrinoHudiFileReaderFactory does not support Parquet file reader``, table version 9,
apache/hudi#13994), and the catalog entry lacked ``_cdc_deleted``, so soft-deleted rows could not be
filtered out.  Here a Postgres table is onboarded, bootstrapped and applied with the product's verbs at
the default table version, with soft deletes, and with Hudi's archival made to come soon (keep 2-3
commits, clean to 1, the metadata table compacted every 2 delta commits) instead of after about 30
commits.  After rounds of updates, deletes and inserts the timeline's archive holds files (asserted: no
archival, no test), and Trino's ``where not _cdc_deleted`` reads every column of every row equal to the
source, Spark+Hudi the same, while ``where _cdc_deleted`` holds exactly the deleted keys, once each.

The table is partitioned (``partition_by: [region]``) and every round's insert opens a new partition:
Trino takes a table's partitions from the metastore, so before the catalog sync registered them
(``CatalogSync`` with ``LakeFormat.partitions``) it read no row of a partitioned table at all.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from support.bootstrap import apply_until_live, onboard, postgres_db, write_db_config
from support.common import cli_run, load
from support.compare import assert_rows_equal
from support.trino_reader import trino_query, trino_rows

from cdc_lake.catalog.entry import catalog_table_name
from cdc_lake.hudi.writer import read_table
from cdc_lake.lake.columns import SOFT_DELETED_COLUMN
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ARCHIVE_SOON = {
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.clean.commits.retained": "1",
    "hoodie.metadata.compact.max.delta.commits": "2",
}
"""Hudi archives a table's timeline after about 30 commits by default; these bring it within a few."""

ROUNDS = 5
KEY = ("id",)


def _archived(base_path: str) -> list[Path]:
    """The files of the timeline's archive: ``hoodie.archivelog.folder`` (Hudi 1.1 writing table version
    6: ``.hoodie/history``), or the LSM history under ``.hoodie/timeline/history`` (versions 8 and 9)."""
    hoodie = Path(base_path.removeprefix("file:")) / ".hoodie"
    folders = [hoodie / "history", hoodie / "archived", hoodie / "timeline" / "history"]
    return [p for folder in folders for p in folder.glob("*") if p.is_file() and p.suffix != ".crc"]


def test_trino_reads_an_archived_soft_delete_table_with_its_deleted_rows_flagged(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    with postgres_db(local_stack) as db:
        db.execute(
            "create table public.items (id bigint primary key, note text, amount numeric(12, 2), "
            "at timestamptz not null, region text not null)",
            "insert into public.items select g, 'n' || g, g / 4.0, timestamptz '2024-01-01 00:00Z' "
            "+ g * interval '1 minute', 'r' || g % 3 from generate_series(1, 60) g",
        )
        entries = [{"name": "items", "tier": 1, "partition_by": ["region"]}]
        config_path = write_db_config(tmp_path / "cfg", db, entries, str(tmp_path / "lake"))
        written = yaml.safe_load(config_path.read_text())
        written["lake"].update({"soft_deletes": True, "format_options": ARCHIVE_SOON})
        config_path.write_text(yaml.safe_dump(written))
        config = load(config_path)
        table = db.qualified("items")
        onboard(config_path, db.source)
        result = cli_run(config_path, "bootstrap", table)
        assert result.exit_code == 0, result.stderr or result.output
        apply_until_live(spark, config, table)

        deleted: set[int] = set()
        for number in range(ROUNDS):
            gone = [5 + 10 * number, 6 + 10 * number]
            deleted.update(gone)
            db.execute(
                f"update public.items set note = 'r{number}-' || id, amount = amount + 1 "
                f"where id % 3 = {number % 3}",
                f"delete from public.items where id in ({gone[0]}, {gone[1]})",
                f"insert into public.items values ({100 + number}, 'new', {number}, now(), 'new {number}/x')",
            )
            apply_until_live(spark, config, table)
        db.execute("insert into public.items values (5, 'back', 1, now(), 'r0')")  # a deleted key back
        deleted.discard(5)
        apply_until_live(spark, config, table)

        with StateStore.open(config.state_store.url) as store:
            base_path = store.current_copy(table).path
        assert _archived(base_path), f"Hudi archived nothing at {base_path}: the test reads no archived table"

        source = db.rows("items", KEY)
        frame = read_table(spark, base_path)
        types = {f.name: f.dataType for f in frame.schema.fields}
        columns = [name for name in types if not name.startswith("_cdc_") and name != "_hoodie_is_deleted"]
        live_frame = frame.where(~F.col(SOFT_DELETED_COLUMN)).select(*columns)
        spark_live = [row.asDict(recursive=True) for row in live_frame.collect()]
        assert_rows_equal(table, source, spark_live, types, KEY, naive_utc_columns=columns)

        trino_all = trino_rows(local_stack, config, table, [*columns, SOFT_DELETED_COLUMN])
        keys = Counter(row["id"] for row in trino_all)
        assert not [k for k, n in keys.items() if n > 1], f"Trino: duplicate keys {keys.most_common(3)}"
        trino_live = [
            {c: row[c] for c in columns} for row in trino_all if not row[SOFT_DELETED_COLUMN]
        ]
        assert_rows_equal(table, source, trino_live, types, KEY, reader="trino", naive_utc_columns=columns)
        assert {row["id"] for row in trino_all if row[SOFT_DELETED_COLUMN]} == deleted

        hive = config.catalog.hive
        assert hive is not None
        entry = catalog_table_name(table)
        _, counted = trino_query(
            local_stack, f'select count(*) from "{entry}" where not {SOFT_DELETED_COLUMN}', hive.database
        )
        assert counted == [(len(source),)]
