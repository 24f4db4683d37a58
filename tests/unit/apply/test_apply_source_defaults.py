"""The applier's question to the source about added columns' defaults: a source that cannot answer
is an answer naming why, and the column it concerns stops the table (never evolves to NULLs)."""

from __future__ import annotations

import socket

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc_lake.apply.source_defaults import SourceCatalog
from cdc_lake.apply.table_applier import ApplierOptions
from cdc_lake.config import Config, Connection, Source
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.lake.schema_change import ChangeKind, WriterColumns, classify
from cdc_lake.sources import engine_for


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


def test_a_source_without_a_replica_is_asked_on_its_primary_and_an_unreachable_one_stops_the_column() -> None:
    """One catalog query, not a bulk read: a source without a replica is asked on its primary whatever
    ``bootstrap.allow_primary_reads`` says (it guards the bootstrap's reads).  That primary being
    unreachable here, the added column stops the table naming why (it never evolves to NULLs)."""
    answer = SourceCatalog(_config(False)).defaults("pg.public.items", ["u"])

    assert answer.error is not None and answer.error.startswith("source pg: primary 127.0.0.1:"), answer.error
    lake = StructType([StructField("id", LongType())])
    writer = WriterColumns(StructType([*lake.fields, StructField("u", StringType())]), frozenset())
    diff = classify(3, lake, writer, table="pg.public.items").with_source_defaults(answer)
    assert [(c.kind, c.column) for c in diff.breaking] == [(ChangeKind.ADDED_WITH_DEFAULT, "u")]
    assert "its default at the source is unknown (source pg: primary 127.0.0.1:" in diff.summary()


def test_a_source_that_cannot_be_reached_answers_with_the_error_naming_it() -> None:
    answer = SourceCatalog(_config(True)).defaults("pg.public.items", ["u"])

    assert answer.defaults == {}
    assert answer.error is not None and answer.error.startswith("source pg: primary 127.0.0.1:"), answer.error


def test_a_table_outside_the_config_answers_with_the_error() -> None:
    answer = SourceCatalog(_config(True)).defaults("pg.public.other", ["u"])

    assert answer.error == "table pg.public.other is not in the config"


def test_only_a_mysql_replica_computes_a_non_deterministic_default_of_its_own() -> None:
    """A MySQL/MariaDB DDL replicates as a statement: the replica runs ``uuid()`` itself (``now()`` takes
    the statement's logged time); a Postgres streaming replica replays the primary's rows."""
    primary = Connection(port=3306, user="cdc", password="x")
    mysql = engine_for(Source(name="m", engine="mariadb", server_id=9, primary=primary))
    pg_primary = Connection(port=5432, database="d", user="u")
    postgres = engine_for(Source(name="p", engine="postgres", primary=pg_primary))

    functions = ("uuid()", "UUID_SHORT()", "concat('k-', rand())", "sysdate()")
    assert all(mysql.replica_evaluates(d) for d in functions)
    assert not [d for d in ("current_timestamp()", "now()", "'eu'", "0") if mysql.replica_evaluates(d)]
    assert not postgres.replica_evaluates("gen_random_uuid()")


def test_an_applier_cannot_be_configured_without_a_source_catalog() -> None:
    """No applier options without the question: one that could not ask would evolve an added column
    with NULLs where the source holds its default (the old optional field was such a bypass)."""
    with pytest.raises(TypeError, match="source_defaults"):
        ApplierOptions(KafkaReadSettings("127.0.0.1:1"), max_events=10)  # type: ignore[call-arg]
