"""Hudi writer options derived from a table spec (no JVM needed)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from cdc_lake.exceptions import ConfigError, LakeWriteError
from cdc_lake.hudi import services
from cdc_lake.hudi.keys import row_writer_keys_agree
from cdc_lake.hudi.options import (
    HudiTableSpec,
    index_options,
    passthrough_option_problem,
    table_service_options,
    write_options,
)
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.layout import CompactionSpec, IndexType, TableType


def _spec(**kwargs: object) -> HudiTableSpec:
    base: dict[str, object] = {
        "table_name": "pg.public.orders",
        "base_path": "s3a://lake/pg/public/orders",
        "record_key_fields": ("id",),
        "ordering_field": "_cdc_order",
    }
    base.update(kwargs)
    return HudiTableSpec(**base)  # type: ignore[arg-type]


def test_event_time_ordering_and_table_identity() -> None:
    options = write_options(_spec(), WriteOperation.UPSERT)
    assert options["hoodie.table.name"] == "pg_public_orders"
    assert options["hoodie.datasource.write.operation"] == "upsert"
    assert options["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert options["hoodie.table.ordering.fields"] == "_cdc_order"
    assert options["hoodie.datasource.write.precombine.field"] == "_cdc_order"
    assert options["hoodie.datasource.write.table.type"] == "COPY_ON_WRITE"
    assert "hoodie.compact.inline" not in options


def test_hudi_combines_an_upsert_unless_the_rows_are_one_per_key() -> None:
    assert write_options(_spec(), WriteOperation.UPSERT)["hoodie.combine.before.upsert"] == "true"
    unique = write_options(_spec(), WriteOperation.UPSERT, unique_keys=True)
    assert unique["hoodie.combine.before.upsert"] == "false"
    assert unique["hoodie.combine.before.delete"] == "true"


@pytest.mark.parametrize(
    ("keys", "partitions", "generator"),
    [
        (("id",), (), "NonpartitionedKeyGenerator"),
        (("id", "tenant"), (), "NonpartitionedKeyGenerator"),
        (("id",), ("region",), "SimpleKeyGenerator"),
        (("id", "tenant"), ("region",), "ComplexKeyGenerator"),
        (("id",), ("region", "day"), "ComplexKeyGenerator"),
    ],
)
def test_key_generator_follows_keys_and_partitions(
    keys: tuple[str, ...], partitions: tuple[str, ...], generator: str
) -> None:
    options = write_options(_spec(record_key_fields=keys, partition_fields=partitions), WriteOperation.UPSERT)
    assert options["hoodie.datasource.write.keygenerator.class"].endswith(f".{generator}")
    assert options["hoodie.datasource.write.recordkey.field"] == ",".join(keys)
    assert options["hoodie.datasource.write.partitionpath.field"] == ",".join(partitions)
    # Hudi 1.1 refuses to write a complex key generator with one key field unless this is off.
    single_complex = len(keys) == 1 and generator == "ComplexKeyGenerator"
    assert ("hoodie.write.complex.keygen.validation.enable" in options) is single_complex


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (
            IndexType.GLOBAL_BLOOM,
            {"hoodie.index.type": "GLOBAL_BLOOM", "hoodie.bloom.index.update.partition.path": "true"},
        ),
        (IndexType.GLOBAL_SIMPLE, {"hoodie.simple.index.update.partition.path": "true"}),
        (
            IndexType.RECORD_INDEX,
            {
                "hoodie.index.type": "GLOBAL_RECORD_LEVEL_INDEX",
                "hoodie.metadata.global.record.level.index.enable": "true",
                "hoodie.record.index.update.partition.path": "true",
            },
        ),
        (IndexType.BUCKET, {"hoodie.bucket.index.num.buckets": "4", "hoodie.bucket.index.hash.field": "id"}),
    ],
)
def test_index_options(index: IndexType, expected: dict[str, str]) -> None:
    options = write_options(_spec(index=index), WriteOperation.UPSERT)
    assert expected.items() <= options.items()


@pytest.mark.parametrize("index", list(IndexType))
def test_only_a_bucket_index_table_goes_without_the_metadata_table(index: IndexType) -> None:
    """The bucket index looks nothing up (the bucket is in the file group's name); the metadata table's
    own commit inside each write was half of a small upsert's (docs/hudi.md, "The metadata table")."""
    for table_type in TableType:
        spec = _spec(table_type=table_type, index=index, compaction=CompactionSpec(inline=False))
        wanted = "false" if index is IndexType.BUCKET else "true"
        assert write_options(spec, WriteOperation.UPSERT)["hoodie.metadata.enable"] == wanted
        assert write_options(spec, WriteOperation.BULK_INSERT)["hoodie.metadata.enable"] == wanted
        assert table_service_options(spec)["hoodie.metadata.enable"] == wanted


@pytest.mark.parametrize("index", list(IndexType))
def test_base_files_are_zstd_and_a_bucket_tables_carry_no_bloom_filter(index: IndexType) -> None:
    """Every write and table service encodes base files in zstd (with Hudi 1.1's gzip and bloom filters
    a compaction took 1.23x as long and its file was nearly twice as large: docs/benchmarks.md, "Goal 1:
    zstd base files without bloom filters"); a bucket table, whose index reads no key bloom filter,
    writes none in their footers.  Every other index keeps them (a bloom index reads them; the others
    are not measured)."""
    for table_type in TableType:
        spec = _spec(table_type=table_type, index=index, compaction=CompactionSpec(inline=False))
        blooms = index is not IndexType.BUCKET
        for options in (
            write_options(spec, WriteOperation.UPSERT),
            write_options(spec, WriteOperation.BULK_INSERT),
            table_service_options(spec),
        ):
            assert options["hoodie.parquet.compression.codec"] == "zstd"
            assert options.get("hoodie.parquet.bloom.filter.enabled", "true") == str(blooms).lower()


def test_a_passed_through_codec_or_bloom_filter_wins() -> None:
    spec = _spec(
        table_type=TableType.MERGE_ON_READ, index=IndexType.BUCKET, compaction=CompactionSpec(inline=False),
        extra_options=(("hoodie.parquet.compression.codec", "snappy"),
                       ("hoodie.parquet.bloom.filter.enabled", "true")),
    )  # fmt: skip
    for options in (write_options(spec, WriteOperation.UPSERT), table_service_options(spec)):
        assert options["hoodie.parquet.compression.codec"] == "snappy"
        assert options["hoodie.parquet.bloom.filter.enabled"] == "true"


def test_commit_metadata_is_prefixed() -> None:
    options = write_options(_spec(), WriteOperation.UPSERT, {"kafka.offsets": "0:5"})
    assert options["hoodie.datasource.write.commitmeta.key.prefix"] == "cdc_lake."
    assert options["cdc_lake.kafka.offsets"] == "0:5"
    with pytest.raises(ConfigError, match="commit metadata key"):
        write_options(_spec(), WriteOperation.UPSERT, {"": "x"})


def test_merge_on_read_compaction_inline_schedules_and_executes_in_the_write() -> None:
    compaction = CompactionSpec(inline=True, max_delta_commits=3)
    spec = _spec(table_type=TableType.MERGE_ON_READ, compaction=compaction)
    options = write_options(spec, WriteOperation.UPSERT)
    assert options["hoodie.compact.inline"] == "true"
    assert options["hoodie.compact.schedule.inline"] == "false"
    assert options["hoodie.compact.inline.max.delta.commits"] == "3"
    assert "hoodie.write.lock.provider" not in options


def test_merge_on_read_compaction_outside_the_write_is_scheduled_by_the_writer() -> None:
    """``inline: false`` used to schedule nothing: no plan was ever made, logs grew, Trino saw nothing."""
    spec = _spec(
        table_type=TableType.MERGE_ON_READ,
        compaction=CompactionSpec(inline=False, max_delta_commits=3, max_delta_seconds=120),
    )
    options = write_options(spec, WriteOperation.UPSERT)
    assert options["hoodie.compact.inline"] == "false"
    assert options["hoodie.compact.schedule.inline"] == "true"
    assert options["hoodie.compact.inline.trigger.strategy"] == "NUM_OR_TIME"
    assert options["hoodie.compact.inline.max.delta.seconds"] == "120"
    assert options["hoodie.write.lock.provider"].endswith("InProcessLockProvider")
    assert "hoodie.compaction.target.io" not in options  # every file group with logs: Hudi's 500 GB


def test_a_plans_io_budget_bounds_the_writers_plans_and_the_services() -> None:
    spec = _spec(table_type=TableType.MERGE_ON_READ, compaction=CompactionSpec(inline=False, plan_io_mb=1))
    assert write_options(spec, WriteOperation.UPSERT)["hoodie.compaction.target.io"] == "1"
    assert table_service_options(spec)["hoodie.compaction.target.io"] == "1"


def test_a_shared_lock_provider_of_the_user_wins_over_the_in_process_one() -> None:
    shared = "org.apache.hudi.hive.transaction.lock.HiveMetastoreBasedLockProvider"
    spec = _spec(
        table_type=TableType.MERGE_ON_READ,
        compaction=CompactionSpec(inline=False),
        extra_options=(("hoodie.write.lock.provider", shared),),
    )
    assert write_options(spec, WriteOperation.UPSERT)["hoodie.write.lock.provider"] == shared
    assert table_service_options(spec)["hoodie.write.lock.provider"] == shared


def test_copy_on_write_has_no_compaction_options() -> None:
    options = write_options(_spec(compaction=CompactionSpec(inline=False)), WriteOperation.UPSERT)
    assert not [key for key in options if key.startswith("hoodie.compact")]


@pytest.mark.parametrize("index", list(IndexType))
def test_table_services_keep_the_writers_index_and_metadata(index: IndexType) -> None:
    """A service's client without the record index settings drops the index the writer reads."""
    spec = _spec(table_type=TableType.MERGE_ON_READ, index=index, compaction=CompactionSpec(inline=False))
    writer = write_options(spec, WriteOperation.UPSERT)
    service = table_service_options(spec)
    for key in (*index_options(spec), "hoodie.metadata.enable", "hoodie.write.table.version",
                "hoodie.write.lock.provider", "hoodie.record.merge.mode", "hoodie.table.ordering.fields"):
        assert service[key] == writer[key], key


@pytest.mark.parametrize(
    "key",
    ["hoodie.compact.schedule.inline", "hoodie.compact.inline.max.delta.seconds",
     "hoodie.compact.inline.trigger.strategy", "hoodie.compaction.target.io"],
)
def test_compaction_triggers_are_decided_by_the_config(key: str) -> None:
    problem = passthrough_option_problem(key)
    assert problem is not None and "lake.compaction" in problem


def test_spec_rejects_missing_keys() -> None:
    with pytest.raises(ConfigError, match=r"pg\.public\.orders.*record key"):
        _spec(record_key_fields=())


def test_table_version_is_written_as_configured_and_checked() -> None:
    assert write_options(_spec(), WriteOperation.UPSERT)["hoodie.write.table.version"] == "6"
    assert write_options(_spec(table_version=9), WriteOperation.UPSERT)["hoodie.write.table.version"] == "9"
    with pytest.raises(ConfigError, match=r"pg\.public\.orders.*table version 7.*6, 8, 9"):
        _spec(table_version=7)


@pytest.mark.parametrize(
    ("key_type", "agree", "composite"),
    [(IntegerType(), True, True), (StringType(), True, False), (DateType(), True, True),
     (DecimalType(10, 2), True, True), (TimestampNTZType(), True, True), (TimestampType(), False, False),
     (BinaryType(), False, False)],
)
def test_a_bulk_insert_leaves_the_row_writer_when_its_record_keys_differ(
    key_type: DataType, agree: bool, composite: bool
) -> None:
    # The row writer's own key text for these types differs from the upsert's (proven against Hudi in
    # tests/integration/test_hudi_record_key_types.py); a composite key with one such column counts too,
    # and so does one with a string column: the row writer refuses an empty component, which the upsert
    # writes as __empty__ (tests/integration/test_empty_string_keys.py).
    schema = StructType([StructField("id", IntegerType()), StructField("k", key_type)])
    assert row_writer_keys_agree(schema, ("k",)) is agree
    assert row_writer_keys_agree(schema, ("id", "k")) is composite
    assert row_writer_keys_agree(schema, ("id",)) is True
    options = write_options(_spec(), WriteOperation.BULK_INSERT, row_writer=agree)
    assert options["hoodie.datasource.write.row.writer.enable"] == str(agree).lower()
    assert passthrough_option_problem("hoodie.datasource.write.row.writer.enable") is not None


def test_a_bucket_tables_services_name_its_record_key() -> None:
    """Hudi checks the bucket index's hash fields against the record key fields when it builds a table
    service's write client: without them every compaction plan failed (a NullPointerException)."""
    spec = _spec(index=IndexType.BUCKET, table_type=TableType.MERGE_ON_READ)
    options = table_service_options(spec)
    assert options["hoodie.datasource.write.recordkey.field"] == options["hoodie.bucket.index.hash.field"]
    assert options["hoodie.datasource.write.recordkey.field"] == ",".join(spec.record_key_fields)


def test_a_composite_keys_fields_reach_the_compaction_procedure_through_the_session() -> None:
    """Hudi's run_compaction takes its options as one ``k=v,k=v`` literal, which a composite key's record
    key and bucket hash fields (``a,b``) would break: every compaction of such a table outside the writer
    failed (found by the fuzzer's tier-0 case on a ``(real, integer)`` key).  Those values go through the
    session's conf for the call; every other option stays in the literal, and a path a literal cannot
    hold is still refused by name."""
    key = ("k0_real", "k1_integer")
    spec = _spec(index=IndexType.BUCKET, table_type=TableType.MERGE_ON_READ, record_key_fields=key)
    literal, session = services._options(spec)
    assert session == {
        "hoodie.bucket.index.hash.field": "k0_real,k1_integer",
        "hoodie.datasource.write.recordkey.field": "k0_real,k1_integer",
    }
    entries = dict(entry.split("=", 1) for entry in literal.split(","))
    assert entries == {k: v for k, v in table_service_options(spec).items() if k not in session}
    with pytest.raises(LakeWriteError, match="path 'a,b' holds ','"):
        services._literal(spec.table_name, "path", "a,b", services._PATH_UNSAFE)
