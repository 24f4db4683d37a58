"""The applier's question to the source about added columns' defaults: a source that cannot answer
is an answer naming why, and the column it concerns stops the table (never evolves to NULLs)."""

from __future__ import annotations

import socket

from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc_lake.apply.source_defaults import SourceCatalog
from cdc_lake.config import Config
from cdc_lake.lake.schema_change import ChangeKind, WriterColumns, classify


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(allow_primary_reads: bool) -> Config:
    return Config.model_validate({
        "bootstrap": {"allow_primary_reads": allow_primary_reads},
        "sources": {
            "pg": {
                "engine": "postgres",
                "primary": {"host": "127.0.0.1", "port": _closed_port(), "database": "app", "user": "cdc"},
                "tables": [{"name": "public.items"}],
            }
        },
    })


def test_a_source_without_a_replica_to_read_is_not_asked_and_the_added_column_stops_the_table() -> None:
    answer = SourceCatalog(_config(False)).defaults("pg.public.items", ["u"])

    assert answer.error == "source pg has no replica to read, and bootstrap.allow_primary_reads is off"
    lake = StructType([StructField("id", LongType())])
    writer = WriterColumns(StructType([*lake.fields, StructField("u", StringType())]), frozenset())
    diff = classify(3, lake, writer, table="pg.public.items").with_source_defaults(answer)
    assert [(c.kind, c.column) for c in diff.breaking] == [(ChangeKind.ADDED_WITH_DEFAULT, "u")]
    assert "allow_primary_reads is off" in diff.summary()


def test_a_source_that_cannot_be_reached_answers_with_the_error_naming_it() -> None:
    answer = SourceCatalog(_config(True)).defaults("pg.public.items", ["u"])

    assert answer.defaults == {}
    assert answer.error is not None and answer.error.startswith("source pg: primary 127.0.0.1:"), answer.error


def test_a_table_outside_the_config_answers_with_the_error() -> None:
    answer = SourceCatalog(_config(True)).defaults("pg.public.other", ["u"])

    assert answer.error == "table pg.public.other is not in the config"
