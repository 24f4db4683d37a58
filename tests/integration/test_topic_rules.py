"""Topics the applier cannot order are refused, at onboarding and before every batch (issue 34 review 3, 4).

A compacted topic (``cleanup.policy=compact``) can lose a deleted row's delete event behind its tombstone,
which the applier ignores: the row would stay in the lake.  A topic with several partitions spreads the
changes of one configured key that is not the primary key over partitions (Debezium routes by the
primary key), and the applier orders them wrongly.  ``onboard`` refuses both for a topic that exists,
naming the table, topic and setting, and creates nothing; the applier refuses both before a batch (a
topic's config can change after onboarding): the table stops FAILED, its last commit kept, with one
line naming the way out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from pyspark.sql import SparkSession
from support.apply import SyntheticTopic, config_dict, lake_rows, record_catching_up
from support.bootstrap import SourceDb, postgres_db, write_db_config
from support.common import assert_one_line_failure, cli_run, load, write_and_load
from support.onboard import connectors_of

from cdc_lake.capture.plan import table_topic
from cdc_lake.cli.main import cli
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def admin(local_stack: LocalStack) -> AdminClient:
    return AdminClient({"bootstrap.servers": local_stack.kafka.address()})


def _create(
    admin: AdminClient, topic: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})
    admin.create_topics([new])[topic].result(timeout=30)


def _set_policy(admin: AdminClient, topic: str, policy: str) -> None:
    entry = ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


@pytest.fixture
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def test_onboard_refuses_a_compacted_topic_and_a_spread_key_by_name_and_creates_nothing(
    db: SourceDb, admin: AdminClient, tmp_path: Path
) -> None:
    db.execute(
        "create table public.compacted (id bigint primary key, val text)",
        "create table public.spread (id bigint primary key, code text not null unique, val text)",
        "alter table public.spread replica identity full",
    )
    tables: list[dict[str, Any]] = [{"name": "compacted"}, {"name": "spread", "key": ["code"]}]
    config_path = write_db_config(tmp_path, db, tables, str(tmp_path / "lake"))
    source = load(config_path).source(db.source)
    compacted, spread = (table_topic(source, source.table(db.schema_of(t))) for t in ("compacted", "spread"))
    _create(admin, compacted, config={"cleanup.policy": "compact,delete"})
    _create(admin, spread, partitions=3)

    result = cli_run(config_path, "onboard", db.source)

    assert_one_line_failure(
        result,
        f"table {db.qualified('compacted')}: topic {compacted!r} has cleanup.policy=compact,delete",
        f"--entity-name {compacted} --add-config cleanup.policy=delete",
        f"table {db.qualified('spread')}: topic {spread!r} has 3 partitions and the table is keyed on code",
        "by its primary key id",
        f"kafka-topics --delete --topic {spread}",
    )
    assert connectors_of(db.source) == []
    with StateStore.open(load(config_path).state_store.url) as store:
        assert store.list_tables() == []


def _apply(config_path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config_path), "apply", "--once", "--parallel", "2"])
    return result.exit_code, result.output


@pytest.mark.spark
def test_the_applier_stops_a_table_whose_topic_became_compacted_or_spreads_its_key(
    spark: SparkSession, local_stack: LocalStack, admin: AdminClient, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    compacted = SyntheticTopic(local_stack, f"compacted_{run}")
    spread = SyntheticTopic(local_stack, f"spread_{run}")
    _create(admin, compacted.topic)
    _create(admin, spread.topic, partitions=3)
    compacted.send([(compacted.key(k), compacted.change("c", k, f"v{k}")) for k in (1, 2)])
    spread.send([(spread.key(k), spread.change("c", k, f"n{k}")) for k in (1, 2)])
    state = f"sqlite:///{tmp_path}/state.db"
    data = config_dict(local_stack, [], str(tmp_path / "lake"), state, synthetic=[compacted, spread])
    data["sources"][spread.prefix]["tables"][0]["key"] = ["name"]
    config_path = tmp_path / "cdc-lake.yaml"
    config = write_and_load(config_path, data)
    record_catching_up(config)
    compacted_table, spread_table = f"compacted_{run}.s.t", f"spread_{run}.s.t"

    code, output = _apply(config_path)

    assert code == 1
    assert f"{spread_table}: table {spread_table}: topic {spread.topic!r} has 3 partitions" in output
    assert "keyed on name" in output and "by its primary key id" in output
    assert [r["id"] for r in lake_rows(spark, config.lake.table_base_path(compacted_table))] == [1, 2]

    _set_policy(admin, compacted.topic, "compact")
    compacted.send([(compacted.key(2), compacted.change("d", 2)), (compacted.key(2), None)])
    code, output = _apply(config_path)

    assert code == 1
    assert f"table {compacted_table}: topic {compacted.topic!r} has cleanup.policy=compact" in output
    assert f"cdc-lake rebootstrap {compacted_table}" in output
    with StateStore.open(config.state_store.url) as store:
        for table in (compacted_table, spread_table):
            info = store.require_table(table)
            assert info.state is TableState.FAILED and info.last_error is not None, table
            assert "\n" not in info.last_error
        assert store.get_applied_offsets(compacted_table) == {0: 2}, "the batch before the change is kept"
