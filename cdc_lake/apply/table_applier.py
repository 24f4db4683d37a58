"""Applying one table's Kafka backlog to its Hudi table, one batch (one Hudi commit) at a time.

A batch: resume from the offsets of the last completed commit, plan a capped range up to the end offsets
seen now, read and decode it on the executors, stop each partition before its first bad message, merge
the writer schemas into the lake columns, keep the last change per key, fill unavailable columns, and
write upserts and deletes with the new offsets in one commit.  A batch of at most :data:`DRIVER_BATCH`
offsets comes back to the driver decoded: its last change per key is taken there in plain Python and
enters Spark one row per key (no Window job); a larger one stays on the executors for Spark's merge.
Bad messages do not raise: the batch commits what precedes them and reports the first one, so the
caller can stop the table with its name.  Before reading, the plan refuses a topic the applier cannot
order (:mod:`cdc_lake.kafka.topic_rules`): a compacted one (:func:`cdc_lake.apply.plan.plan_batch`), or
one with several partitions for a table whose configured key is not its message key (the primary key,
read from the registry's ``<topic>-key`` subject only for such a table).  For a table with a configured
key, the source is asked before each batch that reads something whether an update may lack the key's
old value (:mod:`cdc_lake.apply.key_change`; one catalog query on a Postgres primary, none elsewhere).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import reduce

from pyspark import RDD, StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from cdc_lake.apply.decoding import (
    BadMessage,
    BatchSummary,
    Decoded,
    DecodedChange,
    DecodeSettings,
    decode_messages,
    summarize,
)
from cdc_lake.apply.frame import fill_from_lake, lake_frame, latest_frame, one_row_per_key
from cdc_lake.apply.plan import BatchPlan, plan_batch
from cdc_lake.apply.redelivery import advance
from cdc_lake.apply.skipped import quarantined_below, skipped_offsets, without_quarantined
from cdc_lake.decode.framing import MessageRef
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.decode.schema import TypedSchemas
from cdc_lake.exceptions import CdcLakeError, KafkaReadError, LakeWriteError, SchemaRegistryError
from cdc_lake.kafka.board import OffsetBoard
from cdc_lake.kafka.group_offsets import commit_group_offsets
from cdc_lake.kafka.offsets import topic_state
from cdc_lake.kafka.reader import KafkaReader, KafkaReadSettings, read_ranges_in_spark, split_ranges
from cdc_lake.kafka.topic_rules import applier_way_out, partitioning_refusal
from cdc_lake.lake.checkpoint import Checkpoint, Origin, resume_checkpoint
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.format import WriteOperation, load_format
from cdc_lake.lake.schema import merge_columns, row_columns
from cdc_lake.lake.schema_change import (
    IncompatibleSchemaChange,
    SchemaDiff,
    SourceDefaults,
    WriterColumns,
    classify,
    key_change,
    policy_columns,
    widest_lengths,
)
from cdc_lake.lake.target import TableTarget
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)

DRIVER_BATCH = 10_000
"""Batches of at most this many offsets are decoded in one Spark job that returns the records to the
driver: the summary and the last change per key are made there and the rows enter Spark as one local
DataFrame, one per key, so no RDD of pickled records is persisted, no Window job runs and the write's
jobs run no Python worker.  Larger batches stay on the executors
(a batch may hold up to ``apply.batch_max_events`` changes, too many for the driver's memory)."""


@dataclass(frozen=True)
class ApplierOptions:
    """How batches are read: Kafka client settings, the batch cap, the reader, and how many slices."""

    kafka: KafkaReadSettings
    max_events: int
    source_defaults: Callable[[str, Sequence[str]], SourceDefaults]
    """Asks a table's source for the defaults of columns a writer schema adds without an Avro default
    (:class:`cdc_lake.apply.source_defaults.SourceCatalog`).  Required: an applier that could not ask
    would evolve such a column with NULLs where the source holds its default."""
    reader: KafkaReader = KafkaReader.CONSUMER
    slices: int = 4
    board: OffsetBoard | None = None
    old_key_optional: Callable[[TableTarget], bool] | None = None
    """Asks a configured-key table's source whether an update may lack the key's old value
    (:meth:`cdc_lake.apply.source_defaults.SourceCatalog.old_key_optional`); None: never."""
    """Where batch plans take end offsets from (the ``run`` service's batched reads); None: read alone."""


@dataclass(frozen=True)
class StoppedAt:
    """The first message of a batch that could not be applied."""

    partition: int
    offset: int
    reason: str


@dataclass(frozen=True)
class BatchResult:
    """What one batch did.  ``bad`` is the first message it could not apply (the table must stop)."""

    table: str
    topic: str
    start: dict[int, int]
    end: dict[int, int]
    high: dict[int, int]
    changes: int = 0
    commit_instant: str | None = None
    newest_source_ts_ms: int | None = None
    bad: StoppedAt | None = None
    seconds: float = 0.0
    ops: dict[str, int] = field(default_factory=dict)
    redelivered: int = 0
    steps: dict[str, float] = field(default_factory=dict)
    """Wall seconds of the batch's steps in order (``plan``, ``decode``, ``schema``, ``frame``, ``write``,
    ``offsets``); ``write`` is the Hudi write and commit, with the Spark jobs that build its rows."""

    @property
    def offsets(self) -> int:
        """How many offsets the batch consumed."""
        return sum(self.end[p] - self.start.get(p, 0) for p in self.end)

    @property
    def lag_messages(self) -> int:
        """Offsets between the batch's end and the high watermarks seen at its start."""
        return sum(max(0, self.high[p] - self.end.get(p, 0)) for p in self.high)

    def error(self) -> str | None:
        """The one-line cause naming topic, partition and offset, when the batch stopped at a bad message."""
        if self.bad is None:
            return None
        return f"{MessageRef(self.topic, self.bad.partition, self.bad.offset)}: {self.bad.reason}"


def use_driver_python(spark: SparkSession) -> None:
    """In local mode, run the Python workers with the driver's interpreter (which has cdc_lake installed).

    PySpark takes the workers' interpreter from ``PYSPARK_PYTHON`` (default ``python3`` on the PATH) when
    it creates the context, not from ``spark.pyspark.python``; a virtualenv's packages would be missing.
    On a cluster, ``PYSPARK_PYTHON`` must name an interpreter with cdc-lake installed.
    """
    context = spark.sparkContext
    if (context.master or "").startswith("local") and "PYSPARK_PYTHON" not in os.environ:
        context.pythonExec = sys.executable


class TableApplier:
    """Applies one table; not thread-safe (one batch at a time), but many appliers share one session."""

    def __init__(
        self,
        spark: SparkSession,
        target: TableTarget,
        options: ApplierOptions,
        registry: SchemaRegistry,
        store: StateStore | None = None,
    ) -> None:
        self.spark = spark
        use_driver_python(spark)
        self.lake = load_format(spark)
        self.target = target
        self.options = options
        self.registry = registry
        self.schemas = TypedSchemas(registry, dict(target.column_types))
        self.store = store
        self._checkpoint: Checkpoint | None = None
        self._seen_commit: str | None = None
        self._columns: StructType | None = None
        self._lengths: dict[str, int] = {}
        """The character lengths the latest commit records (read with the checkpoint)."""
        self._record_key: tuple[str, ...] | None = None
        self._exists = False
        self.schema_change: SchemaDiff | None = None
        """The breaking schema change the last batch stopped at, if it stopped at one."""
        self._source_answers: dict[int, SourceDefaults] = {}
        """The source's answer about the columns each writer schema id adds (asked once per schema id)."""
        self._message_key: tuple[str, ...] | None = None
        """The topic's message key columns (the primary key; empty: none), once a check needed them."""

    @property
    def lake_columns(self) -> StructType | None:
        """The lake table's row columns as of the last batch (None before the table is known)."""
        return self._columns

    def forget(self) -> None:
        """Drop cached offsets and schema: the next batch re-reads them from the table (after a failure)."""
        self._checkpoint = None
        self._seen_commit = None
        self._columns = None
        self._record_key = None
        self._exists = False
        self._message_key = None

    def checkpoint(self) -> Checkpoint:
        """The offsets the next batch starts from (read from the last completed commit, then cached)."""
        if self._checkpoint is None:
            commit = self.lake.latest_commit(self.target.base_path)
            self._checkpoint = resume_checkpoint(
                self.target.base_path, self.target.topic, self.target.qualified_name, self.store, commit
            )
            self._seen_commit = None if commit is None else commit.instant
            stored = None if commit is None else CommitMetadata.from_dict(commit.metadata)
            self._lengths = {} if stored is None else dict(stored.char_lengths)
            _LOG.info(
                "%s resumes from %s %s", self.target.qualified_name, self._checkpoint.origin.value,
                self._checkpoint.offsets,
            )
        return self._checkpoint

    def _still_current(self) -> bool:
        """Whether the table's latest data commit is still the one the cached checkpoint came from.

        Another process may have committed since (``apply --once`` between two batches of ``run``, each
        holding the apply lock only for its batch): planning from the cached offsets would then apply a
        range twice and move the commit offsets backwards.  Called under the apply lock, before a batch
        that has something to read; the cache is dropped when the table moved on.
        """
        if self._checkpoint is None:
            return False
        commit = self.lake.latest_commit(self.target.base_path)
        instant = None if commit is None else commit.instant
        if instant == self._seen_commit:
            return True
        _LOG.info(
            "%s: another writer committed %s since %s; re-reading the checkpoint",
            self.target.qualified_name, instant, self._seen_commit,
        )
        self.forget()
        return False

    def plan(self, limit: dict[int, int] | None = None) -> BatchPlan:
        """The next batch's offsets: from the checkpoint to the end offsets now (or ``limit``), capped."""
        board = self.options.board
        now = (
            board.state(self.target.topic)
            if board is not None
            else topic_state(
                self.options.kafka.bootstrap_servers, self.target.topic, extra=self.options.kafka.consumer
            )
        )
        self._refuse_partitioning(len(now.marks))
        return plan_batch(self.target.qualified_name, self.checkpoint(), now, self.options.max_events, limit)

    def _refuse_partitioning(self, partitions: int) -> None:
        """Raise when the topic has several partitions and the configured key is not the message key."""
        key = self.target.key_fields
        if partitions <= 1 or not key:
            return
        name, topic = self.target.qualified_name, self.target.topic
        refusal = partitioning_refusal(
            name, topic, partitions, key, self._message_key_fields(), applier_way_out(name)
        )
        if refusal is not None:
            raise KafkaReadError(refusal)

    def _message_key_fields(self) -> tuple[str, ...]:
        """The columns of the topic's latest key schema; empty when it has none (null keys)."""
        if self._message_key is None:
            subject = f"{self.target.topic}-key"
            try:
                schema_id = self.registry.latest(subject).schema_id
            except SchemaRegistryError as exc:
                if not str(exc).startswith(f"subject {subject!r} has no registered versions"):
                    raise
                self._message_key = ()
            else:
                self._message_key = tuple(self.schemas.get_schema(schema_id).row_converter.column_names)
        return self._message_key

    def apply_batch(
        self, limit: dict[int, int] | None = None, before_commit: Callable[[], None] | None = None
    ) -> BatchResult:
        """Apply the next batch; costs no Spark job when there is nothing new.

        ``before_commit`` runs right before the Hudi write that commits the batch and raises to keep it
        from committing: the runner re-checks there that it still holds the table's apply lock.
        """
        began = time.monotonic()
        steps = _Steps()
        self.schema_change = None
        checkpoint = self.checkpoint()
        plan = self.plan(limit)
        if plan.offsets > 0 and not self._still_current():
            checkpoint = self.checkpoint()
            plan = self.plan(limit)
        steps.done("plan")
        result = BatchResult(
            self.target.qualified_name, self.target.topic, dict(plan.start), dict(plan.end), dict(plan.high),
            newest_source_ts_ms=checkpoint.newest_source_ts_ms, steps=steps.seconds,
        )
        if plan.offsets > 0:
            result = self._apply(checkpoint, plan, result, before_commit, steps)
        return replace(result, seconds=time.monotonic() - began)

    def replay(
        self, changes: Sequence[DecodedChange], topic_id: str | None, before_commit: Callable[[], None]
    ) -> BatchResult:
        """Write quarantined ``changes`` (offsets below the checkpoint) as one commit, at their own
        ordering values; the commit keeps the checkpoint's offsets and re-send marks
        (:func:`cdc_lake.apply.quarantine.replay`).  A schema the lake cannot follow sets ``bad``."""
        self.forget()
        checkpoint = self.checkpoint()
        start = {c.partition: c.offset for c in changes}
        end = {c.partition: c.offset + 1 for c in changes}
        plan = BatchPlan(self.target.topic, start, end, dict(end), topic_id, replay=True)
        result = BatchResult(self.target.qualified_name, self.target.topic, start, end, dict(end))
        records: list[Decoded] = list(changes)
        summary = next(summarize(records))
        return self._write(checkpoint, plan, result, before_commit, _Steps(), summary, records, frozenset())

    def _apply(
        self,
        checkpoint: Checkpoint,
        plan: BatchPlan,
        result: BatchResult,
        before_commit: Callable[[], None] | None,
        steps: _Steps,
    ) -> BatchResult:
        ask = self.options.old_key_optional
        settings = DecodeSettings(
            self.target.topic, self.registry, self.target.key_fields, self.target.soft_deletes,
            dict(checkpoint.positions), dict(self.target.column_types),
            old_key_optional=bool(self.target.key_fields) and ask is not None and ask(self.target),
        )
        slices = split_ranges(plan.ranges, self.options.slices)
        raw = read_ranges_in_spark(self.spark, self.options.kafka, slices, self.options.reader)
        name, topic = self.target.qualified_name, self.target.topic
        skipped = skipped_offsets(self.store, name, topic, plan.start, plan.end, plan.topic_id)
        raw = without_quarantined(raw, skipped)
        decoded = raw.mapPartitions(lambda messages: decode_messages(settings, messages))
        with decoded_batch(decoded, plan.offsets) as (summary, records):
            steps.done("decode")
            return self._write(checkpoint, plan, result, before_commit, steps, summary, records, skipped)

    def _write(
        self,
        checkpoint: Checkpoint,
        plan: BatchPlan,
        result: BatchResult,
        before_commit: Callable[[], None] | None,
        steps: _Steps,
        summary: BatchSummary,
        records: RDD[Decoded] | list[Decoded],
        skipped: frozenset[tuple[int, int]],
    ) -> BatchResult:
        """Cut the batch before its first bad message and write the rest as one commit."""
        bad = dict(summary.first_bad)
        self._refresh_lake()
        columns, lengths = self._merge_schemas(summary, bad)
        key_fields = self._key_fields(summary, bad)
        cut = {p: b.offset for p, b in bad.items()}
        end = {p: min(plan.end[p], cut.get(p, plan.end[p])) for p in plan.end}
        first = min(bad.values(), key=lambda b: (b.offset, b.partition)) if bad else None
        first_bad = None if first is None else StoppedAt(first.partition, first.offset, first.reason)
        result = replace(result, end=end, bad=first_bad, ops=dict(summary.ops))
        if end == plan.start:
            return result
        if columns is None or key_fields is None or not (self._exists or _any_change(summary, cut)):
            # Only tombstones, into a table that does not exist yet: nothing to create it with.
            return replace(result, end=dict(plan.start))
        applied = summary if not cut else summary_before(records, cut)
        steps.done("schema")
        newest = max(
            (t for t in (applied.newest_source_ts_ms, checkpoint.newest_source_ts_ms) if t is not None),
            default=None,
        )
        fill = sorted(name for name in summary.unavailable if name in columns.fieldNames())
        stored = self.lake.read(self.target.base_path) if fill and self._exists else None
        latest = latest_frame(self.spark, records, columns, cut, key_fields, fill, summary.moves_unavailable)
        unique = one_row_per_key(columns, key_fields, stored)
        if stored is not None:
            latest = fill_from_lake(latest, stored, key_fields, fill)
        # Hudi's upsert reads its input several times (emptiness check, index tagging, write): keep the
        # rows it gets instead of computing them (the per-key merge of a large batch, the fill) again.
        frame = lake_frame(latest, columns, dt.datetime.now(tz=dt.UTC), self.target.soft_deletes)
        frame.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            positions = advance(checkpoint.positions, applied.marks)
            offsets = dict(checkpoint.offsets) if plan.replay else {**checkpoint.offsets, **end}
            after = Checkpoint(
                self.target.topic, offsets, newest, Origin.COMMIT, positions=positions, topic_id=plan.topic_id
            )
            spec = self.target.spec(key_fields)
            metadata = replace(
                after.metadata(), quarantined=quarantined_below(skipped, end),
                compared_columns=self._compared(columns), char_lengths=lengths,
            )
            steps.done("frame")
            if before_commit is not None:
                before_commit()
            # Planning has just read the latest commit (``_still_current``): the write reads it only after.
            instant = self.lake.write(
                spec, frame, WriteOperation.UPSERT, metadata, previous=self._seen_commit,
                unique_keys=unique,
            )
        finally:
            frame.unpersist()
        steps.done("write")
        topic = self.target.topic
        commit_group_offsets(self.options.kafka, spec.name, spec.base_path, topic, after.offsets)
        steps.done("offsets")
        _LOG.debug(
            "%s: %d offsets, commit %s; seconds per step %s", self.target.qualified_name, plan.offsets,
            instant, {name: round(seconds, 3) for name, seconds in steps.seconds.items()},
        )
        self._checkpoint = replace(after, commit_instant=instant)
        self._seen_commit = instant
        self._columns = columns
        self._lengths = lengths
        self._record_key = key_fields
        self._exists = True
        return replace(
            result, commit_instant=instant, newest_source_ts_ms=newest, changes=applied.changes,
            redelivered=applied.redelivered,
        )

    def _refresh_lake(self) -> None:
        """Learn the lake table's columns; a table whose first commit never completed has none yet.

        A table an earlier cdc-lake bootstrapped through Hudi's row writer with a timestamp or binary key
        holds record keys the applier never writes (the format's ``key_refusal``): it stops here, naming
        the way out, instead of gaining a second row per key.
        """
        if self._columns is None and self.lake.table_exists(self.target.base_path):
            lake = self.lake.read(self.target.base_path, meta_columns=True)
            columns = row_columns(lake.schema)
            if columns.fields:
                record_key = self.lake.record_key_fields(self.target.base_path)
                refusal = self.lake.key_refusal(self.target.qualified_name, lake, record_key or ())
                if refusal is not None:
                    raise LakeWriteError(refusal)
                self._columns = columns
                self._record_key = record_key
                self._exists = True

    def _merge_schemas(
        self, summary: BatchSummary, bad: dict[int, BadMessage]
    ) -> tuple[StructType | None, dict[str, int]]:
        """The lake columns and recorded character lengths after this batch; a schema that cannot be
        merged cuts the batch before it."""
        columns, lengths = self._columns, self._lengths
        for schema_id in sorted(summary.value_schemas):
            firsts = _before_cut(summary.value_schemas[schema_id], bad)
            if not firsts:
                continue
            try:
                writer = self._restricted_writer(schema_id)
                self._classify(schema_id, writer, lengths)
                evolution = merge_columns(columns, writer.struct)
                if evolution.added and columns is not None:
                    _LOG.info("%s: schema id %d adds columns %s", self.target.qualified_name, schema_id,
                              list(evolution.added))
                columns = evolution.columns
                lengths = widest_lengths(lengths, writer.lengths)
            except CdcLakeError as exc:
                _cut(bad, firsts, f"value schema id {schema_id}: {exc}")
        return columns, lengths

    def _restricted_writer(self, schema_id: int) -> WriterColumns:
        """The writer schema's columns the table's policy compares and writes (frozen list, freeze)."""
        writer = WriterColumns.of(self.schemas.get_schema(schema_id))
        keep = self._compared(self._columns)
        return writer if keep is None else writer.restricted(keep)

    def _compared(self, lake: StructType | None) -> frozenset[str] | None:
        """The columns the table's policy compares and writes (None: every column)."""
        return policy_columns(
            self.target.schema_policy, self.target.columns, self.target.key_fields or (), lake
        )

    def _copied(self, lake: StructType) -> frozenset[str] | None:
        """The columns the lake was copied and applied with, when not every column: under a frozen list
        its columns (a listed column it lacks was never copied), else what its latest commit recorded
        (a table applied under ``freeze`` or a frozen list before the config changed)."""
        if self.target.columns:
            return frozenset(lake.fieldNames())
        commit = self.lake.latest_commit(self.target.base_path)
        return None if commit is None else CommitMetadata.from_dict(commit.metadata).compared_columns

    def _classify(self, schema_id: int, writer: WriterColumns, lengths: dict[str, int]) -> None:
        """Stop before a writer schema the lake table cannot follow (columns versions older than the lake's
        lack are fine; the subject's history is read only when something would stop the table);
        ``lengths``: the character lengths the lake holds values of so far."""
        if self._columns is None:
            return
        lake = self._columns
        new = set(writer.struct.fieldNames()) - set(lake.fieldNames())
        diff = classify(
            schema_id, lake, writer, table=self.target.qualified_name,
            partition_fields=self.target.partition_fields, copied=self._copied(lake) if new else None,
            lengths=lengths,
        )
        if diff.added():
            diff = diff.with_source_defaults(self._source_defaults(schema_id, diff.added()))
        if diff.breaking:
            versions = self.registry.versions(f"{self.target.topic}-value")
            history = [(v.schema_id, self._restricted_writer(v.schema_id)) for v in versions]
            diff = diff.without_older_version_gaps(history, lake, lengths)
        if diff.breaking:
            self.schema_change = diff
            raise IncompatibleSchemaChange(diff)

    def _source_defaults(self, schema_id: int, added: tuple[str, ...]) -> SourceDefaults:
        """What the source says of the columns writer schema ``schema_id`` adds without an Avro default:
        an answer naming every column is kept for the schema id; a failure, or a column the catalog lacks
        (the replica may catch up), is asked again on the next batch."""
        known = self._source_answers.get(schema_id)
        if known is not None:
            return known
        answer = self.options.source_defaults(self.target.qualified_name, added)
        if answer.error is None and set(added) <= set(answer.defaults):
            self._source_answers[schema_id] = answer
        return answer

    def _key_fields(self, summary: BatchSummary, bad: dict[int, BadMessage]) -> tuple[str, ...] | None:
        if self.target.key_fields:
            return self.target.key_fields
        chosen = self._record_key
        for schema_id in sorted(summary.key_schemas):
            firsts = _before_cut(summary.key_schemas[schema_id], bad)
            if not firsts:
                continue
            try:
                names = tuple(self.schemas.get_schema(schema_id).row_converter.column_names)
            except CdcLakeError as exc:
                _cut(bad, firsts, f"key schema id {schema_id}: {exc}")
                continue
            if chosen is None:
                chosen = names
            elif names != chosen:
                diff = key_change(schema_id, chosen, names, table=self.target.qualified_name)
                self.schema_change = diff
                _cut(bad, firsts, diff.summary())
        return chosen


class _Steps:
    """Wall seconds per named step of one batch, each from the end of the previous one (perf_counter)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._mark = time.perf_counter()

    def done(self, name: str) -> None:
        """Close step ``name`` now."""
        now = time.perf_counter()
        self.seconds[name] = now - self._mark
        self._mark = now


def _before_cut(firsts: dict[int, int], bad: dict[int, BadMessage]) -> dict[int, int]:
    """The first offsets (per partition) that lie before each partition's cut."""
    return {p: o for p, o in firsts.items() if p not in bad or o < bad[p].offset}


def _cut(bad: dict[int, BadMessage], firsts: dict[int, int], reason: str) -> None:
    """Stop each partition at its first message in ``firsts``, with ``reason``."""
    for partition, offset in firsts.items():
        known = bad.get(partition)
        if known is None or offset < known.offset:
            bad[partition] = BadMessage(partition, offset, reason, None, None)


def _any_change(summary: BatchSummary, cut: dict[int, int]) -> bool:
    """Whether any change event lies before the cuts."""
    return any(
        p not in cut or o < cut[p] for firsts in summary.value_schemas.values() for p, o in firsts.items()
    )


@contextmanager
def decoded_batch(
    decoded: RDD[Decoded], offsets: int
) -> Iterator[tuple[BatchSummary, RDD[Decoded] | list[Decoded]]]:
    """The batch's summary and its decoded records: on the driver for a batch of at most
    :data:`DRIVER_BATCH` offsets (one Spark job), else the RDD, persisted while the block runs."""
    if offsets <= DRIVER_BATCH:
        records = decoded.collect()
        yield next(summarize(records)), records
        return
    decoded.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield reduce(BatchSummary.merge, decoded.mapPartitions(summarize).collect(), BatchSummary()), decoded
    finally:
        decoded.unpersist()


def summary_before(records: RDD[Decoded] | list[Decoded], cut: dict[int, int]) -> BatchSummary:
    """The summary of the records before the cuts: what a batch stopped at a bad message applies."""

    def wanted(record: Decoded) -> bool:
        return record.offset < cut.get(record.partition, record.offset + 1)

    if isinstance(records, list):
        return next(summarize(filter(wanted, records)))
    summaries = records.filter(wanted).mapPartitions(summarize).collect()
    return reduce(BatchSummary.merge, summaries, BatchSummary())
