"""``cdc-lake bootstrap --parallel N``: many tables at once in one Spark application.

The per-table flow stays :class:`bootstrap.run.TableBootstrap`; this driver adds what tables of one
source can share and then runs ``N`` of them side by side:

1. Shared start, per source, for chunks of tables (each table's bootstrap lock held meanwhile): the
   watermarks of every table still without one are taken together (:func:`take_watermarks`: one Kafka
   batch for all topics, one read of the primary's position), then **one** replica wait per distinct
   wait position covers every table of the chunk.  On a source with 100 small tables this replaces 100
   Kafka consumers, 100 position reads and 100 replica waits by one of each.
2. Copy: ``N`` slots run each table's remaining steps (plan, copy, hand-off, catch-up) under its lock.
   They share the Spark session, so the partitions of different tables interleave on the executors: a
   small table's few tasks fill the slots a big table's group leaves idle.  A table waiting for its
   hand-off (Debezium's committed offset past its snapshot point: a heartbeat or two on an idle source,
   no work) gives its slot to the next table and takes one back to go on; up to
   :data:`WAITERS_PER_SLOT` tables per slot are started, so the waits of small tables overlap the copies
   of others instead of holding ``N`` slots idle.

Every step is still recorded per table in the state store, so an interrupted run resumes per table
exactly as a sequential one does.  A failing table stops the driver from starting new tables; running
ones finish, and the first failure is raised (the others keep their state; run again to resume).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager

from cdc_lake.config import Config
from cdc_lake.decode.registry import SchemaRegistry, registry_client
from cdc_lake.exceptions import BootstrapBusyError
from cdc_lake.lake.applier import ApplierFactory
from cdc_lake.sources import engine_for
from cdc_lake.spark import get_spark
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import HeldLock, LockPurpose, table_lock
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.progress import ProgressView
from cdc_lake_bootstrap.replica_wait import ReplicaWait, wait_for_replica
from cdc_lake_bootstrap.run import (
    AWAITING,
    BootstrapRequest,
    TableBootstrap,
    TableResult,
    select_tables,
)
from cdc_lake_bootstrap.watermark import take_watermarks

_LOG = logging.getLogger(__name__)

SHARED_START_CHUNK = 32
"""How many tables' locks the shared start holds at once (each lock may be a state-store connection)."""

WAITERS_PER_SLOT = 4
"""Tables started per slot: one working, the others waiting for their hand-off or for a slot."""


def bootstrap_concurrently(
    config: Config, request: BootstrapRequest, view: ProgressView, parallel: int, applier: ApplierFactory
) -> list[TableResult]:
    """Bootstrap the selected tables ``parallel`` at a time, after a shared start per source (``applier``
    catches each up after its hand-off when the request asks to apply)."""
    with StateStore.open(config.state_store.url) as store:
        chosen = select_tables(config, store, request)
        registry = registry_client(config)
        runners = [
            TableBootstrap(config, source, table, store, registry, view, request.apply, applier)
            for source, table in chosen
        ]
        by_source: dict[str, list[TableBootstrap]] = {}
        for runner in runners:
            by_source.setdefault(runner.source.name, []).append(runner)
        for group in by_source.values():
            for start in range(0, len(group), SHARED_START_CHUNK):
                _shared_start(config, store, registry, group[start : start + SHARED_START_CHUNK])
        return _run_pool(config, runners, parallel)


@contextmanager
def _locked(config: Config, runner: TableBootstrap) -> Iterator[HeldLock]:
    with table_lock(config.state_store.url, LockPurpose.BOOTSTRAP, runner.name) as acquired:
        if not acquired:
            raise BootstrapBusyError(
                f"table {runner.name}: another bootstrap of this table is running; wait for it, or "
                "stop it and run again"
            )
        yield acquired


def _shared_start(
    config: Config, store: StateStore, registry: SchemaRegistry, runners: Sequence[TableBootstrap]
) -> None:
    """Steps 1 and 2 for ``runners`` (one source): watermarks in one batch, one replica wait per position."""
    source = runners[0].source
    with ExitStack() as locks:
        for runner in runners:
            locks.enter_context(_locked(config, runner))
        fresh: list[tuple[TableBootstrap, TableState]] = []
        for runner in runners:
            info = store.require_table(runner.name)
            if info.state in AWAITING and (
                info.state is TableState.PENDING_BOOTSTRAP or store.get_watermark(runner.name) is None
            ):
                fresh.append((runner, info.state))
        if fresh:
            engine = engine_for(source)
            spark = get_spark(config.spark, config.lake)
            for runner, state in fresh:
                runner.role()  # a source without a replica fails here, before any state changes
                runner.begin_watermark(spark, state)
            points = take_watermarks(
                config.kafka.bootstrap_servers,
                [runner.target.topic for runner, _ in fresh],
                engine,
                registry,
                dict(config.kafka.consumer),
                {runner.target.topic: runner.table.column_types for runner, _ in fresh},
            )
            for runner, _ in fresh:
                runner.record_watermark(points[runner.target.topic])
            _LOG.info("source %s: %d watermarks taken in one batch", source.name, len(fresh))
        _wait_replica_once(config, store, runners)


def _wait_replica_once(config: Config, store: StateStore, runners: Sequence[TableBootstrap]) -> None:
    """One replica wait per distinct watermark position covers every table waiting for it."""
    waiting: dict[str, list[TableBootstrap]] = {}
    for runner in runners:
        if store.require_table(runner.name).state is not TableState.BOOTSTRAPPING:
            continue
        watermark = store.get_watermark(runner.name)
        if watermark is not None and not watermark.replica_position_reached:
            waiting.setdefault(watermark.source_position or "", []).append(runner)
    if not waiting:
        return
    engine = engine_for(runners[0].source)
    settings = config.bootstrap
    replica_wait = ReplicaWait(settings.replica_delay_seconds, settings.replica_wait_timeout_seconds)
    for tables in waiting.values():
        if tables[0].role() == "replica":
            names = ", ".join(runner.name for runner in tables)
            watermark = store.get_watermark(tables[0].name)
            assert watermark is not None
            _LOG.info("%s: %s", names, wait_for_replica(names, engine, watermark, replica_wait))
        for runner in tables:
            store.mark_replica_position_reached(runner.name)


class _Slots:
    """``parallel`` tables working at once; a table waiting for its hand-off steps aside."""

    def __init__(self, parallel: int) -> None:
        self._free = threading.Semaphore(parallel)
        self.stopped = threading.Event()
        """Set after a failure: tables not yet in a slot do not start."""

    @contextmanager
    def held(self) -> Iterator[None]:
        self._free.acquire()
        try:
            yield
        finally:
            self._free.release()

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Inside :meth:`held`: free the slot meanwhile, and wait for one again after."""
        self._free.release()
        try:
            yield
        finally:
            self._free.acquire()


def _run_table(config: Config, runner: TableBootstrap, slots: _Slots) -> TableResult | None:
    """The table's remaining steps in a slot (None: not started, after another table's failure)."""
    with slots.held():
        if slots.stopped.is_set():
            return None
        try:
            with _locked(config, runner) as lock:
                runner.started = time.monotonic()
                runner.aside = slots.aside
                return runner.run(lock)
        except BaseException:
            slots.stopped.set()  # before the slot is free: no table waiting for it starts
            raise


def _run_pool(config: Config, runners: Sequence[TableBootstrap], parallel: int) -> list[TableResult]:
    """Run each table's remaining steps, ``parallel`` at a time; stop starting tables after a failure."""
    results: dict[str, TableResult] = {}
    failure: BaseException | None = None
    queue = list(runners)
    slots = _Slots(max(1, parallel))
    started = max(1, parallel) * WAITERS_PER_SLOT
    with ThreadPoolExecutor(max_workers=started, thread_name_prefix="bootstrap") as pool:
        running: dict[Future[TableResult | None], TableBootstrap] = {}
        while queue or running:
            while queue and failure is None and len(running) < started:
                runner = queue.pop(0)
                running[pool.submit(_run_table, config, runner, slots)] = runner
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                runner = running.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # the first failure is raised once running tables finish
                    _LOG.warning("%s: bootstrap failed: %s", runner.name, exc)
                    failure = failure or exc
                else:
                    if result is not None:
                        results[runner.name] = result
    if failure is not None:
        raise failure
    return [results[runner.name] for runner in runners]
