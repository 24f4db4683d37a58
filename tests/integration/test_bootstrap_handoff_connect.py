"""The hand-off when it cannot be trusted: the bootstrap fails and publishes nothing.

The bootstrap runs with ``kafka_connect.url`` pointing at a closed port (the same state store and lake
as the config that onboarded the table), and ``bootstrap.handoff_timeout_seconds`` short.  The table
must stay BOOTSTRAPPING (neither CATCHING_UP nor LIVE), the error must say what to run next, and
``status --json`` must show the failed run.  Run again with Connect reachable, the bootstrap resumes at
the hand-off and the table ends LIVE and equal to the source.

The table's topic deleted and created again between the watermark and the hand-off: the watermark's
offsets are of the old topic, so the hand-off refuses, naming both topic ids and the way out, and
``cdc-lake rebootstrap`` makes a copy of the new topic that ends LIVE and equal to the source.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    postgres_db,
    state_of,
    wait_streamed,
    write_db_config,
)
from support.common import assert_one_line_failure, cli_run, load
from support.second_reader import second_reader_rows

from cdc_lake.config import Config
from cdc_lake.kafka.offsets import topic_state
from cdc_lake.lake.target import target_for
from cdc_lake.onboard.preflight import kafka_admin
from cdc_lake.onboard.topics import ensure_topics
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap import run

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ITEMS = """
create table public.items (id bigint primary key, val text);
insert into public.items select g, 'v' || g from generate_series(1, 30) g;
"""


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_handoff_with_connect_unreachable_fails_without_publishing_then_resumes(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(ITEMS)
    config_path = write_db_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("items")
    unreachable = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    unreachable["kafka_connect"] = {"url": f"http://127.0.0.1:{_closed_port()}"}
    unreachable["bootstrap"]["handoff_timeout_seconds"] = 3
    cut_off = tmp_path / "connect-unreachable.yaml"
    cut_off.write_text(yaml.safe_dump(unreachable, sort_keys=False), encoding="utf-8")
    config = load(config_path)

    failed = cli_run(cut_off, "bootstrap", table)

    assert failed.exit_code == 1, failed.output
    *logged, error = failed.stderr.rstrip("\n").split("\n")
    assert error.startswith(
        f"error: table {table}: not handed off, Debezium not seen past the snapshot point"
    )
    assert "Kafka Connect unreachable" in error
    assert error.endswith(f"run cdc-lake bootstrap {table} again (it resumes at the hand-off)")
    # The wait is logged, naming the table and the snapshot point.
    assert any(
        f"WARNING cdc_lake_bootstrap.handoff {table}: hand-off waits for Debezium past" in line
        for line in logged
    )
    assert state_of(config, table) is TableState.BOOTSTRAPPING
    status = json.loads(cli_run(config_path, "status", "--json").stdout)
    [row] = [r for r in status if r["name"] == table]
    assert row["state"] == "BOOTSTRAPPING"
    assert row["bootstrap"]["phase"] == "handing off"
    assert row["bootstrap"]["last_run"]["outcome"] == "failed"
    assert "not handed off" in row["bootstrap"]["last_run"]["error"]

    db.execute(
        "update public.items set val = 'after' where id <= 5", "delete from public.items where id = 30"
    )
    resumed = cli_run(config_path, "bootstrap", table, "--json")

    assert resumed.exit_code == 0, resumed.stderr
    assert json.loads(resumed.stdout)[0]["state"] == "CATCHING_UP"
    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "items") == 29
    source = sorted((r["id"], r["val"]) for r in db.rows("items", ("id",)))
    lake = sorted(
        (r["id"], r["val"]) for r in second_reader_rows(config.lake.table_base_path(table), ("id", "val"))
    )
    assert lake == source


def _create_again(config: Config, topic: str, old_id: str) -> str:
    """Delete ``topic`` and create it again (one partition, as onboarding does); returns its new id."""
    admin = kafka_admin(config)  # kept: a future outlives no client
    admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        ensure_topics(config, [topic], 1, 1)
        now = topic_state(config.kafka.bootstrap_servers, topic, extra=config.kafka.consumer).topic_id
        if now is not None and now != old_id:
            return now
        assert time.monotonic() < deadline, f"topic {topic} not created again"
        time.sleep(0.2)


def test_a_topic_created_again_between_the_watermark_and_the_hand_off_is_refused_then_rebootstrapped(
    spark: SparkSession, db: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34 review 7: the watermark's offsets are of the topic it measured.  Once a new topic under
    the name holds more messages than them, nothing else tells the two apart: before the topic id was
    stored the table was handed off and its first batch replayed the new topic from the old offsets."""
    db.execute(ITEMS.replace("items", "recreated"))
    config_path = write_db_config(tmp_path, db, [{"name": "recreated"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("recreated")
    config = load(config_path)
    source, entry = config.table(table)
    topic = target_for(config, source, entry).topic
    db.execute("update public.recreated set val = 'w' where id <= 3")
    wait_streamed(config, table)
    old_id = topic_state(config.kafka.bootstrap_servers, topic, extra=config.kafka.consumer).topic_id
    assert old_id is not None
    ids: list[str] = []
    handed_off = run.wait_until_streamed

    def created_again_first(*args: Any, **kwargs: Any) -> str:
        ids.append(_create_again(config, topic, old_id))
        db.execute("update public.recreated set val = 'n' where id between 10 and 19")  # past the old offsets
        return handed_off(*args, **kwargs)

    monkeypatch.setattr(run, "wait_until_streamed", created_again_first)
    refused = cli_run(config_path, "bootstrap", table)
    monkeypatch.undo()

    assert_one_line_failure(
        refused,
        f"table {table}: not handed off: topic {topic!r} was deleted and created again since the watermark "
        f"(topic id {old_id}, now {ids[0]})",
        f"the table stays BOOTSTRAPPING: run cdc-lake rebootstrap {table}",
    )
    assert state_of(config, table) is TableState.BOOTSTRAPPING

    rebootstrapped = cli_run(config_path, "rebootstrap", table)

    assert rebootstrapped.exit_code == 0, rebootstrapped.stderr or rebootstrapped.output
    with StateStore.open(config.state_store.url) as store:
        watermark = store.get_watermark(table)
        path = store.current_copy(table).path
    assert watermark is not None and watermark.topic_id == ids[0]
    assert state_of(config, table) is TableState.LIVE
    assert assert_lake_equals_source(spark, config, db, "recreated", base_path=path) == 30
