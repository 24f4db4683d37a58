"""A row moved along a chain of primary keys keeps its unchanged TOASTed value, on both merge paths.

Found by the differential fuzzer (``fuzz_regressions/postgres-1003.json``, 1004, 1005): on Postgres
under REPLICA IDENTITY DEFAULT a row moved X->Y while the bootstrap copied the table (the snapshot read it
under Y), then Y->Z; each move's create carries the placeholder for the unchanged TOASTed column.  Z
followed Y's state, which named X's stored row: the lake lacks X, so the column was written null.  The
rule (docs/applier.md, "Postgres TOAST"): the value comes from the stored row of the first key of the
chain the lake holds.

Here the decoded batches of the property suite's model (:mod:`support.change_model`) go through both
paths of :func:`cdc_lake.apply.frame.latest_frame` (the Spark steps of a large batch and the driver's
merge) and :func:`~cdc_lake.apply.frame.fill_from_lake` against a lake the snapshot left, and must give
the model's rows; then the whole pipeline on the stack, with the snapshot read after the first move.
"""

from __future__ import annotations

import datetime as dt
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    postgres_db,
    wait_streamed,
    write_db_config,
)
from support.change_model import PG_TOPIC, PG_VALUE_ID, SCHEMAS, Change, Emitter, Row, Source, merge_batch
from support.common import cli_run, load

from cdc_lake.apply import runner, table_applier
from cdc_lake.apply.decoding import BadMessage, Decoded, DecodedChange, DecodeSettings, decode_messages
from cdc_lake.apply.frame import fill_from_lake, lake_frame, latest_frame
from cdc_lake.apply.key_change import KEY_UPDATE_HEADERS
from cdc_lake.decode.schema import TypedSchemas
from cdc_lake.kafka.offsets import OffsetRange, end_offsets, topic_state
from cdc_lake.kafka.reader import KafkaReader, KafkaReadSettings, read_ranges_in_spark
from cdc_lake.lake.columns import DELETED_COLUMN, ORDERING_COLUMN
from cdc_lake.lake.schema import merge_columns
from cdc_lake.lake.schema_change import WriterColumns
from cdc_lake.lake.target import target_for
from cdc_lake.stack.manager import LocalStack
from cdc_lake_bootstrap import run as bootstrap_run

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

_ROW: Row = {"id": 1, "qty": 0, "note": "toasted:1"}


def _chain(keys: list[int]) -> tuple[Source, Emitter, list[dict[int, int]]]:
    """Key ``keys[0]`` inserted with a TOASTed note, then moved along ``keys``, one transaction a move."""
    source, emitter = Source(), Emitter("postgres")
    steps = [[Change("c", keys[0], {**_ROW, "id": keys[0]})]]
    steps += [
        [Change("c", new, {**_ROW, "id": new}, moved_from=old, toast_unchanged=True)]
        for old, new in itertools.pairwise(keys)
    ]
    ends = []
    for step in steps:
        before = {k: dict(v) for k, v in source.rows.items()}
        source.commit(step)
        emitter.emit(step, before)
        ends.append({p: len(log) for p, log in emitter.log.items()})
    return source, emitter, ends


def _decoded(emitter: Emitter, start: dict[int, int]) -> list[DecodedChange]:
    records = []
    for partition, log in emitter.log.items():
        raw = [m.raw for m in log[start[partition] :]]
        records.extend(decode_messages(DecodeSettings(PG_TOPIC, SCHEMAS, None, False), raw))
    assert not any(isinstance(r, BadMessage) for r in records)
    return [r for r in records if isinstance(r, DecodedChange)]


@pytest.mark.parametrize(
    ("keys", "read_at"),
    [
        ([1, 2, 3], 1),  # the fuzzer's finding: the snapshot read the row under the chain's middle key
        ([1, 2, 3], 0),  # under the first key: the steady-state case
        ([1, 2, 3, 4], 2),
        ([1, 2, 1], 1),  # the row comes back to its first key, read under the second
    ],
)
def test_both_paths_fill_a_chain_of_moves_from_the_key_the_snapshot_read(
    spark: SparkSession, keys: list[int], read_at: int
) -> None:
    source, emitter, ends = _chain(keys)
    snapshot = {k: (v, "0" * 40) for k, v in source.snapshot_at(read_at + 1).items()}
    changes = _decoded(emitter, ends[0])
    expected = merge_batch(changes, snapshot, exists=True)
    assert {k: v[0] for k, v in expected.items()} == source.rows
    writer = WriterColumns.of(TypedSchemas(SCHEMAS, {}).get_schema(PG_VALUE_ID))
    columns = merge_columns(None, writer.struct).columns
    stored = spark.createDataFrame(
        [(row["id"], row["qty"], row["note"], ordering) for row, ordering in snapshot.values()],
        f"id int, qty int, note string, {ORDERING_COLUMN} string",
    )
    moves = sum(1 for c in changes if c.unavailable and (c.op == "c" or c.moved_from is not None))
    applied_at = dt.datetime.now(tz=dt.UTC)
    decoded: list[Decoded] = list(changes)
    for path, records in (("Spark", spark.sparkContext.parallelize(decoded, 2)), ("driver", decoded)):
        latest = latest_frame(spark, records, columns, {}, ("id",), ["note"], moves)
        latest = fill_from_lake(latest, stored, ("id",), ["note"])
        rows = lake_frame(latest, columns, applied_at, soft_deletes=False).where(f"not {DELETED_COLUMN}")
        lake = {r["id"]: {"id": r["id"], "qty": r["qty"], "note": r["note"]} for r in rows.collect()}
        assert lake == source.rows, f"the {path} path"


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as source_db:
        yield source_db


def _wait_on_replica(db: SourceDb, query: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    with db.stack.postgres_replica.connect(db.database) as replica:
        replica.autocommit = True
        while replica.execute(query).fetchone() is None:
            assert time.monotonic() < deadline, f"the replica did not replay: {query}"
            time.sleep(0.2)


@pytest.mark.parametrize(
    ("name", "moved_before_read", "driver"),
    [
        ("chain_read_moved", True, True),
        ("chain_read_moved_spark", True, False),
        ("chain_read_first", False, True),
    ],
)
def test_a_row_moved_during_the_bootstrap_and_after_it_keeps_its_toasted_value(
    spark: SparkSession,
    db: SourceDb,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    moved_before_read: bool,
    driver: bool,
) -> None:
    """Row 1 moved to 2 after the watermark (the snapshot reads it under 2, or under 1 when it moves after
    the read), then 2 to 3 after the bootstrap; both moves applied in one batch, on the driver's merge or
    the Spark steps.  Row 10 is updated with its TOASTed value unchanged, as a control."""
    db.execute(
        f'create table "{name}" (id integer primary key, qty integer, big text)',
        f'alter table "{name}" alter column big set storage external',
        f'alter table "{name}" replica identity default',
        f"insert into \"{name}\" values (1, 0, repeat('chain-1 ', 500)), (10, 0, repeat('other ', 700))",
    )
    config_path = write_db_config(tmp_path, db, [{"name": name}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    original = bootstrap_run.wait_for_replica

    def move_before_the_read(*args: Any, **kwargs: Any) -> str:
        db.execute(f'update "{name}" set id = 2 where id = 1')
        waited = original(*args, **kwargs)
        _wait_on_replica(db, f'select 1 from "{name}" where id = 2')
        return waited

    if moved_before_read:
        monkeypatch.setattr(bootstrap_run, "wait_for_replica", move_before_the_read)
    outcome = cli_run(config_path, "bootstrap", db.qualified(name))
    assert outcome.exit_code == 0, outcome.stderr or outcome.output
    if not moved_before_read:
        db.execute(f'update "{name}" set id = 2 where id = 1')
    db.execute(f'update "{name}" set id = 3 where id = 2', f'update "{name}" set qty = 1 where id = 10')
    if not driver:
        monkeypatch.setattr(table_applier, "DRIVER_BATCH", 0)
    config = load(config_path)
    apply_until_live(spark, config, db.qualified(name))
    assert_lake_equals_source(spark, config, db, name)


@pytest.mark.parametrize(("name", "limit_after"), [("moves_cut", None), ("moves_cut_limit", 4)])
def test_primary_key_updates_cut_from_their_creates_keep_their_toasted_values(
    spark: SparkSession,
    db: SourceDb,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    limit_after: int | None,
) -> None:
    """Four rows moved to new primary keys, one transaction each.  Each move is a delete, a tombstone and
    a create; applied in batches of 4 messages, the batches' ends fall between the second and third
    moves' deletes and creates.  Before the applier held a primary-key update's half back to the batch
    holding its other half (:func:`cdc_lake.apply.key_change.key_update_cuts`), the create met a lake
    whose old row the previous batch had deleted, and the unchanged TOASTed value was written null.

    ``limit_after``: instead, the catch-up's limit (the end offsets it reads when it starts, as
    ``apply --once`` does) ends that many messages into the moves, after the second move's delete, as if
    Debezium had written its create just after the limit was read: the batch held back to the delete,
    the next one started at it with the same limit and applied it alone, until the catch-up read its
    limit again after such a hold (``ApplyRunner.catch_up``)."""
    db.execute(
        f'create table "{name}" (id integer primary key, qty integer, big text)',
        f'alter table "{name}" alter column big set storage external',
        f'alter table "{name}" replica identity default',
        *(f"insert into \"{name}\" values ({key}, 0, repeat('moved-{key} ', 400))" for key in range(1, 5)),
    )
    batches = {} if limit_after is not None else {"apply": {"batch_max_events": 4}}
    config_path = write_db_config(tmp_path, db, [{"name": name}], str(tmp_path / "lake"), **batches)
    onboard(config_path, db.source)
    outcome = cli_run(config_path, "bootstrap", db.qualified(name))
    assert outcome.exit_code == 0, outcome.stderr or outcome.output
    moves = [[f'update "{name}" set id = {key + 100} where id = {key}'] for key in range(1, 5)]
    db.execute_transactions(moves)
    config = load(config_path)
    if limit_after is not None:
        wait_streamed(config, db.qualified(name))
        reads = iter(range(1_000_000))

        def limit_inside_the_moves(servers: str, topic: str, **kwargs: Any) -> dict[int, int]:
            ends = end_offsets(servers, topic, **kwargs)
            return {p: high - 12 + limit_after for p, high in ends.items()} if next(reads) == 0 else ends

        monkeypatch.setattr(runner, "end_offsets", limit_inside_the_moves)
    apply_until_live(spark, config, db.qualified(name))
    assert assert_lake_equals_source(spark, config, db, name) == 4
    # Both Kafka readers keep Debezium's headers (every message also carries __debezium.context.*): each
    # move's delete and tombstone carry __debezium.newkey, its create __debezium.oldkey, nothing else either.
    source, entry = config.table(db.qualified(name))
    topic = target_for(config, source, entry).topic
    ((low, high),) = topic_state(config.kafka.bootstrap_servers, topic).marks.values()
    for reader in KafkaReader:
        messages = read_ranges_in_spark(
            spark, KafkaReadSettings.of(config.kafka), [OffsetRange(topic, 0, low, high)], reader
        ).collect()
        marked = [[name for name in m.headers if name in KEY_UPDATE_HEADERS] for m in messages]
        halves = [["__debezium.newkey"], ["__debezium.newkey"], ["__debezium.oldkey"]]
        assert [names for names in marked if names] == halves * 4, f"{reader.value} reader: {marked}"
