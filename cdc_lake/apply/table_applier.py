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
What the applier knows of its lake table between batches (checkpoint, columns, record key) is cached in
:mod:`cdc_lake.apply.lake_state`; the writer schemas are merged into the lake columns by
:mod:`cdc_lake.apply.schema_merge`.
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
    marks_below,
    summarize,
)
from cdc_lake.apply.frame import fill_from_lake, lake_frame, latest_frame, one_row_per_key
from cdc_lake.apply.key_change import key_update_cuts
from cdc_lake.apply.lake_state import LakeState
from cdc_lake.apply.plan import BatchPlan, plan_batch
from cdc_lake.apply.redelivery import advance
from cdc_lake.apply.repair import Repairing, remove_first, snapshot_changes
from cdc_lake.apply.schema_merge import SchemaMerge
from cdc_lake.apply.skipped import quarantined_below, skipped_offsets, without_quarantined
from cdc_lake.decode.framing import MessageRef
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.decode.schema import TypedSchemas
from cdc_lake.exceptions import KafkaReadError, SchemaRegistryError
from cdc_lake.kafka.board import OffsetBoard
from cdc_lake.kafka.group_offsets import commit_group_offsets
from cdc_lake.kafka.offsets import OffsetRange, TopicState, topic_state
from cdc_lake.kafka.reader import (
    KafkaReader,
    KafkaReadSettings,
    RawMessage,
    iter_range,
    read_ranges_in_spark,
    split_ranges,
)
from cdc_lake.kafka.topic_rules import applier_way_out, partitioning_refusal
from cdc_lake.lake.applier import RepairRows
from cdc_lake.lake.checkpoint import Checkpoint, Origin
from cdc_lake.lake.format import UNREAD, Unread, WriteOperation, load_format
from cdc_lake.lake.schema_change import SchemaDiff, SourceDefaults
from cdc_lake.lake.target import TableTarget
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)

_MARK_WINDOW = 500
"""How many messages below a checkpoint without re-send marks are read for one."""

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
    """Where batch plans take end offsets from (the ``run`` service's batched reads); None: read alone."""
    old_key_optional: Callable[[TableTarget], bool] | None = None
    """Asks a configured-key table's source whether an update may lack the key's old value
    (:meth:`cdc_lake.apply.source_defaults.SourceCatalog.old_key_optional`); None: never."""


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
    held: frozenset[int] = frozenset()
    """The partitions the batch was cut back in to a primary-key update's half whose other half it lacks
    (:func:`cdc_lake.apply.key_change.key_update_cuts`): the next batch starts there."""

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
        self.lake = load_format(spark, target.lake_format)
        self.target = target
        self.options = options
        self.registry = registry
        self.schemas = TypedSchemas(registry, dict(target.column_types))
        self.store = store
        self._table = LakeState(self.lake, target, store)
        self._merge = SchemaMerge(target, registry, self.schemas, self.lake, options.source_defaults)
        self._message_key: tuple[str, ...] | None = None
        """The topic's message key columns (the primary key; empty: none), once a check needed them."""

    @property
    def lake_columns(self) -> StructType | None:
        """The lake table's row columns as of the last batch (None before the table is known)."""
        return self._table.columns

    @property
    def schema_change(self) -> SchemaDiff | None:
        """The breaking schema change the last batch stopped at, if it stopped at one."""
        return self._merge.schema_change

    def forget(self) -> None:
        """Drop cached offsets and schema: the next batch re-reads them from the table (after a failure)."""
        self._table.forget()
        self._message_key = None

    def checkpoint(self) -> Checkpoint:
        """The offsets the next batch starts from (read from the last completed commit, then cached)."""
        return self._table.checkpoint()

    def plan(self, limit: dict[int, int] | None = None, *, capped: bool = True) -> BatchPlan:
        """The next batch's offsets: from the checkpoint to the end offsets now (or ``limit``), capped by
        ``apply.batch_max_events`` unless not ``capped``."""
        board, kafka, topic = self.options.board, self.options.kafka, self.target.topic
        if board is not None:
            now = board.state(topic)
        else:
            now = topic_state(kafka.bootstrap_servers, topic, extra=kafka.consumer)
        self._refuse_partitioning(len(now.marks))
        most, checkpoint = self.options.max_events if capped else sys.maxsize, self.checkpoint()
        name, restart = self.target.qualified_name, _restart(self.store, self.target, checkpoint, now)
        return plan_batch(name, checkpoint, now, most, limit, restart)

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
        self._merge.schema_change = None
        checkpoint = self.checkpoint()
        plan = self.plan(limit)
        if plan.offsets > 0 and not self._table.still_current():
            self.forget()
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

    def repair(
        self, repair: RepairRows, before_commit: Callable[[], None], before_removal: Callable[[int], object]
    ) -> BatchResult:
        """One uncapped batch to ``repair.end`` with the rows read first (:mod:`cdc_lake.apply.repair`)."""
        began, steps = time.monotonic(), _Steps()
        self.forget()
        self._merge.schema_change = None
        checkpoint = self.checkpoint()
        plan = self.plan(dict(repair.end), capped=False)
        steps.done("plan")
        result = BatchResult(
            self.target.qualified_name, self.target.topic, dict(plan.start), dict(plan.end), dict(plan.high),
            newest_source_ts_ms=checkpoint.newest_source_ts_ms, steps=steps.seconds,
        )
        repairing = (repair, before_removal)
        if plan.offsets > 0:
            done = self._apply(checkpoint, plan, result, before_commit, steps, repairing)
        else:  # nothing new in Kafka: the rows read alone
            no: list[Decoded] = []
            summary = BatchSummary()
            done = self._write(checkpoint, plan, result, before_commit, steps, summary, no, _NONE, repairing)
        return replace(done, seconds=time.monotonic() - began)

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

    def _marks_below(
        self, checkpoint: Checkpoint, plan: BatchPlan, settings: DecodeSettings
    ) -> dict[int, str]:
        """Re-send marks for the partitions the checkpoint has read past without a mark (a bootstrap's
        hand-off, an earlier version's commit), from their last :data:`_MARK_WINDOW` messages below it
        (:func:`cdc_lake.apply.decoding.marks_below`); none where those were deleted by retention, nor
        where the batch is a recapture's first (``plan.fresh``: the messages below are the old primary's)."""
        name, topic = self.target.qualified_name, self.target.topic
        wanted = {
            p: OffsetRange(topic, p, max(0, start - _MARK_WINDOW), start)
            for p, start in plan.start.items()
            if start > 0 and p not in checkpoint.positions and p not in plan.fresh
        }
        if not wanted:
            return {}
        low = {p: r.start for p, r in wanted.items()}
        quarantined = skipped_offsets(self.store, name, topic, low, plan.start, plan.topic_id)
        messages: list[RawMessage] = []
        for wanted_range in wanted.values():
            try:
                messages.extend(
                    m for m in iter_range(self.options.kafka, wanted_range)
                    if (m.partition, m.offset) not in quarantined
                )
            except KafkaReadError as exc:
                _LOG.info("%s: no re-send mark below offset %d of %s: %s", name, wanted_range.end, topic, exc)
        seeded = marks_below(settings, messages)
        for partition, mark in sorted(seeded.items()):
            _LOG.info("%s: re-send mark %s from the messages below offset %d of %s partition %d",
                      name, mark, plan.start[partition], topic, partition)
        return seeded

    def _apply(
        self,
        checkpoint: Checkpoint,
        plan: BatchPlan,
        result: BatchResult,
        before_commit: Callable[[], None] | None,
        steps: _Steps,
        repair: Repairing | None = None,
    ) -> BatchResult:
        ask = self.options.old_key_optional
        checkpoint = _without_old_marks(checkpoint, plan)
        settings = DecodeSettings(
            self.target.topic, self.registry, self.target.key_fields, self.target.soft_deletes,
            dict(checkpoint.positions), dict(self.target.column_types),
            old_key_optional=bool(self.target.key_fields) and ask is not None and ask(self.target),
            lake_format=self.target.lake_format,
        )
        seeded = self._marks_below(checkpoint, plan, settings)
        if seeded:
            checkpoint = replace(checkpoint, positions={**checkpoint.positions, **seeded})
            settings = replace(settings, applied_positions=dict(checkpoint.positions))
        slices = split_ranges(plan.ranges, self.options.slices)
        raw = read_ranges_in_spark(self.spark, self.options.kafka, slices, self.options.reader)
        name, topic = self.target.qualified_name, self.target.topic
        skipped = skipped_offsets(self.store, name, topic, plan.start, plan.end, plan.topic_id)
        raw = without_quarantined(raw, skipped)
        decoded = raw.mapPartitions(lambda messages: decode_messages(settings, messages))
        with decoded_batch(decoded, plan.offsets) as (summary, records):
            steps.done("decode")
            return self._write(
                checkpoint, plan, result, before_commit, steps, summary, records, skipped, repair
            )

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
        repair: Repairing | None = None,
    ) -> BatchResult:
        """Cut the batch before its first bad message and write the rest as one commit (a repair: the rows
        read first, and the removal before)."""
        bad = dict(summary.first_bad)
        self._table.refresh()
        columns, lengths = self._merge.columns(summary, bad, self._table.columns, self._table.lengths)
        key_fields = self._merge.key_fields(summary, bad, self._table.record_key)
        cut, held = _key_update_cuts(self.target, summary, plan, bad, repair)
        end = {p: min(plan.end[p], cut.get(p, plan.end[p])) for p in plan.end}
        first = min(bad.values(), key=lambda b: (b.offset, b.partition)) if bad else None
        first_bad = None if first is None else StoppedAt(first.partition, first.offset, first.reason)
        result = replace(result, end=end, bad=first_bad, ops=dict(summary.ops), held=held)
        if end == plan.start and repair is None:
            return result
        if repair is not None:
            records = _with_rows_read(self.spark, records, repair[0], min(plan.end, default=0))
        if columns is None or key_fields is None or not (self._table.exists or _any_change(summary, cut)):
            # Only tombstones, into a table that does not exist yet: nothing to create it with.
            return replace(result, end=dict(plan.start))
        applied = summary if not cut else summary_before(records, cut)
        steps.done("schema")
        newest = max(
            (t for t in (applied.newest_source_ts_ms, checkpoint.newest_source_ts_ms) if t is not None),
            default=None,
        )
        fill = sorted(name for name in summary.unavailable if name in columns.fieldNames())
        wanted = (fill or repair is not None) and self._table.exists
        stored = self.lake.read(self.target.base_path) if wanted else None
        lake_format = self.target.lake_format
        moves = summary.moves_unavailable
        latest = latest_frame(self.spark, records, columns, cut, key_fields, fill, moves, lake_format)
        unique = one_row_per_key(columns, key_fields, stored)
        if stored is not None:
            latest = fill_from_lake(latest, stored, key_fields, fill, lake_format)
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
            spec = self._table.spec(key_fields)
            metadata = replace(
                after.metadata(), quarantined=quarantined_below(skipped, end),
                compared_columns=self._merge.compared(columns), char_lengths=lengths,
            )
            steps.done("frame")
            if before_commit is not None:
                before_commit()
            # Planning has just read the latest commit (``still_current``): the write reads it only after.
            previous: str | Unread | None = self._table.seen_commit
            if repair is not None and stored is not None:
                kept = replace(checkpoint.metadata(), compared_columns=metadata.compared_columns,
                               char_lengths=metadata.char_lengths)
                args = (spec, stored, frame, repair, kept, previous, before_commit, lake_format)
                previous = UNREAD if remove_first(self.lake, *args) else previous
            instant = self.lake.write(
                spec, frame, WriteOperation.UPSERT, metadata, previous=previous, unique_keys=unique,
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
        self._table.committed(after, instant, columns, lengths, key_fields)
        return replace(
            result, commit_instant=instant, newest_source_ts_ms=newest, changes=applied.changes,
            redelivered=applied.redelivered,
        )


def _key_update_cuts(
    target: TableTarget,
    summary: BatchSummary,
    plan: BatchPlan,
    bad: dict[int, BadMessage],
    repair: Repairing | None,
) -> tuple[dict[int, int], frozenset[int]]:
    """The batch's cuts: at its ``bad`` messages, lowered so that each primary-key update's halves are
    applied in one batch (:func:`cdc_lake.apply.key_change.key_update_cuts`), and the partitions lowered,
    logging what it holds back or applies alone; not lowered for a quarantine replay or a repair's batch."""
    cut = {p: message.offset for p, message in bad.items()}
    if not summary.key_updates or plan.replay or repair is not None:
        return cut, frozenset()
    name, topic = target.qualified_name, target.topic
    lowered, alone = key_update_cuts(summary.key_updates, plan.start, cut)
    held = frozenset(p for p, offset in lowered.items() if offset < cut.get(p, plan.end[p]))
    for partition in sorted(held):
        _LOG.info(
            "%s: %s partition %d held from offset %d to the next batch: a primary-key update's other half "
            "is not in this one", name, topic, partition, lowered[partition],
        )
    for half in alone:
        _LOG.warning(
            "%s: %s partition %d offset %d: a primary-key update's %s is applied without its %s, which "
            "is not in the batch; an unchanged TOASTed value of the moved row may be written null "
            "(cdc-lake validate finds it, cdc-lake repair fixes it)", name, topic, half.partition,
            half.offset, *(("delete", "create") if half.op == "d" else ("create", "delete")),
        )
    return lowered, held


_NONE: frozenset[tuple[int, int]] = frozenset()
"""No quarantined offsets."""


def _restart(
    store: StateStore | None, target: TableTarget, checkpoint: Checkpoint, now: TopicState
) -> dict[int, int] | None:
    """Where a recaptured table's new capture begins in its topic (:mod:`cdc_lake.state.recaptures`).
    The state store is asked only when the topic holds something to read: an idle table's poll stays
    free of it (nothing is planned, so there is nothing to cap)."""
    pending = any(high > checkpoint.offsets.get(p, 0) for p, (_, high) in now.marks.items())
    recapture = None if store is None or not pending else store.recapture(target.qualified_name)
    return None if recapture is None or recapture.topic != target.topic else recapture.offsets


def _without_old_marks(checkpoint: Checkpoint, plan: BatchPlan) -> Checkpoint:
    """The checkpoint without the re-send marks of the partitions where ``plan`` starts a recapture's
    messages (``plan.fresh``): the old primary's positions skip nothing of the new one's."""
    if not plan.fresh:
        return checkpoint
    kept = {p: mark for p, mark in checkpoint.positions.items() if p not in plan.fresh}
    return replace(checkpoint, positions=kept)


def _with_rows_read(
    spark: SparkSession, records: RDD[Decoded] | list[Decoded], repair: RepairRows, partition: int
) -> RDD[Decoded] | list[Decoded]:
    """The batch's records with the repair's rows read as snapshot records of ``partition``."""
    read: list[Decoded] = list(snapshot_changes(repair.rows, partition, repair.read_ms))
    if isinstance(records, list):
        return [*read, *records]
    return spark.sparkContext.parallelize(read, 1).union(records)


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
