"""Connector plans per tier, their names, and the settings the plan adds to the rendered templates."""

from __future__ import annotations

import re

import pytest
from support.configs import postgres

from cdc_lake.capture.plan import name_slug, plan_source, render_config, table_topic
from cdc_lake.config import Connection, Source, Table
from cdc_lake.connect.render import ConnectorParams
from cdc_lake.exceptions import ConfigError
from cdc_lake.sources.mysql.settings import MySqlCaptureIds
from cdc_lake.sources.postgres.settings import PG_NAME_MAX, PostgresCaptureIds, tier0_pg_name


def mariadb(tables: list[Table], server_id: int = 5401) -> Source:
    primary = Connection(port=3306, user="cdc")
    return Source(name="maria", engine="mariadb", primary=primary, server_id=server_id, tables=tables)


def params(plan_tables: tuple[str, ...], **extra: object) -> ConnectorParams:
    return ConnectorParams(
        host="127.0.0.1",
        port=5432,
        user="cdc",
        password_env="CDC_LAKE_DB_PASSWORD",
        topic_prefix="pg",
        tables=list(plan_tables),
        registry_url="http://127.0.0.1:18081",
        **extra,  # type: ignore[arg-type]
    )


def test_tier0_tables_get_their_own_connector_slot_and_publication() -> None:
    source = postgres(
        [Table(name="shop.orders"), Table(name="shop.customers", tier=0), Table(name="shop.events", tier=2)]
    )

    tier0, shared = plan_source(source, source.tables)

    assert tier0.name == "cdc-lake.pg.tier0.shop.customers"
    assert tier0.capture.table_names == ("shop.customers",)
    assert tier0.capture.ids.slot == tier0_pg_name("cdc_lake_pg", "shop.customers")
    assert str(tier0.capture.ids.slot).startswith("cdc_lake_pg_t0_shop_customers_")
    assert tier0.capture.ids.publication == tier0.capture.ids.slot
    assert shared.name == "cdc-lake.pg"
    assert shared.capture.table_names == ("shop.events", "shop.orders")
    assert (shared.capture.ids.slot, shared.capture.ids.publication) == ("cdc_lake_pg", "cdc_lake_pg")


def test_a_source_with_only_tier0_tables_has_no_shared_connector() -> None:
    source = postgres([Table(name="shop.a", tier=0), Table(name="shop.b", tier=0)])

    assert [plan.name for plan in plan_source(source, source.tables)] == [
        "cdc-lake.pg.tier0.shop.a",
        "cdc-lake.pg.tier0.shop.b",
    ]


def test_planning_is_stable() -> None:
    source = postgres([Table(name="shop.b", tier=0), Table(name="shop.a", tier=0), Table(name="shop.c")])

    assert plan_source(source, source.tables) == plan_source(source, list(reversed(source.tables)))


def test_tier0_pg_names_fit_63_characters_and_stay_distinct() -> None:
    long_name = "s." + "t" * 80
    colliding = [tier0_pg_name("cdc_lake_pg", "a.b_c"), tier0_pg_name("cdc_lake_pg", "a_b.c")]
    cased = tier0_pg_name("cdc_lake_pg", 'Shop."Order Items"')

    assert len(tier0_pg_name("cdc_lake_pg", long_name)) == PG_NAME_MAX
    assert colliding[0] != colliding[1]
    assert re.fullmatch(r"[a-z0-9_]+", cased)


def test_name_slug_keeps_safe_names_and_hashes_replaced_characters() -> None:
    assert name_slug("shop.customers") == "shop.customers"
    assert re.fullmatch(r"shop\.order_items-[0-9a-f]{8}", name_slug("shop.order items"))
    assert name_slug("shop.order items") != name_slug("shop.order_items")


def test_topics_do_not_depend_on_the_tier() -> None:
    source = postgres([Table(name="shop.customers", tier=0)]).model_copy(update={"topic_prefix": "app1"})

    assert table_topic(source, Table(name="shop.customers", tier=0)) == "app1.shop.customers"
    assert table_topic(source, Table(name="shop.customers", tier=1)) == "app1.shop.customers"


def test_tier0_connectors_have_their_own_heartbeat_topic() -> None:
    source = postgres([Table(name="shop.customers", tier=0), Table(name="shop.orders")])
    tier0, shared = plan_source(source, source.tables)

    config = render_config(
        "postgres",
        tier0,
        params(
            tier0.capture.table_names,
            database="app",
            engine_values=tier0.capture.ids.template_values(),
            heartbeat_table="cdc_lake.heartbeat",
        ),
    )

    # Debezium writes heartbeats to <topic.heartbeat.prefix>.<topic.prefix>.
    assert f"{config['topic.heartbeat.prefix']}.{config['topic.prefix']}" == tier0.heartbeat_topic
    assert tier0.heartbeat_topic != shared.heartbeat_topic
    assert shared.heartbeat_topic == "__debezium-heartbeat.pg"
    assert config["custom.metric.tags"] == "connector=cdc-lake.pg.tier0.shop.customers"


def test_rendered_config_names_the_password_variable_never_the_password() -> None:
    source = postgres([Table(name="shop.orders")])
    (shared,) = plan_source(source, source.tables)

    config = render_config(
        "postgres",
        shared,
        params(
            shared.capture.table_names,
            database="app",
            engine_values=PostgresCaptureIds("cdc_lake_pg", "cdc_lake_pg").template_values(),
            heartbeat_table="cdc_lake.heartbeat",
        ),
    )

    assert config["database.password"] == "${env:CDC_LAKE_DB_PASSWORD}"
    assert "topic.heartbeat.prefix" not in config


def test_configured_keys_become_message_key_columns() -> None:
    source = postgres([Table(name="shop.events", key=["event_id", "at"]), Table(name="shop.orders")])
    (shared,) = plan_source(source, source.tables)

    config = render_config(
        "postgres",
        shared,
        params(
            shared.capture.table_names,
            database="app",
            engine_values=PostgresCaptureIds("s", "p").template_values(),
            heartbeat_table="cdc_lake.heartbeat",
        ),
    )

    assert config["message.key.columns"] == r"shop\.events:event_id,at"


def test_key_column_with_a_separator_is_refused() -> None:
    source = postgres([Table(name="shop.events", key=["a,b"])])
    (shared,) = plan_source(source, source.tables)

    with pytest.raises(ConfigError, match=r"key column 'a,b' of shop\.events"):
        render_config(
            "postgres",
            shared,
            params(
                shared.capture.table_names,
                database="app",
                engine_values=PostgresCaptureIds("s", "p").template_values(),
                heartbeat_table="cdc_lake.heartbeat",
            ),
        )


def test_binlog_connectors_get_distinct_stable_server_ids_and_a_short_keepalive() -> None:
    source = mariadb([Table(name="app.a", tier=0), Table(name="app.b", tier=0), Table(name="app.c")])
    plans = plan_source(source, source.tables)
    ids = [MySqlCaptureIds.of(plan.capture.ids).server_id for plan in plans]

    config = render_config(
        "mariadb",
        plans[-1],
        params(
            plans[-1].capture.table_names,
            engine_values=MySqlCaptureIds(5401).template_values(),
            kafka_bootstrap="k:9092",
        ),
    )

    assert ids[-1] == 5401
    assert len(set(ids)) == 3
    assert ids == [
        MySqlCaptureIds.of(plan.capture.ids).server_id for plan in plan_source(source, source.tables)
    ]
    assert int(config["connect.keep.alive.interval.ms"]) == int(config["heartbeat.interval.ms"]) // 2
    assert (plans[0].capture.ids.slot, plans[0].capture.ids.publication) == (None, None)
