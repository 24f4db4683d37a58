"""Postgres ``interval`` as text: the source setting, the connector it renders, the bootstrap's read and the
decoder's repair of Debezium's seconds (``docs/type-mapping.md``)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.types import StringType
from support import debezium as dbz

from cdc_lake.config import Source
from cdc_lake.connect.render import render_connector
from cdc_lake.decode.types import convert_row
from cdc_lake.exceptions import BootstrapError, DecodeError
from cdc_lake.sources import engine_for
from cdc_lake.sources.base import Capture, ConnectorEndpoints
from cdc_lake.sources.column_types import refusals
from cdc_lake.sources.postgres.settings import PostgresCaptureIds
from cdc_lake.sources.snapshot import SourceColumn, TableShape
from cdc_lake_bootstrap.lake_types import Conversion, column_reads

SHAPE = TableShape("s.t", (SourceColumn("iv", "interval", "interval", True),), (), 0, 0)


def _source(engine: str = "postgres", **settings: Any) -> Source:
    primary: dict[str, Any] = {"port": 1, "user": "u"}
    if engine == "postgres":
        primary["database"] = "d"
    else:
        settings["server_id"] = 7
    return Source.model_validate(
        {"name": "src", "engine": engine, "primary": primary, "tables": [{"name": "s.t"}], **settings}
    )


def _rendered(source: Source) -> dict[str, str]:
    capture = Capture("cdc-lake.src", tuple(source.tables), PostgresCaptureIds("slot", "pub"))
    endpoints = ConnectorEndpoints("PW", "http://registry", "k:9092")
    params = engine_for(source).connector_params(capture, endpoints)
    return render_connector(source.engine, "cdc-lake.src", params)


def test_the_connector_sends_intervals_as_the_source_chooses() -> None:
    assert _source().interval_handling == "numeric"
    assert _rendered(_source())["interval.handling.mode"] == "numeric"
    assert _rendered(_source(interval_handling="string"))["interval.handling.mode"] == "string"


def test_interval_handling_is_a_postgres_setting() -> None:
    with pytest.raises(ValueError, match="interval_handling applies only to postgres sources"):
        _source("mariadb", interval_handling="string")
    with pytest.raises(ValueError, match="interval_handling"):
        _source(interval_handling="iso")


def test_without_the_setting_an_interval_is_refused_naming_table_column_and_setting() -> None:
    [refused] = refusals("postgres", SHAPE, None, {})

    assert refused.message("src.s.t") == (
        "table src.s.t: column iv (interval) cannot be replicated exactly: Debezium's interval encoding "
        "(microseconds, a month counted as 30.4375 days, computed in floating point) does not round-trip; "
        "leave it out of the table's columns list, or set interval_handling: string on its source"
    )
    assert refusals("postgres", SHAPE, None, {}, interval_handling="string") == []


def test_with_the_setting_the_bootstrap_builds_debeziums_text_from_the_fields() -> None:
    [read] = column_reads("postgres", SHAPE, ["iv"], lambda name: f'"{name}"', interval_handling="string")

    assert (read.lake_type, read.conversion, read.per_element) == (StringType(), Conversion.CAST, False)
    # Every field, as Debezium writes them; the seconds without trailing zeros (checked on the stack).
    for field in ("year", "month", "day", "hour", "minute", "second"):
        assert f'extract({field} from "iv")' in read.select
    assert read.select.startswith("'P' || ")
    assert read.select.endswith(" || 'S'")


def test_a_column_types_choice_does_not_replace_the_setting_and_arrays_stay_refused() -> None:
    with pytest.raises(BootstrapError, match="column_types string applies only to numeric and bit"):
        column_reads("postgres", SHAPE, ["iv"], str, {"iv": "string"}, interval_handling="string")
    ivs = SourceColumn("ivs", "_interval", "interval[]", True, kind="array", element="interval")
    array = TableShape("s.t", (ivs,), (), 0, 0)
    with pytest.raises(BootstrapError, match=r"arrays of interval are not mapped"):
        column_reads("postgres", array, ["ivs"], str, interval_handling="string")


def _decoded(text: str) -> Any:
    field = dbz.optional("c", dbz.semantic("string", "io.debezium.time.Interval"))
    return convert_row({"c": text}, {"type": "record", "name": "Row", "fields": [field]})["c"]


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        # Measured with Debezium 3.5's Interval.toIsoString over pgjdbc's PGInterval: the seconds pass
        # through a double and are cut to 9 digits, so 1.003691 s arrives as 1.003690999.
        ("P0Y0M0DT0H0M1.003690999S", "P0Y0M0DT0H0M1.003691S"),
        ("P0Y0M0DT0H0M-1.005161999S", "P0Y0M0DT0H0M-1.005162S"),
        ("P1Y2M3DT4H5M6.78S", "P1Y2M3DT4H5M6.78S"),
        ("P-1Y-2M3DT-4H-5M-6.78S", "P-1Y-2M3DT-4H-5M-6.78S"),
        ("P0Y-10M-3DT4H5M6.78S", "P0Y-10M-3DT4H5M6.78S"),
        ("P0Y0M0DT0H0M-0.000001S", "P0Y0M0DT0H0M-0.000001S"),
        ("P0Y0M0DT0H0M0S", "P0Y0M0DT0H0M0S"),
        ("P0Y0M0DT0H0M-0.000000001S", "P0Y0M0DT0H0M0S"),
        ("P0Y0M0DT2147483647H59M59.999999S", "P0Y0M0DT2147483647H59M59.999999S"),
        ("P178956970Y7M-2147483648DT0H0M59.999998999S", "P178956970Y7M-2147483648DT0H0M59.999999S"),
    ],
)
def test_the_decoder_keeps_debeziums_text_with_the_seconds_exact_to_the_microsecond(
    sent: str, stored: str
) -> None:
    assert _decoded(sent) == stored


@pytest.mark.parametrize("sent", ["PT0S", "P1Y2M3DT4H5M6.78", "P0Y0M0DT0H0M1.0000005S", "1 day"])
def test_the_decoder_refuses_other_interval_text_naming_the_field(sent: str) -> None:
    with pytest.raises(DecodeError, match="field 'c'"):
        _decoded(sent)
