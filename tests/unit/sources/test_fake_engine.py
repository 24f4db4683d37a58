"""A new engine is its declaration: the made-up ``fakedb`` engine passes config, capture planning,
connector rendering, jar resolution, decode, ordering and re-send.

The engine (``tests/support/fake_engine.py``, its connector template ``tests/support/fake_connector.json``)
is registered for these tests by one line outside its fixture, the ``fake_engine`` fixture's
``monkeypatch.setitem(sources.ENGINES, ...)``: the one edit a real engine makes outside its package
is the same, its entry in ``cdc_lake/sources/__init__.py``'s ``ENGINES``.  Nothing else needs one:
its settings model and capture ids live with it, ``cdc_lake/engines.py`` reads the names from the
registry, ``cdc_lake/connect/render.py`` reads the template the engine declares and ``cdc_lake/jvm.py``
builds the jars it declares, and pyproject's package data (``sources/*/*.json``) takes a template in
an engine package.  What runs is production code: the config loader with the engine's own settings
model, the capture plan and the template rendering with its own ids, the JVM artifact sets, the
envelope decoder, the ordering value, the applier's decode path with its re-send skip and the marks a
commit stores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import fake_engine as fake
from support.debezium import key_schema, required, value
from support.fake_registry import InMemorySchemas
from support.wire import framed

from cdc_lake import jvm, sources
from cdc_lake.apply.decoding import (
    BatchSummary,
    DecodedChange,
    DecodeSettings,
    Redelivered,
    decode_messages,
    summarize,
)
from cdc_lake.apply.redelivery import advance
from cdc_lake.capture.plan import plan_source, render_config
from cdc_lake.config import load_config
from cdc_lake.connect.render import ConnectorParams, connector_class
from cdc_lake.decode.envelope import ChangeEvent, decode_message
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE
from cdc_lake.exceptions import ConfigError, DecodeError
from cdc_lake.kafka.reader import RawMessage

KEY_ID, VALUE_ID = 1, 2
KEY_SCHEMA = key_schema(fake.TOPIC, [required("id", "int")])
SCHEMAS = InMemorySchemas({KEY_ID: KEY_SCHEMA, VALUE_ID: fake.ENVELOPE})


@pytest.fixture(autouse=True)
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``fakedb`` in the engine registry for one test."""
    monkeypatch.setitem(sources.ENGINES, fake.NAME, fake.CAPABILITIES)
    yield


def _message(offset: int, seq: int, *, key: int = 1, op: str = "u", **source: Any) -> RawMessage:
    row = {"id": key, "qty": seq}
    record = value(op, None, row, fake.source(seq, **source))
    key_bytes = framed(KEY_ID, KEY_SCHEMA, {"id": key})
    return RawMessage(0, offset, key_bytes, framed(VALUE_ID, fake.ENVELOPE, record))


def _event(message: RawMessage) -> ChangeEvent:
    event = decode_message(SCHEMAS, fake.TOPIC, 0, message.offset, message.key, message.value)
    assert isinstance(event, ChangeEvent)
    return event


def test_the_registry_finds_the_engine_by_name_connector_and_mark_kind() -> None:
    assert sources.capabilities_for(fake.NAME) is fake.CAPABILITIES
    assert sources.capabilities_for_connector(fake.NAME) is fake.CAPABILITIES
    assert sources.codec_for_mark("fake") is fake.CAPABILITIES.positions


def _config_file(tmp_path: Path, primary: str) -> Path:
    path = tmp_path / "cdc-lake.yaml"
    source = f"  fk:\n    engine: {fake.NAME}\n    primary: {primary}\n    tables: [{{name: shop.items}}]\n"
    path.write_text("sources:\n" + source, encoding="utf-8")
    return path


def test_a_source_of_the_engine_loads_with_its_own_rules_only(tmp_path: Path) -> None:
    config = load_config(_config_file(tmp_path, "{port: 7000, user: u, database: shop}"))

    fk = config.source("fk")
    assert isinstance(fk, fake.FakeSource)
    assert (fk.engine, fk.topic_prefix, fk.table("shop.items").tier, fk.epoch_start) == (
        fake.NAME,
        "fk",
        1,
        1,
    )
    assert not hasattr(fk, "server_id") and not hasattr(fk, "slot_name"), "no other engine's settings"
    assert fk.capture_ids(["shop.items"]) == {
        None: fake.FakeCaptureIds("fk"),
        "shop.items": fake.FakeCaptureIds("fk.shop.items"),
    }


def test_its_connectors_carry_its_ids_and_render_from_its_own_template(tmp_path: Path) -> None:
    fk = load_config(_config_file(tmp_path, "{port: 7000, user: u, database: shop}")).source("fk")
    (plan,) = plan_source(fk, [fk.table("shop.items").model_copy(update={"tier": 0})])
    params = ConnectorParams(
        host="fake.internal",
        port=7000,
        user="u",
        password_env="FAKE_PW",
        topic_prefix="fk",
        tables=list(plan.capture.table_names),
        registry_url="http://registry",
        engine_values=plan.capture.ids.template_values(),
    )

    config = render_config(fake.NAME, plan, params)

    assert connector_class(fake.NAME) == config["connector.class"] == "example.fakedb.FakeDbConnector"
    assert config["fakedb.node"] == "fk.shop.items"
    assert config["database.password"] == "${env:FAKE_PW}"
    assert plan.capture.ids.describe() == "node fk.shop.items"
    assert plan.capture.ids.onboard_fields() == {
        "slot": None,
        "publication": None,
        "server_id": None,
        "node": "fk.shop.items",
    }


def test_its_jars_are_resolved_as_it_declares_them() -> None:
    plugin = jvm.debezium_plugin(fake.CAPABILITIES)

    assert jvm.jdbc_driver(fake.CAPABILITIES).coordinate == "example.fakedb:fakedb-jdbc:1.0:jar"
    assert plugin.name == "debezium-fakedb"
    assert [a.coordinate for a in plugin.artifacts] == [
        f"io.debezium:debezium-connector-fakedb:{jvm.DEBEZIUM_VERSION}:jar"
    ]
    assert plugin.artifacts[0].exclusions == jvm.DEBEZIUM_PLUGINS["postgres"].artifacts[0].exclusions


def test_the_engines_own_settings_are_read_and_refused_elsewhere(tmp_path: Path) -> None:
    path = _config_file(tmp_path, "{port: 7000, user: u, database: shop}")
    path.write_text(path.read_text(encoding="utf-8") + "    epoch_start: 4\n", encoding="utf-8")

    assert load_config(path).source("fk").epoch_start == 4  # type: ignore[attr-defined]
    assert sources.capabilities_for(fake.NAME).settings == {"epoch_start"}
    postgres = (
        "  pg:\n    engine: postgres\n    epoch_start: 4\n    primary: {port: 1, database: d, user: u}\n"
    )
    path.write_text(path.read_text(encoding="utf-8") + postgres, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert str(refused.value) == f"{path}: sources.pg: epoch_start applies only to fakedb sources"


def test_the_engines_own_source_rules_apply(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        load_config(_config_file(tmp_path, "{port: 7000, user: u}"))

    assert str(missing.value).endswith("sources.fk: primary.database (the cluster) is required for fakedb")


@pytest.mark.parametrize(
    ("setting", "primary", "expected"),
    [
        ("server_id: 5", "", "server_id applies only to mariadb/mysql sources"),
        ("slot_name: s", "", "slot_name applies only to postgres sources"),
        ("interval_handling: string", "", "interval_handling applies only to postgres sources"),
        ("", ", sslmode: require", "primary.sslmode applies only to postgres sources"),
        ("", ", ssl_ca: /ca.crt", "primary.ssl_ca applies only to mariadb/mysql sources"),
    ],
)
def test_settings_of_other_engines_are_refused_naming_them(
    tmp_path: Path, setting: str, primary: str, expected: str
) -> None:
    path = _config_file(tmp_path, f"{{port: 7000, user: u, database: shop{primary}}}")
    if setting:
        path.write_text(path.read_text(encoding="utf-8") + f"    {setting}\n", encoding="utf-8")

    with pytest.raises(ConfigError) as refused:
        load_config(path)

    assert str(refused.value) == f"{path}: sources.fk: {expected}"


def test_an_unregistered_engine_is_refused_with_the_known_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sources.ENGINES, fake.NAME)

    with pytest.raises(ConfigError) as refused:
        load_config(_config_file(tmp_path, "{port: 7000, user: u, database: shop}"))

    known = ", ".join(sorted(sources.ENGINES))
    expected = f"{tmp_path}/cdc-lake.yaml: sources.fk.engine: unknown source engine 'fakedb' ({known})"
    assert str(refused.value) == expected


def test_events_decode_into_the_engines_positions_and_ordering_values() -> None:
    event = _event(_message(7, 42, epoch=3))

    assert event.source.connector == fake.NAME and event.source.fields["node"] == "n1"
    assert event.position.parts == (3, 42)
    assert event.ordering_value == f"{3:010d}{42:030d}"
    snapshot = _event(_message(8, 43, snapshot="true"))
    read = _event(_message(9, 44, op="r"))
    assert snapshot.ordering_value == read.ordering_value == SNAPSHOT_ORDERING_VALUE


def test_a_later_epoch_orders_above_a_higher_sequence_of_an_earlier_one() -> None:
    positions = [(2, 1), (1, 9), (1, 10)]
    events = [_event(_message(i, seq, epoch=epoch)) for i, (epoch, seq) in enumerate(positions)]
    in_order = [events[1], events[2], events[0]]

    assert sorted(events, key=lambda e: e.position) == in_order
    assert sorted(e.ordering_value for e in events) == [e.ordering_value for e in in_order]


def test_a_codec_that_encodes_a_change_as_the_snapshot_value_is_refused() -> None:
    with pytest.raises(DecodeError, match=r"offset 3: FakePositionCodec encoded \(0, 0\) as '0+', not a"):
        _event(_message(3, 0, epoch=0))


def test_re_sent_events_are_skipped_below_the_engines_own_marks() -> None:
    settings = DecodeSettings(fake.TOPIC, SCHEMAS, None, False, {0: "fake:n1@5"})
    messages = [
        _message(20, 4),
        _message(21, 5),
        _message(22, 7, key=2),
        _message(23, 1, key=3, node="n2"),
    ]

    records = list(decode_messages(settings, messages))

    assert records[0] == Redelivered(0, 20), "below the mark: applied before"
    assert all(isinstance(r, DecodedChange) for r in records[1:]), "at the mark, above it, another node"
    summary = next(summarize(records), BatchSummary())
    assert advance({0: "fake:n1@5"}, summary.marks) == {0: "fake:n1@7;n2@1"}
    unreadable = {0: "fake:n1@x"}
    assert advance(unreadable, summary.marks) == {0: "fake:n1@7;n2@1"}, "a mark it cannot read is replaced"
