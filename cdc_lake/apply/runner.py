"""Applying many tables concurrently in one Spark application, with lifecycle, offsets and freshness.

Each table has one :class:`TableApplier` (its batches run one at a time); tables run in a thread pool,
so their Spark jobs, Hudi commits and driver work overlap.  After every batch the state store gets the
applied offsets (a copy; the Hudi commit is the source of truth), the freshness (source commit time of
the newest applied change) and the lag in messages; a table that fails becomes FAILED with a one-line
cause and the others keep going.  Before each batch of a MySQL/MariaDB table, its connector's schema
history is checked for a swap of the source table (:mod:`cdc_lake.apply.swaps`), and of a Postgres table
its source's rewrite log (:mod:`cdc_lake.apply.rewrites`); both again right before the batch commits,
read then, so a change made after a swap or rewrite never commits; a swapped or rewritten table stops in
SCHEMA_CHANGED without applying the batch.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

from pyspark.sql import SparkSession

from cdc_lake import applier_metrics
from cdc_lake.apply.repair import interrupted_repair
from cdc_lake.apply.rewrites import RewriteCheck, RewriteSources
from cdc_lake.apply.source_defaults import SourceCatalog
from cdc_lake.apply.swaps import SwapCheck
from cdc_lake.apply.table_applier import ApplierOptions, BatchResult, TableApplier
from cdc_lake.catalog.sync import CatalogSync
from cdc_lake.config import Config
from cdc_lake.decode.registry import SchemaRegistry, registry_client
from cdc_lake.exceptions import ApplyError, CdcLakeError, SourceEngineError
from cdc_lake.kafka.offsets import end_offsets
from cdc_lake.kafka.reader import KafkaReader, KafkaReadSettings
from cdc_lake.lake.applier import BUSY, INTERRUPTED_REPAIR, RepairRows
from cdc_lake.lake.schema import row_columns
from cdc_lake.lake.schema_change import IncompatibleSchemaChange, SchemaDiff
from cdc_lake.lake.target import TableTarget
from cdc_lake.spark.errors import describe_failure
from cdc_lake.state.lifecycle import ALLOWED_TRANSITIONS, APPLIABLE_STATES, TableState
from cdc_lake.state.locks import HeldLock, LockPurpose, batch_lock, waited_table_lock
from cdc_lake.state.records import RunOutcome
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)

IDLE_MEASURE_SECONDS = 5.0
"""How often the freshness of a table with nothing new is recorded."""

REPAIR_LOCK_WAIT_SECONDS = 300.0
"""How long a repair waits for the table's apply lock (``run`` holds it for each batch, a re-bootstrap's
catch-up or an ``apply --once`` for theirs)."""
STOPPED = frozenset({TableState.FAILED, TableState.SCHEMA_CHANGED})
SCHEMA_CHANGE_RUN = "schema change"


class _SourceUnreachable(Exception):
    """The rewrite check could not ask the table's source (the batch waits for the next poll)."""


class SourceTableChanged(IncompatibleSchemaChange):
    """Raised before a batch's commit: its source table was swapped or rewritten since the check before
    the batch (the batch must not commit; the table stops in SCHEMA_CHANGED)."""


@dataclass(frozen=True)
class TableOutcome:
    """What applying one table did: batches, changes, where it stands, and why it stopped if it did."""

    table: str
    batches: int = 0
    changes: int = 0
    offsets: int = 0
    commit_instant: str | None = None
    lag_messages: int | None = None
    newest_source_ts_ms: int | None = None
    redelivered: int = 0
    error: str | None = None
    skipped: str | None = None
    held: frozenset[int] = frozenset()
    """The partitions its last batch was cut back in to a primary-key update's half (``BatchResult.held``)."""
    steps: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Wall seconds per step of its batches, summed, in the batch's order (``BatchResult.steps``): where
    the time went, ``run``'s line per table and ``--json`` show it."""

    @property
    def failed(self) -> bool:
        """True when the table stopped with an error."""
        return self.error is not None

    @classmethod
    def of_batch(cls, table: str, result: BatchResult, error: str | None) -> TableOutcome:
        """The outcome of one batch of ``table`` (``error``: why the table stopped there, if it did)."""
        return cls(
            table,
            batches=1 if result.offsets else 0,
            changes=result.changes,
            offsets=result.offsets,
            commit_instant=result.commit_instant,
            lag_messages=result.lag_messages,
            newest_source_ts_ms=result.newest_source_ts_ms,
            redelivered=result.redelivered,
            error=error,
            held=result.held,
            steps=dict(result.steps),
        )


def applier_options(
    config: Config, reader: KafkaReader = KafkaReader.CONSUMER, slices: int = 4
) -> ApplierOptions:
    """Batch options from the config's ``kafka`` and ``apply`` sections."""
    kafka = KafkaReadSettings.of(config.kafka)
    catalog = SourceCatalog(config)
    return ApplierOptions(
        kafka=kafka, max_events=config.apply.batch_max_events, reader=reader, slices=slices,
        source_defaults=catalog.defaults, old_key_optional=catalog.old_key_optional,
    )


def skip_reason(store: StateStore, target: TableTarget) -> str | None:
    """Why ``target`` is not applied now (not onboarded, or in a state the applier leaves alone)."""
    info = store.get_table(target.qualified_name)
    if info is None:
        return "not onboarded"
    if info.state not in APPLIABLE_STATES:
        return f"state {info.state.value}"
    if info.state is TableState.FAILED and (info.last_error or "").startswith(INTERRUPTED_REPAIR):
        return info.last_error
    return None


def current_target(store: StateStore, target: TableTarget) -> TableTarget:
    """``target`` at the base path the state store names (a re-bootstrap switched it to a new version)."""
    info = store.get_table(target.qualified_name)
    if info is None or info.lake_base_path == target.base_path:
        return target
    return dataclasses.replace(target, base_path=info.lake_base_path)


class ApplyRunner:
    """Applies configured tables, recording state; safe to call from many threads (one per table).

    Every batch holds the table's apply lock (:mod:`cdc_lake.state.locks`, on the state store at
    ``lock_url``), so another process applying the same table (``run``, ``apply --once``, a bootstrap's
    catch-up) makes it skip, never collide: Hudi runs single-writer.  There is no way to apply without it.
    """

    def __init__(
        self,
        spark: SparkSession,
        store: StateStore,
        options: ApplierOptions,
        registry: SchemaRegistry,
        lock_url: str,
        rewrite_sources: RewriteSources,
    ) -> None:
        self.spark = spark
        self.store = store
        self.options = options
        self.registry = registry
        self.lock_url = lock_url
        self._appliers: dict[str, TableApplier] = {}
        self.catalog: CatalogSync | None = None
        """Where LIVE tables are registered after publish and schema changes (``catalog`` config)."""
        self.on_schema_change: Callable[[str, SchemaDiff], None] | None = None
        """Called after a table stopped in SCHEMA_CHANGED (``cdc-lake run``: the rebootstrap policy)."""
        self.swaps = SwapCheck.for_kafka(options.kafka, options.board, store)
        """Looks for a swap of each MySQL/MariaDB table before its batch."""
        self.rewrites = RewriteCheck(rewrite_sources, store)
        """Looks for a rewrite of each Postgres table before its batch and before its commit."""
        self._measured: dict[str, float] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_config(
        cls, spark: SparkSession, store: StateStore, config: Config, slices: int = 4
    ) -> ApplyRunner:
        """The runner the config describes: its Kafka and batch settings, registry and lock."""
        options = applier_options(config, slices=slices)
        runner = cls(
            spark, store, options, registry_client(config), config.state_store.url,
            SourceCatalog(config).rewrite_source,
        )
        runner.catalog = CatalogSync.for_config(config)
        return runner

    def applier(self, target: TableTarget) -> TableApplier:
        """The one applier of ``target`` (created on first use)."""
        with self._lock:
            found = self._appliers.get(target.qualified_name)
            if found is None or found.target != target:
                found = TableApplier(self.spark, target, self.options, self.registry, self.store)
                self._appliers[target.qualified_name] = found
            return found

    def step(self, target: TableTarget, limit: dict[int, int] | None = None) -> TableOutcome:
        """Apply one batch of ``target`` (up to ``limit``) and record it; failures are returned."""
        name = target.qualified_name
        skipped = skip_reason(self.store, target)
        if skipped is not None:
            return TableOutcome(name, skipped=skipped)
        # Refused while a repair or a re-bootstrap's switch waits for its turn.
        with batch_lock(self.lock_url, name) as lock:
            if not lock:
                return TableOutcome(name, skipped=BUSY)
            return self._step(current_target(self.store, target), limit, lock)

    def _step(self, target: TableTarget, limit: dict[int, int] | None, lock: HeldLock) -> TableOutcome:
        name = target.qualified_name
        stopped = self._stopped(target, self._swapped) or self._stopped(target, self._rewritten)
        if stopped is not None:
            return stopped
        applier = self.applier(target)
        before_commit, lost = self._guards(target, lock, "apply")
        try:
            with lock.fenced(lost):
                result = applier.apply_batch(limit, before_commit=before_commit)
            self._record(target, result)
            self._register(target, applier)
            if lock.lost is not None and result.commit_instant is not None:
                self._committed_unfenced(target, result.commit_instant, lock.lost)
        except SourceTableChanged as exc:
            applier.forget()
            self._schema_changed(name, exc.diff.summary(), exc.diff)
            return TableOutcome(name, error=exc.diff.summary())
        except _SourceUnreachable as exc:
            applier.forget()
            return self._unchecked(name, str(exc))
        except Exception as exc:  # one table's failure must not stop the others
            applier.forget()
            cause = describe_failure(exc)
            if lock.lost is not None:
                cause = (
                    f"the apply lock was lost while the batch was written ({lock.lost}); its Spark jobs were "
                    f"cancelled before the commit, nothing was committed: {cause}"
                )
            _LOG.warning("%s failed: %s", name, cause, exc_info=_LOG.isEnabledFor(logging.DEBUG))
            self._fail(target, cause)
            return TableOutcome(name, error=cause)
        error = result.error()
        diff = applier.schema_change
        if error is not None and diff is not None and diff.summary() in error:
            self._schema_changed(name, error, diff)
        elif error is not None:
            self._fail(target, error)
        return TableOutcome.of_batch(name, result, error)

    def _guards(
        self, target: TableTarget, lock: HeldLock, verb: str
    ) -> tuple[Callable[[], None], Callable[[], None]]:
        """The table's Spark job group set; what runs before a commit (the lock still held, the source
        table neither swapped nor rewritten) and once the lock is lost (the group's jobs cancelled)."""
        name, context = target.qualified_name, self.spark.sparkContext
        context.setJobGroup(name, f"cdc-lake {verb} {name}", interruptOnCancel=False)

        def before_commit() -> None:
            lock.verify()
            diff = self._swapped(target, fresh=True) or self._rewritten(target, fresh=True)
            if diff is not None:
                raise SourceTableChanged(diff)

        def lost() -> None:
            _LOG.error("%s: the apply lock was lost during the %s: its Spark jobs are cancelled", name, verb)
            context.cancelJobGroup(name)

        return before_commit, lost

    def repair(self, target: TableTarget, read: Callable[[HeldLock], RepairRows]) -> TableOutcome:
        """Hold ``target``'s apply lock, ``read`` its keys' rows, write them in one batch, keep the table's
        state (:mod:`cdc_lake.apply.repair`).  Raises ApplyError: the lock held elsewhere, a failure."""
        name = target.qualified_name
        with waited_table_lock(self.lock_url, LockPurpose.APPLY, name, REPAIR_LOCK_WAIT_SECONDS) as lock:
            if not lock:
                raise ApplyError(f"table {name}: {BUSY} (its apply lock stayed held); repair it again soon")
            target = current_target(self.store, target)
            before = self.store.require_table(name).state
            rows = read(lock)
            applier = self.applier(target)
            before_commit, lost = self._guards(target, lock, "repair")
            stop = partial(self.store.transition, name, TableState.FAILED, interrupted_repair(name, rows))
            try:
                with lock.fenced(lost):
                    result = applier.repair(rows, before_commit, lambda _: stop())
            except Exception as exc:
                applier.forget()
                raise ApplyError(f"table {name}: the repair failed: {describe_failure(exc)}") from exc
            self._record(target, result)
            error = result.error()
            if error is not None:
                self._fail(target, error)
                raise ApplyError(f"table {name}: the repair stopped at a bad message: {error}")
            if lock.lost is not None and result.commit_instant is not None:
                self._committed_unfenced(target, result.commit_instant, lock.lost)
            _restore(self.store, name, before)
            self._register(target, applier)
        return _outcome(name, result)

    def _committed_unfenced(self, target: TableTarget, commit: str, cause: str) -> None:
        """A commit completed although the fence found the apply lock lost during its write (the loss
        came too late to cancel it): another writer may have written the table meanwhile.  The table is
        marked possibly diverged, naming the check; ``cdc-lake validate`` clears the mark when equal."""
        name = target.qualified_name
        why = (
            f"commit {commit} completed after the apply lock was lost during its write ({cause}): another "
            f"writer may have written the table meanwhile; run cdc-lake validate {name} (cdc-lake "
            f"rebootstrap {name} if it differs)"
        )
        _LOG.error("%s: %s", name, why)
        self.store.mark_possibly_diverged(name, why)

    def _swapped(self, target: TableTarget, fresh: bool = False) -> SchemaDiff | None:
        return self.swaps.check(target, fresh)

    def _rewritten(self, target: TableTarget, fresh: bool = False) -> SchemaDiff | None:
        """The rewrite check; a source it cannot ask raises :class:`_SourceUnreachable` (a skip)."""
        try:
            return self.rewrites.check(target, fresh)
        except SourceEngineError as exc:
            raise _SourceUnreachable(str(exc)) from None

    def _unchecked(self, name: str, cause: str) -> TableOutcome:
        """A batch not applied because its source could not be asked for rewrites (a failover, a
        maintenance window): the table stays as it is and the next poll tries again."""
        _LOG.warning("%s: batch not applied, the rewrite check could not ask its source: %s", name, cause)
        return TableOutcome(name, skipped=f"rewrite check: {cause}")

    def _stopped(
        self, target: TableTarget, check: Callable[[TableTarget], SchemaDiff | None]
    ) -> TableOutcome | None:
        """Stop ``target`` when ``check`` finds its source table swapped or rewritten; None when not."""
        name = target.qualified_name
        try:
            diff = check(target)
        except _SourceUnreachable as exc:
            return self._unchecked(name, str(exc))
        except CdcLakeError as exc:
            self._fail(target, str(exc))
            return TableOutcome(name, error=str(exc))
        if diff is None:
            return None
        cause = diff.summary()
        self._schema_changed(name, cause, diff)
        return TableOutcome(name, error=cause)

    def catch_up(self, target: TableTarget, stop: threading.Event | None = None) -> TableOutcome:
        """Apply batches until ``target`` reaches the end offsets seen when this call started."""
        name = target.qualified_name
        skipped = skip_reason(self.store, target)
        if skipped is not None:
            return TableOutcome(name, skipped=skipped)
        try:
            limit = _end_offsets(self.options.kafka, target.topic)
        except CdcLakeError as exc:
            self._fail(target, str(exc))
            return TableOutcome(name, error=str(exc))
        total, refreshed = TableOutcome(name), frozenset[int]()
        while True:
            outcome = self.step(target, limit)
            total = _add(total, outcome)
            if outcome.failed or outcome.skipped or outcome.offsets == 0 or (stop and stop.is_set()):
                return total
            limit, refreshed = _read_on(self.options.kafka, target.topic, limit, outcome.held, refreshed)

    def _record(self, target: TableTarget, result: BatchResult) -> None:
        name = target.qualified_name
        if result.commit_instant is not None:
            self.store.record_applied_offsets(name, result.end, result.commit_instant)
        applier_metrics.record_batch(
            name, target.tier, changes=result.changes, offsets=result.offsets,
            committed=result.commit_instant is not None, seconds=result.seconds,
        )
        now = time.monotonic()
        # An idle tier-0 table is polled every second: its freshness is refreshed every few seconds only.
        if result.offsets or now - self._measured.get(name, -IDLE_MEASURE_SECONDS) >= IDLE_MEASURE_SECONDS:
            self.store.record_freshness(name, result.newest_source_ts_ms, result.lag_messages)
            self._measured[name] = now
        if result.offsets:
            _LOG.info(
                "%s: %d offsets, %d changes, %d re-sent skipped -> commit %s in %.1fs (lag %d)",
                name, result.offsets, result.changes, result.redelivered, result.commit_instant,
                result.seconds, result.lag_messages,
            )
        if result.bad is not None:
            return
        info = self.store.require_table(name)
        if info.state in STOPPED:
            info = self.store.transition(name, TableState.CATCHING_UP)
        if info.state is TableState.CATCHING_UP and result.lag_messages == 0:
            self.store.transition(name, TableState.LIVE)

    def _register(self, target: TableTarget, applier: TableApplier) -> None:
        """Register a LIVE table in the catalogs when its path, columns or partitions changed (not a copy)."""
        if self.catalog is None or target.lake_name is not None:
            return
        name, path = target.qualified_name, target.base_path
        if self.store.require_table(name).state is not TableState.LIVE:
            return
        columns = applier.lake_columns
        if columns is None:  # published without a batch of its own: the columns come from the table
            if self.catalog.knows(name, path):
                return
            columns = row_columns(applier.lake.read(path).schema)
        self.catalog.after_batch(name, path, columns, target.partition_fields, applier.lake.partitions)

    def _schema_changed(self, name: str, cause: str, diff: SchemaDiff) -> None:
        """Stop the table in SCHEMA_CHANGED, with the full report in a run (once per writer schema)."""
        try:
            info = self.store.require_table(name)
            if info.state is not TableState.SCHEMA_CHANGED or info.last_error != cause:
                detail = {
                    "schema_id": diff.schema_id, "history_offset": diff.history_offset,
                    "report": diff.report(), "error": cause,
                }
                self.store.finish_run(self.store.start_run(SCHEMA_CHANGE_RUN, name, detail), RunOutcome.OK)
            self.store.transition(name, TableState.SCHEMA_CHANGED, cause)
        except CdcLakeError as exc:
            _LOG.error("%s: cannot record the schema change in the state store: %s", name, exc)
        _LOG.warning("%s stopped: %s", name, cause)
        if self.on_schema_change is not None:
            self.on_schema_change(name, diff)

    def _fail(self, target: TableTarget, cause: str) -> None:
        name = target.qualified_name
        applier_metrics.record_failure(name, target.tier)
        try:
            self.store.transition(name, TableState.FAILED, cause)
        except CdcLakeError as exc:
            _LOG.error("%s: cannot record the failure in the state store: %s", name, exc)


def _outcome(name: str, result: BatchResult) -> TableOutcome:
    """The outcome of a batch that committed."""
    return TableOutcome(
        name, batches=1 if result.offsets else 0, changes=result.changes, offsets=result.offsets,
        commit_instant=result.commit_instant, lag_messages=result.lag_messages,
        newest_source_ts_ms=result.newest_source_ts_ms, redelivered=result.redelivered,
    )


def _restore(store: StateStore, name: str, before: TableState) -> None:
    """Back to the state a repaired table had (LIVE after an interrupted repair's FAILED)."""
    state = store.require_table(name).state
    wanted = TableState.LIVE if before is TableState.FAILED else before
    if state is TableState.FAILED:
        state = store.transition(name, TableState.CATCHING_UP).state
    if state is not wanted and wanted in ALLOWED_TRANSITIONS[state]:
        store.transition(name, wanted)


def _end_offsets(kafka: KafkaReadSettings, topic: str) -> dict[int, int]:
    return end_offsets(kafka.bootstrap_servers, topic, extra=kafka.consumer)


def _read_on(
    kafka: KafkaReadSettings,
    topic: str,
    limit: dict[int, int],
    held: frozenset[int],
    refreshed: frozenset[int],
) -> tuple[dict[int, int], frozenset[int]]:
    """A catch-up's ``limit`` and the partitions whose limit it read again.  A batch cut back to a
    primary-key update's half (``held``) whose other half may lie past the limit (Debezium wrote it after
    the limit was read) reads on, once per partition, to the end offsets now, so that the next batch holds
    both (:func:`cdc_lake.apply.key_change.key_update_cuts`)."""
    if not held - refreshed:
        return limit, refreshed
    now = _end_offsets(kafka, topic)
    return {**limit, **{p: now[p] for p in held - refreshed if p in now}}, refreshed | held


def _add(total: TableOutcome, step: TableOutcome) -> TableOutcome:
    return TableOutcome(
        table=total.table,
        batches=total.batches + step.batches,
        changes=total.changes + step.changes,
        offsets=total.offsets + step.offsets,
        commit_instant=step.commit_instant or total.commit_instant,
        lag_messages=step.lag_messages if step.lag_messages is not None else total.lag_messages,
        newest_source_ts_ms=step.newest_source_ts_ms or total.newest_source_ts_ms,
        redelivered=total.redelivered + step.redelivered,
        error=step.error,
        skipped=step.skipped,
        held=step.held,
        steps={
            name: total.steps.get(name, 0.0) + step.steps.get(name, 0.0)
            for name in dict.fromkeys([*total.steps, *step.steps])
        },
    )


def apply_once(
    runner: ApplyRunner,
    targets: Sequence[TableTarget],
    workers: int,
    stop: threading.Event | None = None,
    on_done: Callable[[TableOutcome], None] | None = None,
) -> list[TableOutcome]:
    """Catch every target up to the end offsets seen at its start, ``workers`` tables at a time."""
    if not targets:
        return []
    pool_size = max(1, min(workers, len(targets)))
    with ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="apply") as pool:
        futures = [pool.submit(runner.catch_up, target, stop) for target in targets]
        outcomes = []
        for future in futures:
            outcome = future.result()
            if on_done is not None:
                on_done(outcome)
            outcomes.append(outcome)
    return outcomes


def failure_summary(outcomes: Sequence[TableOutcome]) -> ApplyError | None:
    """One error naming every failed table and its cause, or None when none failed."""
    failed = [o for o in outcomes if o.failed]
    if not failed:
        return None
    causes = "; ".join(f"{o.table}: {o.error}" for o in failed)
    return ApplyError(f"{len(failed)} of {len(outcomes)} tables failed: {causes}")
