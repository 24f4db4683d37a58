"""Passing ``hoodie.*`` options through: global and per table, with the correctness options protected."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cdc_lake.config import load_config
from cdc_lake.exceptions import ConfigError
from cdc_lake.hudi.format import hudi_spec
from cdc_lake.hudi.options import PROTECTED_OPTIONS, HudiTableSpec, write_options
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.layout import CompactionSpec, IndexType, TableType
from cdc_lake.lake.target import target_for

TUNABLE = {
    "hoodie.upsert.shuffle.parallelism",
    "hoodie.insert.shuffle.parallelism",
    "hoodie.delete.shuffle.parallelism",
    "hoodie.bulkinsert.shuffle.parallelism",
    "hoodie.parquet.compression.codec",
    "hoodie.parquet.bloom.filter.enabled",
}


def _config(tmp_path: Path, lake_options: str, table_options: str) -> Path:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(
        textwrap.dedent(f"""
        lake:
          format_options: {lake_options}
        sources:
          pg:
            engine: postgres
            primary: {{port: 15432, database: app, user: cdc}}
            tables:
              - name: public.orders
                format_options: {table_options}
              - name: public.customers
        """),
        encoding="utf-8",
    )
    return path


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


def test_options_reach_every_write_and_the_table_wins(tmp_path: Path) -> None:
    config = load_config(
        _config(
            tmp_path,
            '{"hoodie.metrics.on": "true", "hoodie.bloom.index.parallelism": 7}',
            '{"hoodie.bloom.index.parallelism": 9, "hoodie.upsert.shuffle.parallelism": 3}',
        )
    )
    source = config.source("pg")
    orders = hudi_spec(target_for(config, source, source.table("public.orders")).spec(("id",)))
    customers = hudi_spec(target_for(config, source, source.table("public.customers")).spec(("id",)))

    for operation in WriteOperation:
        written = write_options(orders, operation, {"offsets": "x"})
        assert written["hoodie.metrics.on"] == "true"
        assert written["hoodie.bloom.index.parallelism"] == "9"
        assert written["hoodie.upsert.shuffle.parallelism"] == "3"
        assert written["cdc_lake.offsets"] == "x"
    other = write_options(customers, WriteOperation.UPSERT)
    assert other["hoodie.bloom.index.parallelism"] == "7"
    assert other["hoodie.upsert.shuffle.parallelism"] == "4"


@pytest.mark.parametrize(
    "key", ["hoodie.datasource.write.precombine.field", "hoodie.index.type", "hoodie.write.table.version"]
)
def test_a_protected_option_is_refused_naming_key_and_setting(tmp_path: Path, key: str) -> None:
    table_error = _error(_config(tmp_path, "{}", f'{{"{key}": "x"}}'))
    assert "sources.pg.tables[0].format_options" in table_error
    assert f"'{key}' cannot be overridden" in table_error

    lake_error = _error(_config(tmp_path, f'{{"{key}": "x"}}', "{}"))
    assert "lake.format_options" in lake_error


def test_only_hoodie_keys_pass_through(tmp_path: Path) -> None:
    error = _error(_config(tmp_path, '{"spark.sql.shuffle.partitions": 4}', "{}"))
    assert "'spark.sql.shuffle.partitions' is not a Hudi option" in error


def test_the_spec_itself_refuses_a_protected_option() -> None:
    refused = r"table 't' format_options: 'hoodie\.table\.type' cannot be overridden"
    with pytest.raises(ConfigError, match=refused):
        HudiTableSpec("t", "/tmp/t", ("id",), "_o", extra_options=(("hoodie.table.type", "MERGE_ON_READ"),))


@pytest.mark.parametrize("index", list(IndexType))
@pytest.mark.parametrize("table_type", list(TableType))
def test_every_option_cdc_lake_sets_is_protected_or_tunable(index: IndexType, table_type: TableType) -> None:
    spec = HudiTableSpec(
        "t", "/tmp/t", ("id",), "_o", ("p",), table_type, index, CompactionSpec(inline=True)
    )
    for operation in WriteOperation:
        product = set(write_options(spec, operation))
        assert product - set(PROTECTED_OPTIONS) - TUNABLE == set(), (index, table_type, operation)


def test_ordering_is_not_a_table_setting(tmp_path: Path) -> None:
    path = _config(tmp_path, "{}", "{}")
    table = "- name: public.customers"
    text = path.read_text().replace(table, f"{table}\n        ordering: [id]")
    path.write_text(text)
    assert "sources.pg.tables[1].ordering: unknown key" in _error(path)
