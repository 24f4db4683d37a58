"""``cdc-lake bootstrap``: which tables, and each one through the six steps, resumable at every step.

A table awaiting bootstrap is PENDING_BOOTSTRAP, or BOOTSTRAPPING after an interrupted run (a killed
process, a failure).  Under the table's bootstrap lock (:mod:`cdc_lake.state.locks`) the steps run in
order, each skipped when the state store says it is done: watermark, replica wait (on a replica it runs
on every run, a resumed one may reach another replica), partition plan, the partitions not yet in the
lake (a Hudi commit per group; both :mod:`cdc_lake_bootstrap.partition_copy`), then the hand-off.  A
failure leaves the table BOOTSTRAPPING, which the applier does not touch, so nothing partial is ever
published; running the bootstrap again continues where it stopped.  Here tables are bootstrapped one
after the other, each using every Spark executor; :mod:`cdc_lake_bootstrap.parallel` runs this same
flow for many tables at once.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from pyspark import SparkContext
from pyspark.sql import SparkSession

from cdc_lake.capture.history import history_end
from cdc_lake.capture.plan import topic_prefix
from cdc_lake.config import Config, Source, Table
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.decode.registry import SchemaRegistry, registry_client
from cdc_lake.exceptions import BootstrapBusyError, BootstrapError
from cdc_lake.kafka.group_offsets import commit_group_offsets
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.lake.applier import BUSY, ApplierFactory
from cdc_lake.lake.format import load_format
from cdc_lake.lake.target import TableTarget, target_for
from cdc_lake.sources import engine_for
from cdc_lake.sources.snapshot import SnapshotSource
from cdc_lake.spark import get_spark
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import HeldLock, LockPurpose, table_lock
from cdc_lake.state.records import Watermark
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.handoff import (
    HandoffWait,
    SnapshotPoint,
    check_same_topic,
    check_unique_copy,
    wait_until_streamed,
)
from cdc_lake_bootstrap.keys import record_key, selected_columns
from cdc_lake_bootstrap.lake_types import column_reads
from cdc_lake_bootstrap.partition_copy import PartitionCopy, copy_job_group
from cdc_lake_bootstrap.progress import RUN, ProgressView, TableProgress
from cdc_lake_bootstrap.read import SnapshotQuery
from cdc_lake_bootstrap.registry_check import align_with_registry
from cdc_lake_bootstrap.replica_wait import ReplicaWait, wait_for_replica
from cdc_lake_bootstrap.watch import CatchUpWatch
from cdc_lake_bootstrap.watermark import WatermarkPoint, take_watermark
from cdc_lake_bootstrap.write import check_fresh

_LOG = logging.getLogger(__name__)

AWAITING = frozenset({TableState.PENDING_BOOTSTRAP, TableState.BOOTSTRAPPING})
"""States of tables awaiting bootstrap (BOOTSTRAPPING: interrupted, resumed by the next run)."""
APPLY_TIMEOUT_SECONDS = 1800.0
BUSY_RETRY_SECONDS = 1.0
"""How long the catch-up waits before trying again while another process holds the table's apply lock."""


@dataclass(frozen=True)
class BootstrapRequest:
    """What ``cdc-lake bootstrap`` was asked: tables by name, or a source's (only pending ones)."""

    tables: tuple[str, ...] = ()
    source: str | None = None
    all_pending: bool = False
    apply: bool = False


@dataclass(frozen=True)
class TableResult:
    """How one table's bootstrap ended."""

    table: str
    state: TableState
    rows: int = 0
    partitions: int = 0
    seconds: float = 0.0
    note: str = ""

    @property
    def rows_per_second(self) -> float | None:
        """Rows written per second by this run."""
        return self.rows / self.seconds if self.rows and self.seconds > 0 else None


def select_tables(config: Config, store: StateStore, request: BootstrapRequest) -> list[tuple[Source, Table]]:
    """The configured tables the request names; ``all_pending``: only onboarded ones awaiting bootstrap."""
    if bool(request.tables) == bool(request.source):
        raise BootstrapError("name the tables to bootstrap, or give --source (not both)")
    if request.all_pending and not request.source:
        raise BootstrapError("--all-pending applies to --source only")
    if request.tables:
        chosen = [config.table(name) for name in dict.fromkeys(request.tables)]
    else:
        source = config.source(request.source or "")
        chosen = [(source, table) for table in source.tables]
    selected = []
    for source, table in chosen:
        name = table.qualified_name(source)
        if not request.all_pending:
            store.require_table(name)
            selected.append((source, table))
            continue
        info = store.get_table(name)
        if info is not None and info.state in AWAITING:
            selected.append((source, table))
    return selected


def bootstrap_tables(
    config: Config, request: BootstrapRequest, view: ProgressView, applier: ApplierFactory
) -> list[TableResult]:
    """Bootstrap every selected table in turn; the first failure stops the command (others keep state).

    ``applier`` catches a table up after its hand-off when the request asks to apply.
    """
    with StateStore.open(config.state_store.url) as store:
        chosen = select_tables(config, store, request)
        registry = registry_client(config)
        results = []
        for source, table in chosen:
            qualified = table.qualified_name(source)
            with table_lock(config.state_store.url, LockPurpose.BOOTSTRAP, qualified) as acquired:
                if not acquired:
                    raise BootstrapBusyError(
                        f"table {qualified}: another bootstrap of this table is running; wait for it, or "
                        "stop it and run again"
                    )
                runner = TableBootstrap(config, source, table, store, registry, view, request.apply, applier)
                results.append(runner.run(acquired))
        return results


class TableBootstrap:
    """One table's bootstrap, from whatever step the state store says it reached."""

    def __init__(
        self,
        config: Config,
        source: Source,
        table: Table,
        store: StateStore,
        registry: SchemaRegistry,
        view: ProgressView,
        apply: bool,
        applier: ApplierFactory,
        target: TableTarget | None = None,
        read_primary: bool = False,
    ) -> None:
        """``apply``: catch the table up with ``applier`` after the hand-off; ``target``: where to bootstrap
        instead of the configured table (a re-bootstrap's copy); ``read_primary``: read the primary even
        with a replica configured (``rebootstrap --from-primary``)."""
        self.config = config
        self.source = source
        self.table = table
        self.store = store
        self.registry = registry
        self.view = view
        self.apply = apply
        self.applier = applier
        self.target: TableTarget = target or target_for(config, source, table)
        self.read_primary = read_primary
        self.name = self.target.qualified_name
        self.progress = TableProgress(self.name)
        self.started = time.monotonic()
        self._history_start: int | None = None
        """The end of the table's schema history when the watermark began (:meth:`begin_watermark`)."""
        self.aside: Callable[[], AbstractContextManager[object]] = nullcontext
        """Entered while the table waits for its hand-off: a wait for Debezium, no work, so ``--parallel``
        gives its slot to another table meanwhile (:mod:`cdc_lake_bootstrap.parallel`)."""

    def _show(self, phase: str | None = None) -> None:
        if phase is not None:
            self.progress.phase = phase
        self.view.show(self.progress)

    def run(self, lock: HeldLock) -> TableResult:
        """Bootstrap the table (or finish its interrupted bootstrap) and hand it to the applier, under
        ``lock``: the table's bootstrap lock, which the caller holds.  A database lock can be lost while
        the copy runs (its connection dropped) and another bootstrap may take it: each group's commit
        verifies it first, and it is fenced meanwhile (:meth:`HeldLock.fenced`): once lost, the copy's
        Spark jobs are cancelled, so its write stops before its commit."""
        with lock.fenced(self._cancel_copy):
            return self._run(lock)

    def _cancel_copy(self) -> None:
        _LOG.error("%s: the bootstrap lock was lost: the copy's Spark jobs are cancelled", self.name)
        context = SparkContext._active_spark_context
        if context is not None:  # no Spark yet: nothing to cancel
            context.cancelJobGroup(copy_job_group(self.name))

    def _run(self, lock: HeldLock) -> TableResult:
        info = self.store.require_table(self.name)
        if info.state is TableState.CATCHING_UP and self.apply:
            self._catch_up(get_spark(self.config.spark, self.config.lake))
            return self._result("caught up")
        if info.state in (TableState.CATCHING_UP, TableState.LIVE):
            return TableResult(self.name, info.state, note="already bootstrapped")
        if info.state not in AWAITING:
            raise BootstrapError(
                f"table {self.name} is {info.state.value}; only PENDING_BOOTSTRAP tables (or interrupted "
                "BOOTSTRAPPING ones) are bootstrapped"
            )
        with self.store.run(RUN, self.name) as handle:
            handle.detail.update({"host": socket.gethostname(), "pid": os.getpid()})
            note = self._bootstrap(info.state, lock)
            handle.detail.update({"rows": self.progress.rows_written, "note": note})
        return self._result(note)

    def _result(self, note: str) -> TableResult:
        info = self.store.require_table(self.name)
        return TableResult(
            self.name,
            info.state,
            rows=self.progress.rows_written - self.progress.rows_before,
            partitions=self.progress.partitions_total,
            seconds=time.monotonic() - self.started,
            note=note,
        )

    def role(self) -> str:
        """Where the snapshot is read: ``replica``, or ``primary`` when asked or when the config allows it."""
        if self.read_primary:
            return "primary"
        if self.source.replica is not None:
            return "replica"
        if self.config.bootstrap.allow_primary_reads:
            return "primary"
        raise BootstrapError(
            f"table {self.name}: source {self.source.name} has no replica to read; bootstraps read the "
            "primary only when bootstrap.allow_primary_reads is true"
        )

    def _bootstrap(self, state: TableState, lock: HeldLock) -> str:
        self._show("checking the source")
        engine = engine_for(self.source)
        role = self.role()
        if role == "replica":
            _LOG.info("%s: %s", self.name, engine.check_replica())
        shape = engine.table_shape(self.table.name, role)
        key = record_key(self.name, self.table, shape)
        names = selected_columns(self.name, self.table, shape, key)
        reads = column_reads(
            self.source.engine,
            shape,
            names,
            engine.quote_identifier,
            self.table.column_types,
            interval_handling=self.source.interval_mode(),
        )
        reads, agreed, lengths = align_with_registry(
            self.registry, self.target.topic, reads, self.name, self.table.column_types
        )
        _LOG.info("%s: %s", self.name, agreed)
        self._show("starting Spark")
        spark = get_spark(self.config.spark, self.config.lake)

        watermark = self.store.get_watermark(self.name) if state is TableState.BOOTSTRAPPING else None
        if watermark is not None and watermark.topic != self.target.topic:
            raise BootstrapError(
                f"table {self.name}: the saved watermark is for topic {watermark.topic}, "
                f"not {self.target.topic}"
            )
        if watermark is None:
            watermark = self._save_watermark(spark, engine, state)
        if role == "replica" or not watermark.replica_position_reached:
            # Also when a run before this one got there: this run may reach another replica (a
            # load-balanced endpoint, a replaced server).  Immediate when the replica is past it.
            self._show("waiting for the replica")
            if role == "replica":
                settings = self.config.bootstrap
                wait = ReplicaWait(settings.replica_delay_seconds, settings.replica_wait_timeout_seconds)
                _LOG.info("%s: %s", self.name, wait_for_replica(self.name, engine, watermark, wait))
            if not watermark.replica_position_reached:
                watermark = self.store.mark_replica_position_reached(self.name)
        lake = load_format(spark, self.config.lake.format)
        partitions = PartitionCopy(
            self.config, self.table, self.target, lake, self.store, self.progress, self._show, lock.verify
        )
        if not watermark.partitions:
            self._show("planning")
            watermark = partitions.plan(spark, engine, role, shape.estimated_rows, shape.estimated_bytes, key)
        watermark = partitions.reconcile(watermark)

        query = SnapshotQuery(
            engine.quote_table(self.table.name),
            tuple(reads),
            tuple(engine.quote_identifier(read.name) for read in reads),
            key,
            lengths,
        )
        partitions.copy(spark, engine, role, query, watermark, key)

        self._show("handing off")
        check_unique_copy(self.target, lake, key, shape)
        # Every partition read a snapshot at or before what the server it read has replayed by now.
        position = engine.replica_position() if role == "replica" else engine.current_position()
        point = SnapshotPoint(position, engine.primary_clock_ms())
        handoff = HandoffWait.of(
            engine, topic_prefix(self.source), self.config.bootstrap.handoff_timeout_seconds
        )
        with self.aside(), KafkaConnectClient.for_settings(self.config.kafka_connect) as connect:
            how = wait_until_streamed(self.name, self.table.name, point, handoff, connect)
        _LOG.info("%s: %s", self.name, how)
        check_same_topic(self.target, watermark, self.config.kafka)
        self.store.transition(self.name, TableState.CATCHING_UP)
        self._commit_group(watermark)
        self._show("handed off")
        if self.apply:
            self._catch_up(spark)
            return "bootstrapped and caught up"
        return "bootstrapped; the applier publishes it once caught up"

    def _save_watermark(self, spark: SparkSession, engine: SnapshotSource, state: TableState) -> Watermark:
        self.begin_watermark(spark, state)
        point = take_watermark(
            self.config.kafka.bootstrap_servers,
            self.target.topic,
            engine,
            self.registry,
            dict(self.config.kafka.consumer),
            self.table.column_types,
        )
        return self.record_watermark(point)

    def _commit_group(self, watermark: Watermark) -> None:
        """The copy's consumer group starts at the watermark, so Kafka's lag tools show the catch-up from
        the hand-off on (the applier moves it after each of its commits; informational, never raises)."""
        kafka = KafkaReadSettings.of(self.config.kafka)
        name = self.target.lake_name or self.target.qualified_name
        commit_group_offsets(kafka, name, self.target.base_path, watermark.topic, watermark.offsets)

    def begin_watermark(self, spark: SparkSession, state: TableState) -> None:
        """Before the watermark is measured: the lake path must be fresh; the table becomes BOOTSTRAPPING.

        The end of the table's schema history is taken now, before the topic's offsets: a swap recorded
        before it is the copy's, one after it stops the table (:mod:`cdc_lake.apply.swaps`).  Likewise
        where the source logs table rewrites, one past the table's newest logged rewrite
        (:mod:`cdc_lake.apply.rewrites`).
        """
        self._show("saving the watermark")
        check_fresh(load_format(spark, self.config.lake.format), self.target.base_path, self.name)
        if self.target.history_topic is not None:
            kafka = KafkaReadSettings.of(self.config.kafka)
            self._history_start = history_end(kafka, self.target.history_topic)
        else:
            engine = engine_for(self.source)
            if engine.capabilities.rewrite_log:
                self._history_start = engine.rewrite_log_start(self.table.name)
        if state is TableState.PENDING_BOOTSTRAP:
            self.store.transition(self.name, TableState.BOOTSTRAPPING)

    def record_watermark(self, point: WatermarkPoint) -> Watermark:
        """Save the measured watermark (step 1 done)."""
        _LOG.info(
            "%s: watermark %s, Tₛ %s ms (newest event at %s), replica must pass %s",
            self.name, point.offsets, point.ts_source_ms, point.newest_event_position, point.wait_position,
        )
        return self.store.save_watermark(
            self.name,
            topic=self.target.topic,
            offsets=point.offsets,
            ts_source_ms=point.ts_source_ms,
            source_position=point.wait_position,
            history_offset=self._history_start,
            topic_id=point.topic_id,
        )

    def _catch_up(self, spark: SparkSession) -> None:
        """Apply the table's backlog in this process until the applier publishes it (LIVE).

        Stops at once when the catch-up cannot happen any more (:class:`bootstrap.watch.CatchUpWatch`).
        """
        self._show("catching up")
        # The apply lock makes this one writer among others: while `cdc-lake run` or `apply --once`
        # holds the table, its batches are skipped here and the other process publishes the table.
        runner = self.applier(spark, self.store, self.config)
        deadline = time.monotonic() + APPLY_TIMEOUT_SECONDS
        prefix = topic_prefix(self.source)
        with KafkaConnectClient.for_settings(self.config.kafka_connect) as connect:
            watch = CatchUpWatch(self.name, self.store, connect, prefix, self.table.name)
            while self.store.require_table(self.name).state is not TableState.LIVE:
                outcome = runner.catch_up(self.target)
                if outcome.skipped == BUSY:
                    self._show("catching up (another process is applying)")
                    time.sleep(BUSY_RETRY_SECONDS)
                if outcome.failed:
                    raise BootstrapError(
                        f"table {self.name}: the applier failed while catching up: {outcome.error}"
                    )
                failure = watch.failure()
                if failure is not None:
                    raise BootstrapError(
                        f"table {self.name}: stopped catching up: {failure}; `cdc-lake run` publishes "
                        "it once that is fixed"
                    )
                if time.monotonic() > deadline:
                    raise BootstrapError(
                        f"table {self.name}: still catching up after {APPLY_TIMEOUT_SECONDS:.0f}s; "
                        "`cdc-lake run` will finish it"
                    )
        self._show("live")
