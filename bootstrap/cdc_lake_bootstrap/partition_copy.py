"""Steps 3 to 5 of a table's bootstrap: the partition plan, then the copy of the partitions not in the lake.

The plan (:mod:`cdc_lake_bootstrap.partitions`, from sampled keys) is saved with the watermark and
recorded as a ``bootstrap.plan`` run.  Before copying, partitions the lake's latest commit already holds
are marked done (a run killed between a commit and its marks).  The pending partitions are then read
(:mod:`cdc_lake_bootstrap.read`) and bulk-inserted (:mod:`cdc_lake_bootstrap.write`) in groups, one lake
commit and one ``bootstrap.commit`` run per group, each partition marked done after its commit.  A
failed group is tried again in the run unless its cause fails the same way every time; between commits
the running group's rows are estimated from Spark's task counts for the progress view.

Every JDBC session reading a replica first waits until its own server has replayed the watermark's
position, for at most ``bootstrap.replica_wait_timeout_seconds`` (:class:`SessionWait`): the bootstrap's
own wait ran on one connection, and a load-balanced reader endpoint may send a partition's session to
another replica, further behind.  A session whose server did not get there ends the bootstrap at once,
in one line naming the position and the setting (it already waited the whole timeout).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from pyspark.sql import SparkSession

from cdc_lake.config import Config, Table
from cdc_lake.exceptions import BootstrapError, CdcLakeError
from cdc_lake.lake.format import LakeFormat
from cdc_lake.lake.layout import TableSpec, sized_for_rows
from cdc_lake.lake.target import TableTarget
from cdc_lake.sources.snapshot import SESSION_WAIT_FAILED, JdbcAccess, SessionWait, SnapshotSource
from cdc_lake.spark.errors import JVM_ERRORS, describe_failure
from cdc_lake.state.records import BootstrapPartition, RunOutcome, Watermark
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.lake_types import REFUSED_VALUE
from cdc_lake_bootstrap.partitions import PlanInputs, partition_count, plan_partitions, sample_size
from cdc_lake_bootstrap.progress import COMMIT_RUN, PLAN_RUN, TableProgress
from cdc_lake_bootstrap.read import SnapshotQuery, snapshot_rows
from cdc_lake_bootstrap.replica_wait import REPLICA_RUNBOOK, TIMEOUT_SETTING
from cdc_lake_bootstrap.write import attempt_id, lake_state, write_group

_LOG = logging.getLogger(__name__)

PARTITIONS_PER_COMMIT_PER_SLOT = 4
"""A Hudi commit holds this many plan partitions per executor slot: each commit costs seconds of Hudi
bookkeeping, each partition in it is re-read if the commit fails (fewer commits, coarser resume)."""
WRITE_ATTEMPTS = 2
"""A group whose read or write fails (a dropped connection) is tried this many times in one run."""
_TICK_SECONDS = 1.0
_FAILURES: tuple[type[Exception], ...] = (CdcLakeError, *JVM_ERRORS)


_SERVER_WORDS_END = re.compile(r"['\"]|\s(?:Where|CONTEXT):")
"""Where a session wait's own words end in a failure's cause (the quote MySQL's error wraps them in, the
context Postgres appends)."""


def write_failure(
    table: str, indexes: list[int], cause: str, attempt: int, wait: SessionWait | None = None
) -> BootstrapError | None:
    """The error ending the bootstrap after the ``attempt``-th failed write of partitions ``indexes``, or
    None to try once more.

    A value the lake type refuses (``cause`` is the query's message naming column and row) fails the
    same way on every run: it ends the bootstrap at once and says what to change, with no "resume".
    A session whose server had not replayed the watermark's position (``wait``, the sessions' wait)
    ends it at once too: it has waited the whole timeout already.  Anything else (a dropped
    connection, a Hudi write error) is tried again, then resumed by a new run.
    """
    if wait is not None and SESSION_WAIT_FAILED in cause:
        words = cause[cause.find(SESSION_WAIT_FAILED) + len(SESSION_WAIT_FAILED) :]
        server = _SERVER_WORDS_END.split(words, maxsplit=1)[0].strip()
        return BootstrapError(
            f"table {table}: partitions {indexes} not read: their session's server had not replayed the "
            f"watermark position {wait.position}, waiting at most {wait.timeout_seconds:g}s "
            f"({TIMEOUT_SETTING}): {server} ({REPLICA_RUNBOOK}); the table stays BOOTSTRAPPING: once the "
            f"replicas have replayed it, run cdc-lake bootstrap {table} again"
        )
    if REFUSED_VALUE in cause:
        raised = cause[max(0, cause.find(f"table {table}: ")) :]  # without the JVM exception's class
        return BootstrapError(
            f"{raised}; the table stays BOOTSTRAPPING: after that change, run cdc-lake bootstrap {table} "
            "again"
        )
    if attempt < WRITE_ATTEMPTS:
        return None
    return BootstrapError(
        f"table {table}: writing partitions {indexes} failed: {cause}; run the bootstrap again to resume"
    )


def copy_job_group(table: str) -> str:
    """The Spark job group of ``table``'s copy (progress counts its tasks; a lost lock cancels it)."""
    return f"cdc-lake bootstrap {table}"


class PartitionCopy:
    """One table's partition plan and the copy of its pending partitions into ``target``."""

    def __init__(
        self,
        config: Config,
        table: Table,
        target: TableTarget,
        lake: LakeFormat,
        store: StateStore,
        progress: TableProgress,
        show: Callable[[str | None], None],
        before_write: Callable[[], None],
    ) -> None:
        """``lake``: the configured format, loaded once for the whole copy; ``progress`` is updated as
        groups are read and committed, and ``show`` shows it (a new phase); ``before_write`` runs before
        each group is read and written and raises to stop the copy (the bootstrap lock's check)."""
        self.config = config
        self.before_write = before_write
        self.table = table
        self.target = target
        self.lake = lake
        self.store = store
        self.progress = progress
        self._show = show
        self.name = target.qualified_name

    def _executors(self, spark: SparkSession) -> int:
        return max(1, int(spark.sparkContext.defaultParallelism))

    def plan(
        self,
        spark: SparkSession,
        engine: SnapshotSource,
        role: str,
        estimated_rows: int,
        estimated_bytes: int,
        key: tuple[str, ...],
    ) -> Watermark:
        """Cut the key range into partitions from a sample of keys read on ``role`` and save the plan."""
        count = partition_count(
            estimated_rows, estimated_bytes, self._executors(spark), self.config.bootstrap.max_partitions
        )
        sample: list[tuple[str, ...]] = []
        if count > 1:
            sample = engine.sample_key_literals(
                self.table.name, key, sample_size(count, estimated_rows), estimated_rows, role
            )
        plan = plan_partitions(
            PlanInputs(tuple(engine.quote_identifier(k) for k in key), sample, count, engine.row_comparisons)
        )
        watermark = self.store.set_partition_plan(self.name, plan)
        detail = {
            "attempt": attempt_id(watermark),
            "estimated_rows": estimated_rows,
            "estimated_bytes": estimated_bytes,
            "partitions": len(plan),
            "key": list(key),
            "sampled_keys": len(sample),
        }
        run_id = self.store.start_run(PLAN_RUN, self.name, detail)
        self.store.finish_run(run_id, RunOutcome.OK, detail)
        _LOG.info("%s: %d partitions from %d sampled keys", self.name, len(plan), len(sample))
        return watermark

    def reconcile(self, watermark: Watermark) -> Watermark:
        """Mark done what the lake's latest commit holds (a run killed between commit and marks)."""
        lake = lake_state(self.lake, self.target.base_path, self.name, watermark)
        for index in sorted(lake.committed):
            if any(p.index == index and not p.done for p in watermark.partitions):
                watermark = self.store.mark_partition_done(self.name, index)
        return watermark

    def copy(
        self,
        spark: SparkSession,
        engine: SnapshotSource,
        role: str,
        query: SnapshotQuery,
        watermark: Watermark,
        key: tuple[str, ...],
    ) -> None:
        """Read ``query`` on ``role`` for every pending partition and write them, one commit per group."""
        progress = self.progress
        progress.partitions_total = len(watermark.partitions)
        progress.partitions_done = progress.partitions_total - len(watermark.pending_partitions)
        progress.estimated_rows = self._estimated_rows(watermark)
        progress.rows_written = progress.rows_before = self._rows_committed(watermark)
        progress.started = time.monotonic()
        wait = self.session_wait(role, watermark)
        access = engine.jdbc_access(role, wait)
        spec = self._created_spec(key, progress.estimated_rows)
        spec = dataclasses.replace(spec, parallelism=self._executors(spark))
        pending = list(watermark.pending_partitions)
        group_size = self._executors(spark) * PARTITIONS_PER_COMMIT_PER_SLOT
        if self.lake.snapshot_in_one_commit(spec):
            group_size = max(1, len(pending))
        self._show("copying")
        for start in range(0, len(pending), group_size):
            group = pending[start : start + group_size]
            began = time.monotonic()
            with self._ticking(spark, len(group)):
                instant = self._write(spark, access, query, watermark, spec, group, wait)
            rows = self.lake.records_written(self.target.base_path, instant)
            for partition in group:
                watermark = self.store.mark_partition_done(self.name, partition.index)
            detail = {
                "attempt": attempt_id(watermark),
                "partitions": [p.index for p in group],
                "rows": rows,
                "instant": instant,
                "seconds": round(time.monotonic() - began, 3),
            }
            run_id = self.store.start_run(COMMIT_RUN, self.name, detail)
            self.store.finish_run(run_id, RunOutcome.OK, detail)
            progress.committed(rows, len(group))
            self._show(None)

    def _created_spec(self, key: tuple[str, ...], estimated_rows: int) -> TableSpec:
        """The table as this copy writes it: in the layout its commits record, if it has any (a copy
        resumed); else sized for the plan's row estimate (a bucket-index table's bucket count)."""
        spec = self.target.spec(key)
        if self.lake.latest_commit(spec.base_path, ours=True) is not None:
            return self.lake.kept_spec(spec)
        return sized_for_rows(spec, estimated_rows, self.config.lake.rows_per_bucket)

    def session_wait(self, role: str, watermark: Watermark) -> SessionWait | None:
        """What each session reading ``role`` waits for first: the watermark's position on a replica
        (none on the primary, nor for a watermark without a position: the time rule)."""
        if role != "replica" or not watermark.source_position:
            return None
        return SessionWait(watermark.source_position, self.config.bootstrap.replica_wait_timeout_seconds)

    def _estimated_rows(self, watermark: Watermark) -> int:
        attempt = attempt_id(watermark)
        for run in self.store.list_runs(self.name, limit=1000):
            if run.command == PLAN_RUN and run.detail.get("attempt") == attempt:
                return int(run.detail.get("estimated_rows", 0))
        return 0

    def _rows_committed(self, watermark: Watermark) -> int:
        attempt = attempt_id(watermark)
        return sum(
            int(run.detail.get("rows", 0))
            for run in self.store.list_runs(self.name, limit=1000)
            if run.command == COMMIT_RUN and run.detail.get("attempt") == attempt
        )

    def _write(
        self,
        spark: SparkSession,
        access: JdbcAccess,
        query: SnapshotQuery,
        watermark: Watermark,
        spec: TableSpec,
        group: Sequence[BootstrapPartition],
        wait: SessionWait | None,
    ) -> str:
        """Read and bulk-insert one group, trying again once after a failure (e.g. a dropped connection);
        ``wait``: what its sessions waited for (:meth:`session_wait`)."""
        indexes = [p.index for p in group]
        source_ts = watermark.ts_source_ms or 0
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            self.before_write()  # outside the retry: a lost lock is never tried again
            try:
                rows = snapshot_rows(
                    spark, access, query, group, self.config.bootstrap.fetch_size, self.name, source_ts
                )
                return write_group(self.lake, spec, rows, watermark, indexes, query.char_lengths)
            except _FAILURES as exc:
                cause = describe_failure(exc)
                # The whole trace (Spark's, Hudi's) only in the log: -v shows it.
                _LOG.info("%s: partitions %s failed: %s", self.name, indexes, cause, exc_info=exc)
                committed = self._committed_instant(watermark, indexes)
                if committed is not None:
                    return committed
                error = write_failure(self.name, indexes, cause, attempt, wait)
                if error is not None:
                    raise error from exc
                _LOG.info("%s: partitions %s failed (%s); trying again", self.name, indexes, cause)
        raise AssertionError("unreachable")

    def _committed_instant(self, watermark: Watermark, indexes: list[int]) -> str | None:
        """The latest commit's instant if it holds ``indexes`` (the failure came after the commit)."""
        try:
            if set(indexes) <= lake_state(self.lake, self.target.base_path, self.name, watermark).committed:
                commit = self.lake.latest_commit(self.target.base_path)
                return None if commit is None else commit.instant
        except _FAILURES:
            return None
        return None

    @contextmanager
    def _ticking(self, spark: SparkSession, partitions: int) -> Iterator[None]:
        """Estimate rows read by the running commit from Spark's task counts, once a second."""
        context = spark.sparkContext
        group = copy_job_group(self.name)
        context.setJobGroup(group, group, interruptOnCancel=False)
        per_partition = self.progress.estimated_rows / max(1, self.progress.partitions_total)
        stop = threading.Event()

        def tick() -> None:
            tracker = context.statusTracker()
            while not stop.wait(_TICK_SECONDS):
                done = total = 0
                for job_id in tracker.getJobIdsForGroup(group):
                    job = tracker.getJobInfo(job_id)
                    for stage_id in job.stageIds if job is not None else ():
                        stage = tracker.getStageInfo(stage_id)
                        if stage is not None:
                            done += stage.numCompletedTasks
                            total += stage.numTasks
                share = done / total if total else 0.0
                self.progress.reading(int(share * per_partition * partitions))
                self._show(None)

        thread = threading.Thread(target=tick, name="bootstrap-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
