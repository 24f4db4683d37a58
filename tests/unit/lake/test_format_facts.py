"""The lake format's facts, read without Spark: what the code around the writers asks of Hudi."""

from __future__ import annotations

import sys

import pytest

from cdc_lake.exceptions import ConfigError
from cdc_lake.lake.format import DEFAULT_FORMAT, FORMATS, format_facts


def test_the_default_format_is_registered_and_its_facts_load_without_spark() -> None:
    loaded_before = "pyspark" in sys.modules
    facts = format_facts()

    assert facts.name == DEFAULT_FORMAT and DEFAULT_FORMAT in FORMATS
    assert facts.implementation.rpartition(".")[2] == "HudiFormat"
    assert ("pyspark" in sys.modules) is loaded_before


def test_an_unknown_format_is_one_line_naming_the_setting_and_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"^lake\.format: unknown format 'iceberg' \(known: hudi\)$"):
        format_facts("iceberg")


@pytest.mark.parametrize(
    ("instant", "seconds"),
    [
        ("20240101120000123", 1704110400.123),
        ("20240101120000", 1704110400.0),
        ("19700101000000000", 0.0),
        ("20240229235959999", 1709251199.999),
    ],
)
def test_a_hudi_instant_is_read_as_utc_epoch_seconds(instant: str, seconds: float) -> None:
    assert format_facts().commit_time(instant) == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize("text", ["", "2024", "latest", "2024010112000x123"])
def test_what_is_not_an_instant_has_no_time(text: str) -> None:
    assert format_facts().commit_time(text) is None


def test_hudi_declares_its_meta_columns_and_the_internal_ones_as_its_own() -> None:
    facts = format_facts()

    assert all(facts.is_meta_column(column) for column in facts.meta_columns)
    assert facts.is_meta_column("_hoodie_is_deleted")
    assert not facts.is_meta_column("_cdc_ordering") and not facts.is_meta_column("hoodie")
