"""Table services outside the writes: ``cdc-lake run``'s table-service thread, the ``cdc-lake compact`` job.

A table whose format leaves its services to a separate executor (Hudi MERGE_ON_READ with
``lake.compaction.inline: false``: the writer only schedules compaction plans) gets them executed here,
never inside an apply batch, so a commit's cost stays that of its batch.  :class:`TableServices` executes
one table's pending plans and records the backlog a read-optimized reader (Trino) sees, beside the
table's freshness in the state store: pending plans and the age of the oldest write no base file holds
yet, which ``status``, ``lag``, the metrics and the ``CdcLakeCompactionBehind`` alert read.

Who may run a table's services at the same time as what:

* one executor per table: every execution holds the table's :attr:`LockPurpose.TABLE_SERVICES` lock, so
  ``run``'s thread and a ``compact`` job (or two jobs) never execute one plan twice;
* inside ``run`` the executor runs beside the applier's batches of the same process: Hudi's in-process
  lock guards the metadata table they both update (:func:`~cdc_lake.hudi.options.compaction_options`);
* a ``compact`` job in another process also holds the table's apply lock (the applier skips the table,
  BUSY, meanwhile), unless the config names a lock provider shared by processes
  (``hoodie.write.lock.provider`` in ``lake.format_options``: Hudi's file-system one on a local or HDFS
  lake, Zookeeper, DynamoDB or the Hive Metastore's).

Who executes: ``run``'s thread, unless the table's ``compaction.executor`` is ``job``: then only a
``compact`` job does (``compact --every`` keeps looking, a separate process an operator runs beside ``run``
on executors, or at a lower CPU priority, of its own), and ``run``'s thread only records the table's backlog,
so the staleness alert still sees a job that stopped.

Inside ``run`` an execution takes its turn with continuous validation's looks
(:mod:`cdc_lake.spark.background`): at most one of them beside the applier.

A failed execution is recorded with the backlog and retried at the next look; it never stops the table's
applier: the snapshot readers stay exact, and the growing staleness is what the alert fires on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass

from cdc_lake import applier_metrics
from cdc_lake.apply.runner import current_target, skip_reason
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.lake.applier import BUSY
from cdc_lake.lake.commit_metadata import MalformedCommitMetadata
from cdc_lake.lake.format import LakeFormat, PlanNow, ServiceBacklog
from cdc_lake.lake.layout import CompactionExecutor
from cdc_lake.lake.target import TableTarget
from cdc_lake.spark.background import BackgroundSlot
from cdc_lake.spark.errors import describe_failure
from cdc_lake.state.locks import LockPurpose, table_lock
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)

NO_TABLE = "no lake table yet"


@dataclass(frozen=True)
class ServiceOutcome:
    """What one look at a table's services did: plans executed, the backlog after, a failure, a skip."""

    table: str
    executed: tuple[str, ...] = ()
    backlog: ServiceBacklog | None = None
    seconds: float = 0.0
    error: str | None = None
    skipped: str | None = None


class TableServices:
    """Executes the pending table-service plans of tables whose writes leave them to a separate executor.

    ``beside_writer``: a writer applies the tables meanwhile (``run``, ``compact --every``), so a due
    plan is the table's next one within ``plan_io_mb``.  ``same_process`` (default: ``beside_writer``):
    that writer is this process (``run``), so only the services lock is taken; otherwise the apply lock
    as well, unless the lock provider is shared.  ``executor``: which of the table-service executors
    this is (:class:`CompactionExecutor`): the writer's process (``run``, ``apply --once``), whose looks
    leave the tables of ``compaction.executor: job`` to the job, or the ``compact`` job.  ``turn``:
    the application's background turn an execution takes first (``run``'s, shared with continuous
    validation), None for none.
    """

    def __init__(
        self,
        lake: LakeFormat,
        store: StateStore,
        lock_url: str,
        *,
        beside_writer: bool,
        same_process: bool | None = None,
        executor: CompactionExecutor = CompactionExecutor.RUN,
        clock: Callable[[], float] = time.time,
        turn: BackgroundSlot | None = None,
    ) -> None:
        self.lake = lake
        self.store = store
        self.lock_url = lock_url
        self.beside_writer = beside_writer
        self.same_process = beside_writer if same_process is None else same_process
        self.executor = executor
        self.clock = clock
        self.turn = turn

    def serviced(self, targets: Sequence[TableTarget]) -> list[TableTarget]:
        """The targets whose format leaves table services outside the writes."""
        return [t for t in targets if self.lake.services_outside_write(t.spec(t.key_fields or ()))]

    def step(self, target: TableTarget, *, schedule: bool = False) -> ServiceOutcome:
        """Execute ``target``'s pending plans (``schedule``: then one over every file group with logs) and
        record the backlog.  Without ``schedule``, a table whose oldest change no base file holds has
        waited its ``max_delta_seconds`` gets its next plan made here too: the writer plans only when it
        writes, so a table whose writes stopped (or whose plans each cover part of it) would wait on.  A
        table whose plans are a job's (``compaction.executor: job``) is only observed by the writer's
        process (``run``, ``apply --once``)."""
        name = target.qualified_name
        skipped = skip_reason(self.store, target)
        if skipped is not None:
            return ServiceOutcome(name, skipped=skipped)
        target = current_target(self.store, target)
        if self.executor is CompactionExecutor.RUN and target.compaction.executor is CompactionExecutor.JOB:
            return self._observe(target)
        with self._locks(target) as held:
            if not held:
                return ServiceOutcome(name, skipped=BUSY)
            return self._execute(target, schedule)

    def _observe(self, target: TableTarget) -> ServiceOutcome:
        """A table whose plans a ``compact`` job executes (``compaction.executor: job``), looked at by
        ``run`` or ``apply --once``: only its backlog is recorded (the job's recorded failure kept), so the
        staleness alert fires when no job runs."""
        name = target.qualified_name
        if not self.lake.table_exists(target.base_path):
            return ServiceOutcome(name, skipped=NO_TABLE)
        backlog = self.lake.service_backlog(target.base_path)
        self._record(name, backlog, None, keep_error=True)
        return ServiceOutcome(name, backlog=backlog)

    def _record(
        self, name: str, backlog: ServiceBacklog, error: str | None, *, keep_error: bool = False
    ) -> None:
        since = backlog.uncompacted_since
        since_ms = None if since is None else int(since * 1000)
        self.store.record_services(name, backlog.pending_plans, since_ms, error, keep_error=keep_error)

    @contextmanager
    def _locks(self, target: TableTarget) -> Iterator[bool]:
        purposes = [LockPurpose.TABLE_SERVICES]
        shared = self.lake.services_lock_shared(target.spec(target.key_fields or ()))
        if not self.same_process and not shared:
            purposes.append(LockPurpose.APPLY)
        with ExitStack() as stack:
            for purpose in purposes:
                if not stack.enter_context(table_lock(self.lock_url, purpose, target.qualified_name)):
                    yield False
                    return
            yield True

    def _plan(self, target: TableTarget, backlog: ServiceBacklog, schedule: bool, now: float) -> PlanNow:
        """What this look plans after executing the pending plans.

        ``schedule``: every file group with logs.  Otherwise a look plans only when compaction is due: a
        plan is pending, or the oldest uncompacted change has waited ``max_delta_seconds`` (the writer
        plans only when it writes).  Beside the writer (``run``'s thread) that is the table's next plan,
        within ``plan_io_mb``, which exists so a compaction leaves the writer a core; a job (``apply
        --once``, ``compact``) has no writer beside it, so a due compaction of a table whose plans are
        bounded covers every file group there."""
        if schedule:
            return PlanNow.EVERY_FILE_GROUP
        waited = target.compaction.max_delta_seconds
        overdue = waited is not None and backlog.staleness_seconds(now) >= waited
        if not self.beside_writer and target.compaction.plan_io_mb is not None:
            return PlanNow.EVERY_FILE_GROUP if overdue or backlog.pending_plans else PlanNow.NOTHING
        return PlanNow.NEXT if overdue else PlanNow.NOTHING

    def _turn(self, name: str) -> AbstractContextManager[float]:
        if self.turn is None:
            return nullcontext(0.0)
        return self.turn.turn(f"table services of {name}")

    def _execute(self, target: TableTarget, schedule: bool) -> ServiceOutcome:
        name = target.qualified_name
        if not self.lake.table_exists(target.base_path):
            return ServiceOutcome(name, skipped=NO_TABLE)
        backlog = self.lake.service_backlog(target.base_path)
        started = self.clock()
        executed: tuple[str, ...] = ()
        error = None
        plan = self._plan(target, backlog, schedule, started)
        if backlog.pending_plans or plan is not PlanNow.NOTHING:  # an idle look starts no write client
            key_fields = self.lake.record_key_fields(target.base_path) or target.key_fields or ()
            try:
                spec = self.lake.kept_spec(target.spec(tuple(key_fields)))  # the table's bucket count
                with self._turn(name):
                    executed = self.lake.run_services(spec, plan=plan)
            except (CdcLakeError, MalformedCommitMetadata) as exc:
                error = str(exc)
                _LOG.warning("table %s: table services failed: %s", name, error)
            backlog = self.lake.service_backlog(target.base_path)
        seconds = self.clock() - started
        self._record(name, backlog, error)
        applier_metrics.record_services(name, target.tier, executed=len(executed), failed=error is not None)
        if executed:
            _LOG.info(
                "table %s: executed %d compaction plans (%s) in %.1f s; %d pending",
                name,
                len(executed),
                ", ".join(executed),
                seconds,
                backlog.pending_plans,
            )
        return ServiceOutcome(name, executed, backlog, seconds, error)


class ServiceThread:
    """A thread that looks at each serviced table every ``check_seconds`` until stopped: ``run``'s
    table-service thread, and ``compact --every``'s.

    ``on_start`` runs first in the thread: ``run`` puts the thread's Spark jobs in their own scheduler
    pool there (:func:`cdc_lake.spark.session.use_pool`), so a compaction does not hold every core while
    a commit waits.  ``on_outcome`` gets every look's outcome."""

    def __init__(
        self,
        services: TableServices,
        targets: Sequence[TableTarget],
        check_seconds: float,
        on_start: Callable[[], None] | None = None,
        on_outcome: Callable[[ServiceOutcome], None] | None = None,
    ) -> None:
        self.services = services
        self.targets = services.serviced(targets)
        self.check_seconds = check_seconds
        self.on_start = on_start
        self.on_outcome = on_outcome
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start the thread; False (and no thread) when no table needs it."""
        if not self.targets:
            return False
        self._thread = threading.Thread(target=self._loop, name="table-services", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Ask the thread to stop after the execution under way, and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        if self.on_start is not None:
            self.on_start()
        while not self._stop.is_set():
            for target in self.targets:
                if self._stop.is_set():
                    return
                try:
                    outcome = self.services.step(target)
                except Exception as exc:  # ours, a JVM's or a bug's: the next look retries; the alert
                    # watches the backlog (the thread died of an error not ours, leaving it to grow)
                    failure = describe_failure(exc)
                    _LOG.warning("table %s: table-service look failed: %s", target.qualified_name, failure)
                    continue
                if self.on_outcome is not None:
                    self.on_outcome(outcome)
            self._stop.wait(self.check_seconds)
