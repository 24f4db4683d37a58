"""The first slice through the whole stack, for both engines.

A row inserted, updated and deleted on the primary (plus one that survives) travels as Debezium
change events in Confluent Avro through Kafka and is applied by the production applier (executors
read the offsets and decode them with the writer schema looked up by id in the registry, the last
change per key is written by Spark with the Hudi bundle), and the Hudi table reads back equal to the
source with the offsets in its commit.  Postgres lands on the ``s3a://`` object store, MariaDB on the
local file system.  Kafka's own consumer-group tool (``kafka-consumer-groups --describe``) then shows the
table copy's group at the commit's offsets with no lag.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.second_reader import s3_storage_options, second_reader_rows

from cdc_lake import jvm
from cdc_lake.apply.table_applier import ApplierOptions, BatchResult, TableApplier
from cdc_lake.config import S3Settings
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.connect.render import ConnectorParams, heartbeat_table_ddl, render_connector
from cdc_lake.connect.streaming import heartbeat_count, wait_streaming
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.hudi.options import CompactionSpec, IndexType, TableType
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.hudi.writer import read_table
from cdc_lake.kafka.group_offsets import group_id
from cdc_lake.kafka.offsets import wait_for_messages
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.lake.checkpoint import OFFSETS_KEY
from cdc_lake.lake.columns import OP_COLUMN
from cdc_lake.lake.target import TableTarget
from cdc_lake.stack.java import classpath_argv
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.service import DEMO_DATABASE, HOST

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

RUN = uuid.uuid4().hex[:8]
# Four changes to the table (c, c, u, d) and the tombstone that follows the delete.
EXPECTED_MESSAGES = 5


def _postgres_changes(stack: LocalStack, schema: str) -> Callable[[], None]:
    def run() -> None:
        with stack.postgres_primary.connect(DEMO_DATABASE) as conn:
            conn.execute(f"insert into \"{schema}\".items values (1, 10.50, '{{\"k\": 1}}', now(), 'keep')")
            conn.execute(f"insert into \"{schema}\".items values (2, 20.00, null, now(), 'gone')")
            conn.execute(f'update "{schema}".items set amount = 11.25, doc = \'{{"k": 2}}\' where id = 1')
            conn.execute(f'delete from "{schema}".items where id = 2')

    return run


def _mariadb_changes(stack: LocalStack, database: str) -> Callable[[], None]:
    def run() -> None:
        with stack.mariadb_primary.connect(database) as conn, conn.cursor() as cur:
            cur.execute("insert into items values (1, 10.50, '{\"k\": 1}', now(6), 'keep')")
            cur.execute("insert into items values (2, 20.00, null, now(6), 'gone')")
            cur.execute("update items set amount = 11.25, doc = '{\"k\": 2}' where id = 1")
            cur.execute("delete from items where id = 2")

    return run


@pytest.fixture
def connect(local_stack: LocalStack) -> KafkaConnectClient:
    return KafkaConnectClient(local_stack.connect.url)


@pytest.fixture
def postgres_source(
    local_stack: LocalStack, connect: KafkaConnectClient
) -> Iterator[tuple[str, Callable[[], None]]]:
    """A captured Postgres table; yields its topic and the function that changes it."""
    schema, name = f"slice_{RUN}", f"slice-pg-{RUN}"
    slot, publication = f"slice_{RUN}", f"slice_{RUN}"
    with local_stack.postgres_primary.connect(DEMO_DATABASE) as conn:
        conn.execute(f'create schema "{schema}"')
        conn.execute(
            f'create table "{schema}".items (id int primary key, amount numeric(10,2), doc jsonb, '
            "changed_at timestamptz, note text)"
        )
        conn.execute(heartbeat_table_ddl(f"{schema}.heartbeat"))
        conn.execute(f'create publication "{publication}" for table "{schema}".items, "{schema}".heartbeat')
    creds = local_stack.layout.credentials
    params = ConnectorParams(
        host=HOST,
        port=local_stack.layout.ports.postgres_primary,
        user=creds.db_user,
        password_env="CDC_LAKE_DB_PASSWORD",
        topic_prefix=name,
        tables=[f"{schema}.items"],
        registry_url=local_stack.registry.base_url,
        database=DEMO_DATABASE,
        slot_name=slot,
        publication_name=publication,
        heartbeat_table=f"{schema}.heartbeat",
        heartbeat_interval_ms=1000,
    )
    _start_connector(local_stack, connect, "postgres", name, params)
    yield f"{name}.{schema}.items", _postgres_changes(local_stack, schema)
    connect.delete(name)
    with local_stack.postgres_primary.connect(DEMO_DATABASE) as conn:
        conn.execute(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
            "where slot_name = %s and not active",
            (slot,),
        )
        conn.execute(f'drop schema "{schema}" cascade')
        conn.execute(f'drop publication "{publication}"')


@pytest.fixture
def mariadb_source(
    local_stack: LocalStack, connect: KafkaConnectClient
) -> Iterator[tuple[str, Callable[[], None]]]:
    """A captured MariaDB table; yields its topic and the function that changes it."""
    database, name = f"slice_{RUN}", f"slice-maria-{RUN}"
    with local_stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"create database `{database}`")
        cur.execute(
            f"create table `{database}`.items (id int primary key, amount decimal(10,2), doc json, "
            "changed_at timestamp(6) null, note text)"
        )
    creds = local_stack.layout.credentials
    params = ConnectorParams(
        host=HOST,
        port=local_stack.layout.ports.mariadb_primary,
        user=creds.db_user,
        password_env="CDC_LAKE_DB_PASSWORD",
        topic_prefix=name,
        tables=[f"{database}.items"],
        registry_url=local_stack.registry.base_url,
        server_id=7000 + int(RUN[:4], 16) % 1000,
        kafka_bootstrap=local_stack.kafka.address(),
        heartbeat_interval_ms=1000,
    )
    _start_connector(local_stack, connect, "mariadb", name, params)
    yield f"{name}.{database}.items", _mariadb_changes(local_stack, database)
    connect.delete(name)
    with local_stack.mariadb_primary.connect() as conn, conn.cursor() as cur:
        cur.execute(f"drop database `{database}`")


def _start_connector(
    stack: LocalStack, connect: KafkaConnectClient, engine: str, name: str, params: ConnectorParams
) -> None:
    baseline = heartbeat_count(stack.kafka.address(), name)
    connect.create_or_update(name, render_connector(engine, name, params))
    connect.wait_running(name, timeout=120)
    wait_streaming(stack.kafka.address(), name, name, baseline=baseline, timeout=120)


def _wait_for_changes(stack: LocalStack, topic: str) -> None:
    wait_for_messages(stack.kafka.address(), topic, EXPECTED_MESSAGES, timeout=120)


def _apply(spark: SparkSession, stack: LocalStack, engine: str, base_path: str, topic: str) -> BatchResult:
    """One batch of the production applier: executors read and decode, last change per key, Hudi upsert."""
    target = TableTarget(
        qualified_name=topic,
        engine=engine,
        topic=topic,
        tier=1,
        base_path=base_path,
        key_fields=None,
        partition_fields=(),
        columns=None,
        table_type=TableType.COPY_ON_WRITE,
        index=IndexType.GLOBAL_BLOOM,
        compaction=CompactionSpec(),
        soft_deletes=False,
    )
    options = ApplierOptions(KafkaReadSettings(stack.kafka.address()), max_events=1000)
    registry = SchemaRegistry(stack.registry.confluent_url)
    try:
        return TableApplier(spark, target, options, registry).apply_batch()
    finally:
        registry.close()


def _storage_options(stack: LocalStack, base_path: str) -> dict[str, str]:
    if not base_path.startswith("s3a://"):
        return {}
    creds = stack.layout.credentials
    s3 = S3Settings.model_validate(
        {
            "endpoint": stack.object_store.endpoint,
            "region": "us-east-1",
            "access_key": creds.s3_access_key,
            "secret_key": creds.s3_secret_key,
        }
    )
    return s3_storage_options(s3)


def _describe_group(stack: LocalStack, group: str) -> list[dict[str, str]]:
    """The rows of ``kafka-consumer-groups --describe --group GROUP``: Kafka's own tool, the stack's jars."""
    argv = classpath_argv(
        "128m", jvm.resolve(jvm.KAFKA_SERVER), "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server", stack.kafka.address(), "--describe", "--group", group,
    )
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    lines = [line.split() for line in shown.splitlines() if line.strip()]  # and the tool's own log lines
    header = next(words for words in lines if words[:2] == ["GROUP", "TOPIC"])
    return [dict(zip(header, words, strict=True)) for words in lines if words[0] == group]


def _check_slice(spark: SparkSession, stack: LocalStack, engine: str, base_path: str, topic: str) -> None:
    _wait_for_changes(stack, topic)
    result = _apply(spark, stack, engine, base_path, topic)

    assert result.error() is None
    assert result.ops == {"c": 2, "u": 1, "d": 1}
    assert result.end == {0: EXPECTED_MESSAGES}
    rows = [r.asDict() for r in read_table(spark, base_path).collect()]
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["id"] == 1
    assert row["amount"] == Decimal("11.25")
    assert json.loads(row["doc"]) == {"k": 2}
    assert row["note"] == "keep"
    assert isinstance(row["changed_at"], dt.datetime)
    assert row[OP_COLUMN] == "u"

    # The second reader, from the same path (on the object store: with its endpoint and keys).
    options = _storage_options(stack, base_path)
    second = second_reader_rows(base_path, ["id", "amount", "doc", "note"], options)
    assert [(r["id"], r["amount"], json.loads(r["doc"]), r["note"]) for r in second] == [
        (1, Decimal("11.25"), {"k": 2}, "keep")
    ]

    commit = latest_commit(spark, base_path)
    assert commit is not None and commit.instant == result.commit_instant
    assert json.loads(commit.metadata[OFFSETS_KEY]) == {"0": EXPECTED_MESSAGES}

    # Informational offsets for Kafka's lag tools: the table copy's group holds the commit's offsets.
    (row,) = _describe_group(stack, group_id(topic, base_path))
    assert (row["TOPIC"], row["PARTITION"]) == (topic, "0")
    assert (row["CURRENT-OFFSET"], row["LAG"]) == (str(EXPECTED_MESSAGES), "0")


def test_postgres_changes_reach_hudi_on_s3(
    spark: SparkSession,
    postgres_source: tuple[str, Callable[[], None]],
    local_stack: LocalStack,
    s3_lake_root: str,
) -> None:
    topic, make_changes = postgres_source
    make_changes()
    _check_slice(spark, local_stack, "postgres", f"{s3_lake_root}/slice/{RUN}/postgres", topic)
    listed = local_stack.object_store.client().list_objects_v2(
        Bucket="lake", Prefix=f"tests/slice/{RUN}/postgres/"
    )
    assert listed["KeyCount"] > 0


def test_mariadb_changes_reach_hudi_on_local_fs(
    spark: SparkSession,
    mariadb_source: tuple[str, Callable[[], None]],
    local_stack: LocalStack,
    tmp_path: Path,
) -> None:
    topic, make_changes = mariadb_source
    make_changes()
    _check_slice(spark, local_stack, "mariadb", str(tmp_path / "mariadb"), topic)
    assert (tmp_path / "mariadb" / ".hoodie").is_dir()
