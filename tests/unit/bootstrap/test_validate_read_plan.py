"""How ``validate`` reads the source: a JDBC range query per partition, as many as the table's size needs.

Issue 36 item 7: ``validate`` of a 20-row table read it in 8 JDBC partitions (the ``--partitions``
default) after a Spark job for the key's bounds, 2 of its ~18 s past the session start.  A table the
catalog estimates small is read in one query, without the bounds job; a large one keeps the key-range
partitions, at most ``--partitions``.  The source's engine and Spark's reader are faked: only the reads
asked for are checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_lake.config import Config, load_config
from cdc_lake.sources.snapshot import JdbcAccess, SourceColumn, TableShape
from cdc_lake_bootstrap import validate
from cdc_lake_bootstrap.partitions import SINGLE_PARTITION_ROWS
from cdc_lake_bootstrap.validate import ValidateOptions, read_partitions

TABLE = "pg.public.items"


@pytest.fixture
def config(tmp_path: Path) -> Config:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(
        f"state_store:\n  url: sqlite:///{tmp_path}/state.db\nlake:\n  base_path: {tmp_path}/lake\n"
        "sources:\n  pg:\n    engine: postgres\n    primary: {port: 1, database: d, user: u}\n"
        "    replica: {port: 2, database: d, user: u}\n    tables:\n      - name: public.items\n"
    )
    return load_config(path)


def _shape(rows: int) -> TableShape:
    columns = (
        SourceColumn("id", "int8", "bigint", False),
        SourceColumn("note", "text", "text", True),
    )
    return TableShape("public.items", columns, ("id",), rows, rows * 40)


class _Engine:
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def current_position(self) -> str:
        return "0/1"

    def table_shape(self, table: str, role: str) -> TableShape:
        return _shape(self.rows)

    def quote_identifier(self, name: str) -> str:
        return f'"{name}"'

    def quote_table(self, qualified: str) -> str:
        return ".".join(self.quote_identifier(part) for part in qualified.split("."))

    def jdbc_access(self, role: str) -> JdbcAccess:
        return JdbcAccess("jdbc:postgresql://127.0.0.1:2/d", {"user": "u"}, "SET TIME ZONE 'UTC'")


class _Frame:
    def first(self) -> dict[str, int]:
        return {"lo": 1, "hi": 10_000_000}


class _Reader:
    def __init__(self) -> None:
        self.reads: list[dict[str, Any]] = []

    def jdbc(self, url: str, table: str, **kwargs: Any) -> _Frame:
        self.reads.append({"table": table, **{k: v for k, v in kwargs.items() if k != "properties"}})
        return _Frame()


class _Context:
    defaultParallelism = 4


class _Spark:
    def __init__(self) -> None:
        self.read = _Reader()
        self.sparkContext = _Context()


def _reads(
    monkeypatch: pytest.MonkeyPatch, config: Config, rows: int, partitions: int = 8
) -> list[dict[str, Any]]:
    monkeypatch.setattr(validate, "engine_for", lambda source: _Engine(rows))
    monkeypatch.setattr(validate, "wait_replica_past", lambda *args: "replayed")
    monkeypatch.setattr(validate, "to_lake_types", lambda frame, reads, table, key: frame)
    spark = _Spark()
    validate.source_frame(spark, config, TABLE, ValidateOptions(partitions=partitions))  # type: ignore[arg-type]
    return spark.read.reads


def test_a_small_table_is_read_in_one_query_without_a_bounds_job(
    monkeypatch: pytest.MonkeyPatch, config: Config
) -> None:
    (read,) = _reads(monkeypatch, config, rows=20)
    assert read["table"].endswith("AS cdc_lake_validate")
    assert "numPartitions" not in read


def test_a_large_table_is_read_in_key_ranges_at_most_partitions(
    monkeypatch: pytest.MonkeyPatch, config: Config
) -> None:
    bounds, read = _reads(monkeypatch, config, rows=10_000_000)
    assert bounds["table"].endswith("AS cdc_lake_bounds")
    assert (read["column"], read["numPartitions"]) == ("id", 8)
    assert (read["lowerBound"], read["upperBound"]) == (1, 10_000_001)


def test_partitions_follow_the_size_between_one_and_the_option() -> None:
    assert read_partitions(_shape(0), 8, 4) == 1
    assert read_partitions(_shape(SINGLE_PARTITION_ROWS), 8, 4) == 1
    # Above it: at least one per executor slot, one per 250,000 rows, never more than --partitions.
    assert read_partitions(_shape(SINGLE_PARTITION_ROWS + 1), 8, 4) == 4
    assert read_partitions(_shape(1_500_000), 8, 2) == 6
    assert read_partitions(_shape(10_000_000), 8, 4) == 8
    assert read_partitions(_shape(10_000_000), 1, 4) == 1


def _key_reads(
    monkeypatch: pytest.MonkeyPatch,
    config: Config,
    keys: list[tuple[int, ...]],
    shape: TableShape | None = None,
) -> list[dict[str, Any]]:
    engine = _Engine(10_000_000)
    if shape is not None:
        monkeypatch.setattr(engine, "table_shape", lambda table, role: shape)
    monkeypatch.setattr(validate, "engine_for", lambda source: engine)
    monkeypatch.setattr(validate, "wait_replica_past", lambda *args: "replayed")
    monkeypatch.setattr(validate, "to_lake_types", lambda frame, reads, table, key: frame)
    spark = _Spark()
    validate.source_frame(spark, config, TABLE, ValidateOptions(), keys)  # type: ignore[arg-type]
    return spark.read.reads


def test_a_repair_of_integral_keys_reads_only_those_keys_in_one_query(
    monkeypatch: pytest.MonkeyPatch, config: Config
) -> None:
    # A repair of 100 keys in a 1M-row table read the whole table over 8 partitions (177 s); the
    # server's index finds the keys.
    (read,) = _key_reads(monkeypatch, config, [(5,), (17,), (3_000_000,)])
    assert 'WHERE 1 = 1 AND ("id") IN ((5), (17), (3000000))) AS cdc_lake_validate' in read["table"]
    assert "numPartitions" not in read
    (none,) = _key_reads(monkeypatch, config, [])
    assert "WHERE 1 = 1 AND 1 = 0)" in none["table"]


def test_a_key_value_that_is_not_an_integer_never_reaches_the_query(
    monkeypatch: pytest.MonkeyPatch, config: Config
) -> None:
    with pytest.raises(ValueError):
        _key_reads(monkeypatch, config, [("1); drop table items; --",)])  # type: ignore[list-item]


def test_a_key_with_a_column_that_is_not_integral_is_read_whole(
    monkeypatch: pytest.MonkeyPatch, config: Config
) -> None:
    columns = (SourceColumn("id", "int8", "bigint", False), SourceColumn("code", "text", "text", False))
    shape = TableShape("public.items", columns, ("id", "code"), 10_000_000, 10)
    bounds, read = _key_reads(monkeypatch, config, [(1, 2)], shape)
    assert bounds["table"].endswith("AS cdc_lake_bounds") and "IN (" not in read["table"]
