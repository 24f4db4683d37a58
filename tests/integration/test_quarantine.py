"""A bad message quarantined by the operator: copied with its offset, recorded, and the table goes on.

On a synthetic topic: the table stops at an undecodable message (FAILED, offset 3); ``cdc-lake
quarantine`` copies it into the state store's quarantine with its topic, partition, offset and reason and
marks the table possibly diverged; meanwhile new changes arrive, and the next ``apply --once`` applies
them all, skipping only the quarantined offset, which the Hudi commit lists in its metadata.  A clean
validate clears the mark.

On both engines (Postgres and MariaDB), with a writer changing the source table throughout: a truncated
copy of one of its Debezium messages is put on the table's own topic; the table stops FAILED at that
offset, is quarantined under the documented procedure, and keeps applying: LIVE again and equal to the
source (Spark+Hudi and hudi-rs), the message in the quarantine with its offset and bytes.

The way out after a fix: a message quarantined because it had no key (and the table no ``key``
setting); a later change of its key and a change of another key are applied; the operator sets
``key: [id]`` and runs ``quarantine --replay``: one Hudi commit at the message's original
ordering value, so the later change it missed keeps winning, and the quarantine row records the replay.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from pyspark.sql import SparkSession
from support.apply import SyntheticTopic, config_dict, lake_rows, record_catching_up, synthetic_config
from support.bootstrap import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    mariadb_db,
    onboard,
    postgres_db,
    wait_for_schema,
    write_db_config,
)
from support.common import cli_run, load, write_and_load
from support.second_reader import second_reader_rows

from cdc_lake.cli.main import cli
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.lake.commit_metadata import QUARANTINED_KEY
from cdc_lake.lake.target import target_for
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ROWS = 200
CREATE = {
    "postgres": (
        'create table public."orders" (id bigint primary key, grp int not null, val text, '
        "amount numeric(12, 2), updated timestamptz(6), flag boolean)",
        'insert into public."orders" select g, g % 10, \'v\' || g, g / 7.0, '
        "timestamp '2024-01-01' + g * interval '1 second', g % 2 = 0 from generate_series(1, {rows}) g",
    ),
    "mariadb": (
        "create table `orders` (id bigint primary key, grp int not null, val varchar(200), "
        "amount decimal(12, 2), updated timestamp(6) null, flag boolean)",
        "insert into `orders` select seq, seq % 10, concat('v', seq), seq / 7, "
        "timestamp'2024-01-01 00:00:00' + interval seq second, seq % 2 = 0 from seq_1_to_{rows}",
    ),
}
TOUCH = {
    "postgres": 'update public."orders" set "amount" = "amount" + 1 where "id" <= 5',
    "mariadb": "update `orders` set `amount` = `amount` + 1 where `id` <= 5",
}


@pytest.fixture(scope="module", params=["postgres", "mariadb"])
def db(request: pytest.FixtureRequest, local_stack: LocalStack) -> Iterator[SourceDb]:
    make = postgres_db if request.param == "postgres" else mariadb_db
    with make(local_stack) as created:
        yield created


def test_a_quarantined_message_is_kept_with_its_offset_and_the_table_keeps_applying(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    topic = SyntheticTopic(local_stack, f"quar_{run}")
    bad_value = topic.change("c", 9)[:-3]
    topic.send(
        [(topic.key(k), topic.change("c", k, f"v{k}")) for k in (1, 2, 3)]
        + [(topic.key(9), bad_value), (topic.key(4), topic.change("c", 4, "after"))]
    )
    config_path, config = synthetic_config(local_stack, tmp_path, [topic])
    table = f"quar_{run}.s.t"
    base = ["--config", str(config_path)]
    runner = CliRunner()

    first = runner.invoke(cli, [*base, "apply", "--once"])
    assert first.exit_code == 1 and "offset 3" in first.output
    with StateStore.open(config.state_store.url) as store:
        assert store.require_table(table).state is TableState.FAILED

    chosen = runner.invoke(
        cli,
        [*base, "quarantine", table, "--partition", "0", "--offset", "3", "--reason", "truncated by a bug"],
    )
    assert chosen.exit_code == 0, chosen.output
    assert "possibly diverged" in chosen.output
    refused = runner.invoke(
        cli, [*base, "quarantine", table, "--partition", "0", "--offset", "1", "--reason", "applied already"]
    )
    assert refused.exit_code == 1 and "already applied" in refused.output
    topic.send(
        [(topic.key(k), topic.change("c", k, f"v{k}")) for k in (5, 6)]
        + [(topic.key(1), topic.change("u", 1, "one"))]
    )

    second = runner.invoke(cli, [*base, "apply", "--once"])

    assert second.exit_code == 0, second.output
    rows = lake_rows(spark, config.lake.table_base_path(table))
    expected = [(1, "one"), (2, "v2"), (3, "v3"), (4, "after"), (5, "v5"), (6, "v6")]
    assert [(r["id"], r["name"]) for r in rows] == expected
    second_reader = second_reader_rows(config.lake.table_base_path(table), ["id", "name"])
    assert sorted((r["id"], r["name"]) for r in second_reader) == expected, "hudi-rs"
    commit = latest_commit(spark, config.lake.table_base_path(table))
    assert commit is not None and json.loads(commit.metadata[QUARANTINED_KEY]) == {"0": [3]}
    with StateStore.open(config.state_store.url) as store:
        info = store.require_table(table)
        assert info.state is TableState.LIVE
        assert info.possibly_diverged is not None and "offset 3" in info.possibly_diverged
        (kept,) = store.quarantined(table)
        assert (kept.topic, kept.partition, kept.offset) == (topic.topic, 0, 3)
        assert kept.value == bad_value and kept.key == topic.key(9) and kept.reason == "truncated by a bug"
        assert any(r.command == "quarantine" and r.detail["offset"] == 3 for r in store.list_runs(table))
        assert store.clear_possibly_diverged(table).possibly_diverged is None
    status = runner.invoke(cli, [*base, "status", "--json"])
    assert json.loads(status.output)[0]["possibly_diverged"] is None


def put_truncated_copy(stack: LocalStack, topic: str) -> tuple[bytes, bytes, int]:
    """Put a copy of the topic's first message, its value cut short, on partition 0: (key, value, offset)."""
    consumer = Consumer({
        "bootstrap.servers": stack.kafka.address(), "group.id": f"quarantine-test-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
    })
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = consumer.poll(30)
        assert first is not None and first.error() is None and first.value(), f"nothing on {topic}"
        key, value = first.key() or b"", (first.value() or b"")[:-3]
    finally:
        consumer.close()
    delivered: list[Message] = []
    producer = Producer({"bootstrap.servers": stack.kafka.address()})
    producer.produce(topic, value, key, partition=0, on_delivery=lambda _err, msg: delivered.append(msg))
    assert producer.flush(30) == 0 and delivered and delivered[0].error() is None
    offset = delivered[0].offset()
    assert offset is not None
    return key, value, offset


def test_a_bad_message_of_a_changing_source_table_is_quarantined_and_the_table_keeps_applying(
    spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(*(s.format(rows=ROWS) for s in CREATE[db.engine]))
    config_path = write_db_config(tmp_path, db, [{"name": "orders"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    config = load(config_path)
    table = db.qualified("orders")
    writer = ChangeWriter(db, "orders", ROWS, max_transactions=100_000, pause=0.05).start()
    db.execute(TOUCH[db.engine])
    wait_for_schema(config, table)
    first = cli_run(config_path, "bootstrap", table, "--apply")
    assert first.exit_code == 0, first.stderr
    source, entry = config.table(table)
    topic = target_for(config, source, entry).topic
    key, bad_value, offset = put_truncated_copy(db.stack, topic)

    stopped = cli_run(config_path, "apply", "--once")

    assert stopped.exit_code == 1 and f"offset {offset}" in stopped.stdout + stopped.stderr, stopped.stdout
    with StateStore.open(config.state_store.url) as store:
        info = store.require_table(table)
        assert info.state is TableState.FAILED and f"offset {offset}" in (info.last_error or "")
    chosen = cli_run(
        config_path, "quarantine", table, "--partition", "0", "--offset", str(offset), "--reason", "cut short"
    )
    assert chosen.exit_code == 0, chosen.stderr
    applied = cli_run(config_path, "apply", "--once")
    assert applied.exit_code == 0, applied.stderr
    writer.stop()
    assert writer.transactions > 10

    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "orders") >= ROWS // 2
    with StateStore.open(config.state_store.url) as store:
        info = store.require_table(table)
        assert info.state is TableState.LIVE and f"offset {offset}" in (info.possibly_diverged or "")
        (kept,) = store.quarantined(table)
        assert (kept.topic, kept.partition, kept.offset) == (topic, 0, offset)
        assert (kept.key, kept.value, kept.reason) == (key, bad_value, "cut short")


def test_a_quarantined_message_is_replayed_after_a_fix_and_a_later_change_of_its_key_still_wins(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    topic = SyntheticTopic(local_stack, f"qrep_{run}")
    topic.send([
        (topic.key(1), topic.change("c", 1, "a", (100, 2))),
        # Offset 1: no message key and no `key` configured; its before image (REPLICA IDENTITY FULL, as a
        # keyless table's updates need) names the key the operator's fix configures.
        (None, topic.change("u", 1, "keyless", (150, 2), before=True)),
    ])
    config_path = tmp_path / "cdc-lake.yaml"
    data = config_dict(
        local_stack, [], str(tmp_path / "lake"), f"sqlite:///{tmp_path}/state.db", synthetic=[topic]
    )
    config = write_and_load(config_path, data)
    record_catching_up(config)
    table = f"qrep_{run}.s.t"
    base = ["--config", str(config_path)]
    replay = [*base, "quarantine", "--replay", table, "--partition", "0", "--offset", "1"]
    runner = CliRunner()
    assert runner.invoke(cli, [*base, "apply", "--once"]).exit_code == 1
    quarantine = [*base, "quarantine", table, "--partition", "0", "--offset", "1", "--reason", "no key"]
    chosen = runner.invoke(cli, quarantine)
    assert chosen.exit_code == 0, chosen.output
    topic.send([
        (topic.key(1), topic.change("u", 1, "later", (300, 2))),
        (topic.key(2), topic.change("c", 2, "other", (200, 2))),
    ])
    assert runner.invoke(cli, [*base, "apply", "--once"]).exit_code == 0
    unfixed = runner.invoke(cli, replay)
    assert unfixed.exit_code == 1 and "still does not decode" in unfixed.output, unfixed.output

    data["sources"][topic.prefix]["tables"][0]["key"] = ["id"]  # the operator's fix
    write_and_load(config_path, data)
    replayed = runner.invoke(cli, [*replay, "--json"])

    assert replayed.exit_code == 0, replayed.output
    done = json.loads(replayed.stdout)  # the log lines go to stderr
    path = config.lake.table_base_path(table)
    commit = latest_commit(spark, path)
    assert commit is not None and done["replay_commit"] == commit.instant and done["replayed_by"]
    rows = lake_rows(spark, path)  # Spark+Hudi and hudi-rs agree
    expected = [(1, "later", Decimal(3)), (2, "other", Decimal(2))]
    assert [(r["id"], r["name"], r["ratio"]) for r in rows] == expected
    with StateStore.open(config.state_store.url) as store:
        assert store.require_table(table).possibly_diverged is None
        assert store.get_applied_offsets(table) == {0: 4}
    again = runner.invoke(cli, replay)
    assert again.exit_code == 1 and "already replayed" in again.output
    listed = runner.invoke(cli, [*base, "quarantine", "--list", table, "--no-decode"])
    assert f"commit {commit.instant}" in listed.output
