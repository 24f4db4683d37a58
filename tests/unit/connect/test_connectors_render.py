"""Rendering of the Debezium connector templates and redaction of connector dumps."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from cdc_lake import jvm
from cdc_lake.config import Source
from cdc_lake.connect import render
from cdc_lake.connect.render import (
    ConnectorParams,
    ConverterSettings,
    heartbeat_table_ddl,
    registry_api_url,
    render_connector,
)
from cdc_lake.engines import ENGINE_NAMES
from cdc_lake.exceptions import ConfigError
from cdc_lake.redaction import MASK, mask_mapping
from cdc_lake.sources import engine_for
from cdc_lake.sources.base import Capture, ConnectorEndpoints
from cdc_lake.sources.mysql.settings import MySqlCaptureIds
from cdc_lake.sources.postgres.settings import PostgresCaptureIds

REGISTRY = "http://127.0.0.1:18081"

PG = ConnectorParams(
    host="pg.internal",
    port=5432,
    user="cdc",
    password_env="PG_PASSWORD",
    topic_prefix="pg1",
    tables=["public.orders", "public.order-items"],
    registry_url=REGISTRY,
    database="shop",
    heartbeat_table="cdc_lake.heartbeat",
    engine_values=PostgresCaptureIds("cdc_pg1", "cdc_pg1_pub").template_values(),
)

BINLOG = ConnectorParams(
    host="mysql.internal",
    port=3306,
    user="cdc",
    password_env="MYSQL_PASSWORD",
    topic_prefix="my1",
    tables=["shop.orders", "shop.items", "crm.users"],
    registry_url=REGISTRY,
    kafka_bootstrap="127.0.0.1:19092",
    engine_values=MySqlCaptureIds(5401).template_values(),
)

CONNECTOR_CLASSES = {
    "postgres": "io.debezium.connector.postgresql.PostgresConnector",
    "mysql": "io.debezium.connector.mysql.MySqlConnector",
    "mariadb": "io.debezium.connector.mariadb.MariaDbConnector",
}


def _params(engine: str) -> ConnectorParams:
    return PG if engine == "postgres" else BINLOG


@pytest.fixture(params=["2.6.13.Final", "3.0.9"])
def apicurio_line(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Render against each Apicurio converter line the templates support."""
    monkeypatch.setattr(jvm, "APICURIO_VERSION", request.param)
    return str(request.param)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_every_template_renders_with_common_settings(engine: str) -> None:
    config = render_connector(engine, f"{engine}-conn", _params(engine))

    assert config["connector.class"] == CONNECTOR_CLASSES[engine]
    assert config["tasks.max"] == "1"
    assert config["snapshot.mode"] == "no_data"
    assert config["decimal.handling.mode"] == "precise"
    # A value Debezium cannot encode (numeric NaN) stops the task naming the column, never a silent NULL.
    assert config["event.converting.failure.handling.mode"] == "fail"
    assert config["time.precision.mode"] == "adaptive_time_microseconds"
    assert config["tombstones.on.delete"] == "true"
    # A TRUNCATE reaches the table's topic (Debezium skips truncates by default) and stops the table.
    assert config["skipped.operations"] == "none"
    assert config["heartbeat.interval.ms"] == "2000"
    # The task waits this long between looks at an empty queue (Debezium's default 500 ms): every change
    # and every committed offset waits for it (docs/benchmarks.md, "Debezium's poll interval").
    assert config["poll.interval.ms"] == "100"
    assert config["topic.prefix"] == _params(engine).topic_prefix
    assert config["database.hostname"] == _params(engine).host
    assert config["database.port"] == str(_params(engine).port)
    assert not any("{{" in value or "}}" in value for value in config.values())
    assert all(isinstance(value, str) for value in config.values())


def test_binlog_templates_ask_for_server_heartbeats_at_half_the_heartbeat_interval() -> None:
    for engine in ("mysql", "mariadb"):
        slow = replace(BINLOG, heartbeat_interval_ms=10_000)
        assert render_connector(engine, "c1", slow)["connect.keep.alive.interval.ms"] == "5000"
        fast = replace(BINLOG, heartbeat_interval_ms=1500)
        assert render_connector(engine, "c1", fast)["connect.keep.alive.interval.ms"] == "1000"
    assert "connect.keep.alive.interval.ms" not in render_connector("postgres", "c1", PG)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_a_sources_heartbeat_interval_reaches_its_connectors(engine: str) -> None:
    primary: dict[str, object] = {"port": 1, "user": "u", "database": "d"}
    extra = {} if engine == "postgres" else {"server_id": 7}
    if engine != "postgres":
        del primary["database"]
    source = Source.model_validate(
        {"name": "src", "engine": engine, "primary": primary, "tables": [{"name": "s.t"}], **extra}
    )
    ids = PostgresCaptureIds("s", "p") if engine == "postgres" else MySqlCaptureIds(7)
    capture = Capture("cdc-lake.src", tuple(source.tables), ids)
    endpoints = ConnectorEndpoints("PW", "http://registry", "k:9092")

    def rendered(seconds: float | None) -> dict[str, str]:
        update = {} if seconds is None else {"heartbeat_interval_seconds": seconds}
        params = engine_for(source.model_copy(update=update)).connector_params(capture, endpoints)
        return render_connector(engine, "cdc-lake.src", params)

    assert rendered(None)["heartbeat.interval.ms"] == "2000"
    assert rendered(0.5)["heartbeat.interval.ms"] == "500"
    assert rendered(30)["heartbeat.interval.ms"] == "30000"
    with pytest.raises(ValueError, match="heartbeat_interval_seconds"):
        Source.model_validate({**source.model_dump(exclude_unset=True), "heartbeat_interval_seconds": 0})


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_password_is_an_env_placeholder_resolved_on_the_worker(engine: str) -> None:
    config = render_connector(engine, "c1", _params(engine))

    assert config["database.password"] == f"${{env:{_params(engine).password_env}}}"


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_converters_write_confluent_framing_with_content_ids(engine: str, apicurio_line: str) -> None:
    config = render_connector(engine, "c1", _params(engine))
    expected_api = "/apis/registry/v2" if apicurio_line.startswith("2.") else "/apis/registry/v3"
    expected_handler = (
        "io.apicurio.registry.serde.Legacy4ByteIdHandler"
        if apicurio_line.startswith("2.")
        else "io.apicurio.registry.serde.Default4ByteIdHandler"
    )

    for side in ("key", "value"):
        prefix = f"{side}.converter"
        assert config[prefix] == "io.apicurio.registry.utils.converter.AvroConverter"
        assert config[f"{prefix}.apicurio.registry.url"] == REGISTRY + expected_api
        assert config[f"{prefix}.apicurio.registry.headers.enabled"] == "false"
        assert config[f"{prefix}.apicurio.registry.id-handler"] == expected_handler
        assert config[f"{prefix}.apicurio.registry.use-id"] == "contentId"
        assert config[f"{prefix}.apicurio.registry.auto-register"] == "true"


def test_unknown_apicurio_line_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jvm, "APICURIO_VERSION", "9.0.0")

    with pytest.raises(ConfigError, match=r"9\.0\.0"):
        render_connector("postgres", "c1", PG)


def test_registry_api_url_ignores_a_trailing_slash(apicurio_line: str) -> None:
    assert registry_api_url(REGISTRY + "/").startswith(REGISTRY + "/apis/registry/v")


def test_templates_share_one_converter_block() -> None:
    blocks = []
    for engine in ENGINE_NAMES:
        template = render._template(engine)
        blocks.append(
            {k: v for k, v in template.items() if k.startswith(("key.converter", "value.converter"))}
        )
    assert blocks[0] and all(block == blocks[0] for block in blocks)


def test_postgres_specific_settings() -> None:
    config = render_connector("postgres", "pg1", PG)

    assert config["plugin.name"] == "pgoutput"
    assert config["slot.name"] == "cdc_pg1"
    assert config["publication.name"] == "cdc_pg1_pub"
    assert config["publication.autocreate.mode"] == "disabled"
    assert config["database.dbname"] == "shop"
    assert config["table.include.list"] == r"public\.orders,public\.order\-items"
    assert config["heartbeat.action.query"] == (
        """INSERT INTO "cdc_lake"."heartbeat" (connector, ts) VALUES ('pg1', now()) """
        "ON CONFLICT (connector) DO UPDATE SET ts = EXCLUDED.ts"
    )


def test_table_include_list_matches_exactly_the_named_tables() -> None:
    patterns = render_connector("postgres", "pg1", PG)["table.include.list"].split(",")

    def captured(name: str) -> bool:
        return any(re.fullmatch(p, name) for p in patterns)

    assert captured("public.orders")
    assert captured("public.order-items")
    assert not captured("publicXorders")
    assert not captured("public.orders_archive")


@pytest.mark.parametrize("engine", ["mysql", "mariadb"])
def test_binlog_specific_settings(engine: str) -> None:
    config = render_connector(engine, "my1", BINLOG)

    assert config["database.server.id"] == "5401"
    assert config["database.include.list"] == "shop,crm"
    assert config["table.include.list"] == r"shop\.orders,shop\.items,crm\.users"
    assert config["schema.history.internal.kafka.topic"] == "my1.schema-history"
    assert config["schema.history.internal.kafka.bootstrap.servers"] == "127.0.0.1:19092"
    assert config["include.schema.changes"] == "false"
    assert config["bigint.unsigned.handling.mode"] == "precise"
    assert "slot.name" not in config


@pytest.mark.parametrize(
    ("engine", "char_types", "other_types"),
    [
        ("postgres", ["VARCHAR", "BPCHAR", "varchar"], ["TEXT", "INT4", "NUMERIC", "_VARCHAR", "mood"]),
        ("mysql", ["VARCHAR", "CHAR"], ["TEXT", "TINYTEXT", "ENUM", "VARBINARY", "DECIMAL"]),
        ("mariadb", ["VARCHAR", "CHAR"], ["TEXT", "TINYTEXT", "ENUM", "VARBINARY", "DECIMAL"]),
    ],
)
def test_only_character_columns_carry_their_source_type_and_length(
    engine: str, char_types: list[str], other_types: list[str]
) -> None:
    """Issue 21: the length in the writer schema is how the applier sees a varchar narrowed; Debezium
    matches each regex case-insensitively against ``<table id>.<type name>`` (ColumnMappers)."""
    patterns = render_connector(engine, "c1", _params(engine))["datatype.propagate.source.type"].split(",")

    def propagated(type_name: str) -> bool:
        return any(re.fullmatch(p, f"shop.public.orders.{type_name}", re.IGNORECASE) for p in patterns)

    assert all(propagated(t) for t in char_types)
    assert not any(propagated(t) for t in other_types)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_column_include_list_only_when_columns_are_frozen(engine: str) -> None:
    assert "column.include.list" not in render_connector(engine, "c1", _params(engine))


def test_frozen_columns_listed_and_other_tables_kept_whole() -> None:
    params = replace(PG, columns={"public.orders": ["id", "total"]})

    config = render_connector("postgres", "pg1", params)

    assert config["column.include.list"] == (
        r"public\.orders\.id,public\.orders\.total,public\.order\-items\..+"
    )


@pytest.mark.parametrize(
    ("engine", "params", "placeholder", "param"),
    [
        (
            "postgres",
            replace(PG, engine_values=PostgresCaptureIds(None, "p").template_values()),
            "slot_name",
            "slot_name",
        ),
        ("postgres", replace(PG, database=None), "database", "database"),
        ("postgres", replace(PG, heartbeat_table=None), "heartbeat_action_query", "heartbeat_table"),
        (
            "mysql",
            replace(BINLOG, engine_values=MySqlCaptureIds().template_values()),
            "server_id",
            "server_id",
        ),
        ("mariadb", replace(BINLOG, kafka_bootstrap=None), "kafka_bootstrap", "kafka_bootstrap"),
    ],
)
def test_missing_engine_parameter_names_the_placeholder(
    engine: str, params: ConnectorParams, placeholder: str, param: str
) -> None:
    with pytest.raises(ConfigError) as err:
        render_connector(engine, "c1", params)

    assert f"{{{{{placeholder}}}}}" in str(err.value)
    assert f"set {param}" in str(err.value)


def test_unknown_template_placeholder_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "_template", lambda engine: {"x.y": "a-{{ no_such_value }}"})

    with pytest.raises(ConfigError, match=r"\{\{no_such_value\}\}"):
        render_connector("postgres", "c1", PG)


def test_env_placeholder_syntax_passes_through_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        render, "_template", lambda engine: {"a": "${file:/etc/x:{{user}}}", "b": "{literal}"}
    )

    assert render_connector("postgres", "c1", PG) == {"a": "${file:/etc/x:cdc}", "b": "{literal}"}


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"password_env": "${PG_PASSWORD}"}, "password_env"),
        ({"port": 0}, "port"),
        ({"tables": []}, "tables"),
        ({"tables": ["orders"]}, "'orders'"),
        ({"tables": ["a.b.c"]}, "'a.b.c'"),
        ({"topic_prefix": "pg 1"}, "topic_prefix"),
        ({"registry_url": "127.0.0.1:18081"}, "registry_url"),
        ({"columns": {"public.missing": ["id"]}}, "public.missing"),
        ({"columns": {"public.orders": []}}, "public.orders"),
        ({"heartbeat_interval_ms": 0}, "heartbeat_interval_ms"),
    ],
)
def test_bad_parameters_are_refused_by_name(change: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        render_connector("postgres", "pg1", replace(PG, **change))  # type: ignore[arg-type]

    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("server_id", [0, 2**32])
def test_a_server_id_out_of_range_is_refused_by_name(server_id: int) -> None:
    with pytest.raises(ConfigError, match=rf"^server_id {server_id} is out of range$"):
        MySqlCaptureIds(server_id).template_values()


def test_engine_values_cannot_replace_shared_ones() -> None:
    with pytest.raises(ConfigError, match=r"engine values replace shared ones: host$"):
        render_connector("postgres", "pg1", replace(PG, engine_values={**PG.engine_values, "host": "x"}))


def test_unknown_engine_and_bad_connector_name_are_refused() -> None:
    with pytest.raises(ConfigError, match="oracle"):
        render_connector("oracle", "c1", PG)
    with pytest.raises(ConfigError, match="connector name"):
        render_connector("postgres", "c/1", PG)


def test_heartbeat_ddl_quotes_identifiers() -> None:
    assert heartbeat_table_ddl('ops."hb"') == (
        'CREATE TABLE IF NOT EXISTS "ops"."""hb""" (connector text PRIMARY KEY, ts timestamptz NOT NULL)'
    )


def test_rendered_config_redacts_to_no_secret() -> None:
    redacted = mask_mapping(render_connector("postgres", "pg1", PG))

    assert redacted["database.password"] == MASK
    assert "PG_PASSWORD" not in json.dumps(redacted)


def test_database_tls_settings_are_rendered_and_cannot_replace_template_keys() -> None:
    tls = {"database.sslmode": "verify-full", "database.sslrootcert": "/etc/ssl/pg-ca.crt"}
    config = render_connector("postgres", "c1", replace(PG, database_settings=tls))
    assert {key: config[key] for key in tls} == tls

    with pytest.raises(ConfigError, match=r"'database\.hostname' is not an extra database"):
        render_connector("postgres", "c1", replace(PG, database_settings={"database.hostname": "elsewhere"}))


CONFLUENT_API = "https://registry.internal:8081"


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_confluent_converter_replaces_the_apicurio_block(engine: str) -> None:
    converter = ConverterSettings(kind="confluent", confluent_url=CONFLUENT_API)
    config = render_connector(engine, "c1", replace(_params(engine), converter=converter))

    assert not [key for key in config if "apicurio" in key]
    for side in ("key", "value"):
        # Confluent's documented keys (docs.confluent.io: "Using Kafka Connect with Schema Registry").
        assert config[f"{side}.converter"] == "io.confluent.connect.avro.AvroConverter"
        assert config[f"{side}.converter.schema.registry.url"] == CONFLUENT_API
        assert f"{side}.converter.basic.auth.credentials.source" not in config


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (
            "user_info",
            {"basic.auth.credentials.source": "USER_INFO", "basic.auth.user.info": "${env:SR_AUTH}"},
        ),
        ("bearer", {"bearer.auth.credentials.source": "STATIC_TOKEN", "bearer.auth.token": "${env:SR_AUTH}"}),
    ],
)
def test_confluent_converter_credentials_come_from_the_worker_environment(
    kind: str, expected: dict[str, str]
) -> None:
    converter = ConverterSettings(
        "confluent", CONFLUENT_API, credentials_env="SR_AUTH", credentials_kind=kind
    )
    config = render_connector("postgres", "c1", replace(PG, converter=converter))

    for side in ("key", "value"):
        assert {k: v for k, v in config.items() if k.startswith(f"{side}.converter.") and "auth" in k} == {
            f"{side}.converter.{key}": value for key, value in expected.items()
        }
    assert all(
        value == MASK for key, value in mask_mapping(config).items() if key.endswith(("user.info", "token"))
    )


def test_registry_credentials_with_the_apicurio_converter_are_refused() -> None:
    converter = ConverterSettings("apicurio", credentials_env="SR_AUTH")
    with pytest.raises(ConfigError, match=r"need schema_registry\.converter: confluent"):
        render_connector("postgres", "c1", replace(PG, converter=converter))


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_schema_history_clients_get_the_connector_client_settings(engine: str) -> None:
    clients = {"security.protocol": "SASL_SSL", "sasl.jaas.config": 'x password="${env:KAFKA_PW}";'}
    config = render_connector(engine, "c1", replace(_params(engine), schema_history_clients=clients))

    rendered = {k: v for k, v in config.items() if k.startswith("schema.history.internal.")}
    if engine == "postgres":
        assert rendered == {}  # no schema history: the connector has no Kafka client of its own
        return
    for side in ("producer", "consumer"):
        for key, value in clients.items():
            assert rendered[f"schema.history.internal.{side}.{key}"] == value
