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
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.apply import Capture, mariadb_capture, postgres_capture
from support.second_reader import s3_storage_options, second_reader_rows
from support.trino_reader import assert_trino_reads_as_spark

from cdc_lake import jvm
from cdc_lake.apply.table_applier import ApplierOptions, BatchResult, TableApplier
from cdc_lake.config import S3Settings
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.hudi.writer import read_table
from cdc_lake.kafka.group_offsets import group_id
from cdc_lake.kafka.offsets import wait_for_messages
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.lake.columns import OP_COLUMN
from cdc_lake.lake.commit_metadata import OFFSETS_KEY
from cdc_lake.lake.layout import CompactionSpec, IndexType, TableType
from cdc_lake.lake.schema_change import SourceDefaults
from cdc_lake.lake.target import TableTarget
from cdc_lake.stack.java import classpath_argv
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

RUN = uuid.uuid4().hex[:8]
# Four changes to the table (c, c, u, d) and the tombstone that follows the delete.
EXPECTED_MESSAGES = 5


CHANGES = (
    "insert into {table} values (1, 10.50, '{{\"k\": 1}}', {now}, 'keep')",
    "insert into {table} values (2, 20.00, null, {now}, 'gone')",
    "update {table} set amount = 11.25, doc = '{{\"k\": 2}}' where id = 1",
    "delete from {table} where id = 2",
)


def _make_changes(capture: Capture) -> None:
    """The four changes, in one autocommit each, on the captured table."""
    if capture.engine == "postgres":
        table, now = f'"{capture.schema}"."{capture.table}"', "now()"
    else:
        table, now = f"`{capture.table}`", "now(6)"
    capture.execute(*(change.format(table=table, now=now) for change in CHANGES))


@pytest.fixture
def postgres_source(local_stack: LocalStack) -> Iterator[Capture]:
    """A captured Postgres table."""
    ddl = (
        "create table {table} (id int primary key, amount numeric(10,2), doc jsonb, "
        "changed_at timestamptz, note text)"
    )
    with postgres_capture(local_stack, ddl) as capture:
        yield capture


@pytest.fixture
def mariadb_source(local_stack: LocalStack) -> Iterator[Capture]:
    """A captured MariaDB table."""
    ddl = (
        "create table {table} (id int primary key, amount decimal(10,2), doc json, "
        "changed_at timestamp(6) null, note text)"
    )
    with mariadb_capture(local_stack, ddl) as capture:
        yield capture


def _wait_for_changes(stack: LocalStack, topic: str) -> None:
    wait_for_messages(stack.kafka.address(), topic, EXPECTED_MESSAGES, timeout=120)


def _no_source(table: str, columns: Sequence[str]) -> SourceDefaults:
    """This test names no source in a config: a column its changes added would stop the table."""
    return SourceDefaults({}, error=f"{table}: the first-slice test has no source catalog to ask")


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
    options = ApplierOptions(
        KafkaReadSettings(stack.kafka.address()), max_events=1000, source_defaults=_no_source
    )
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

    # The third reader, Trino, through a catalog entry (on the object store: its native S3 file system).
    assert assert_trino_reads_as_spark(spark, base_path, stack=stack) == 1

    # Informational offsets for Kafka's lag tools: the table copy's group holds the commit's offsets.
    (row,) = _describe_group(stack, group_id(topic, base_path))
    assert (row["TOPIC"], row["PARTITION"]) == (topic, "0")
    assert (row["CURRENT-OFFSET"], row["LAG"]) == (str(EXPECTED_MESSAGES), "0")


def test_postgres_changes_reach_hudi_on_s3(
    spark: SparkSession,
    postgres_source: Capture,
    local_stack: LocalStack,
    s3_lake_root: str,
) -> None:
    _make_changes(postgres_source)
    base_path = f"{s3_lake_root}/slice/{RUN}/postgres"
    _check_slice(spark, local_stack, "postgres", base_path, postgres_source.topic)
    listed = local_stack.object_store.client().list_objects_v2(
        Bucket="lake", Prefix=f"tests/slice/{RUN}/postgres/"
    )
    assert listed["KeyCount"] > 0


def test_mariadb_changes_reach_hudi_on_local_fs(
    spark: SparkSession,
    mariadb_source: Capture,
    local_stack: LocalStack,
    tmp_path: Path,
) -> None:
    _make_changes(mariadb_source)
    _check_slice(spark, local_stack, "mariadb", str(tmp_path / "mariadb"), mariadb_source.topic)
    assert (tmp_path / "mariadb" / ".hoodie").is_dir()
