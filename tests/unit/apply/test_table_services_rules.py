"""The table-service executor's rules, with an in-memory format and a real SQLite state store.

Which tables it serves (only those whose writes leave services outside), which locks it holds (a job in
another process takes the apply lock too, unless the lock provider is shared), that a failed execution
is recorded with the backlog and never raised, and that the backlog reaches the state store where
``lag`` and the metrics read it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_lake.apply.table_services import ServiceOutcome, ServiceThread, TableServices
from cdc_lake.exceptions import LakeWriteError
from cdc_lake.lake.applier import BUSY
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.format import CommitInfo, LakeFormat, Partition, PlanNow, ServiceBacklog
from cdc_lake.lake.layout import (
    CompactionExecutor,
    CompactionSpec,
    IndexType,
    TableLayout,
    TableSpec,
    TableType,
)
from cdc_lake.lake.target import TableTarget
from cdc_lake.spark.background import BackgroundSlot
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import LockPurpose, table_lock
from cdc_lake.state.store import StateStore


class _Lake(LakeFormat):
    """Tables that exist, with pending plans a run executes (or fails to)."""

    def __init__(
        self,
        pending: int = 2,
        fail: bool = False,
        recorded: TableLayout | None = None,
        since: float | None = None,
    ) -> None:
        super().__init__(spark=None)  # type: ignore[arg-type]
        self.pending = pending
        self.fail = fail
        self.recorded = recorded
        self.since = since
        self.runs: list[tuple[str, PlanNow]] = []
        self.specs: list[TableSpec] = []

    def table_exists(self, base_path: str) -> bool:
        return True

    def services_outside_write(self, spec: TableSpec) -> bool:
        return spec.table_type is TableType.MERGE_ON_READ and not spec.compaction.inline

    def run_services(self, spec: TableSpec, *, plan: PlanNow = PlanNow.NOTHING) -> tuple[str, ...]:
        self.runs.append((spec.base_path, plan))
        self.specs.append(spec)
        if self.fail:
            raise LakeWriteError(f"compaction of table '{spec.name}' failed: disk full")
        executed = tuple(f"2026120200000{i}" for i in range(self.pending))
        self.pending = 0
        return executed

    def service_backlog(self, base_path: str) -> ServiceBacklog:
        return ServiceBacklog(self.pending, 1_000.0 if self.pending else self.since)

    def record_key_fields(self, base_path: str) -> tuple[str, ...] | None:
        return ("id",)

    def partitions(self, base_path: str) -> tuple[Partition, ...]:
        return ()

    def services_lock_shared(self, spec: TableSpec) -> bool:
        return dict(spec.options).get("hoodie.write.lock.provider") == HMS_LOCK

    def latest_commit(self, base_path: str, *, ours: bool = False) -> CommitInfo | None:
        """The commit recording the table's layout (the table services read nothing else of it)."""
        assert ours, "the layout is read from cdc-lake's latest commit"
        metadata = CommitMetadata(layout=self.recorded).to_dict()
        return CommitInfo("20261201000000", "deltacommit", None, "upsert", metadata)

    def read(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        raise AssertionError("the table services never read, write or remove a table")

    write = records_written = key_refusal = remove = snapshot_in_one_commit = read  # type: ignore[assignment]


def _target(
    name: str, table_type: TableType, inline: bool, options: tuple[tuple[str, str], ...] = ()
) -> TableTarget:
    return TableTarget(
        name, "postgres", f"t.{name}", 0, f"/lake/{name}", None, (), None, table_type, IndexType.RECORD_INDEX,
        CompactionSpec(inline=inline), False, format_options=options,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[StateStore, str]]:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with StateStore.open(url) as opened:
        opened.upsert_source("pg", "postgres")
        for name in ("pg.s.mor", "pg.s.cow"):
            opened.upsert_table(name, "pg", 0, f"/lake/{name}")
            opened.transition(name, TableState.BOOTSTRAPPING)
            opened.transition(name, TableState.CATCHING_UP)
            opened.record_freshness(name, None, 0)
        yield opened, url


HMS_LOCK = "org.apache.hudi.hive.transaction.lock.HiveMetastoreBasedLockProvider"
MOR = _target("pg.s.mor", TableType.MERGE_ON_READ, inline=False)


def test_only_tables_whose_writes_leave_services_outside_are_served(store: tuple[StateStore, str]) -> None:
    services = TableServices(_Lake(), store[0], store[1], beside_writer=True)
    targets = [
        MOR,
        _target("pg.s.cow", TableType.COPY_ON_WRITE, inline=False),
        _target("pg.s.inline", TableType.MERGE_ON_READ, inline=True),
    ]
    assert [t.qualified_name for t in services.serviced(targets)] == ["pg.s.mor"]


def test_an_execution_records_the_backlog_beside_the_freshness(store: tuple[StateStore, str]) -> None:
    db, url = store
    lake = _Lake(pending=2)
    outcome = TableServices(lake, db, url, beside_writer=True).step(MOR, schedule=True)
    assert outcome.executed == ("20261202000000", "20261202000001") and outcome.error is None
    assert lake.runs == [("/lake/pg.s.mor", PlanNow.EVERY_FILE_GROUP)]
    services = db.current_copy("pg.s.mor").freshness.services  # type: ignore[union-attr]
    assert services is not None and (services.pending_plans, services.uncompacted_since_ms) == (0, None)


def test_an_execution_compacts_in_the_bucket_count_the_table_records(store: tuple[StateStore, str]) -> None:
    """A bootstrap sizes a bucket-index table's count (``lake.rows_per_bucket``) and every commit records
    it; the config's target knows only the default (4), so the services write in the recorded count."""
    db, url = store
    bucketed = dataclasses.replace(MOR, index=IndexType.BUCKET)
    recorded = TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET, 40)
    lake = _Lake(pending=1, recorded=recorded)
    outcome = TableServices(lake, db, url, beside_writer=True).step(bucketed)
    assert outcome.error is None and len(outcome.executed) == 1
    assert [spec.layout for spec in lake.specs] == [recorded]


def test_a_failed_execution_is_recorded_not_raised(store: tuple[StateStore, str]) -> None:
    db, url = store
    outcome = TableServices(_Lake(pending=1, fail=True), db, url, beside_writer=True).step(MOR)
    assert outcome.error is not None and "disk full" in outcome.error
    services = db.current_copy("pg.s.mor").freshness.services  # type: ignore[union-attr]
    assert services is not None and services.pending_plans == 1 and services.error == outcome.error
    assert services.uncompacted_since_ms == 1_000_000
    assert db.require_table("pg.s.mor").state is TableState.CATCHING_UP


def test_a_job_in_another_process_waits_for_the_applier_unless_the_lock_is_shared(
    store: tuple[StateStore, str],
) -> None:
    db, url = store
    shared = _target(
        "pg.s.mor", TableType.MERGE_ON_READ, inline=False,
        options=(("hoodie.write.lock.provider", HMS_LOCK),),
    )
    with table_lock(url, LockPurpose.APPLY, "pg.s.mor") as held:
        assert held
        assert TableServices(_Lake(), db, url, beside_writer=False).step(MOR).skipped == BUSY
        assert TableServices(_Lake(), db, url, beside_writer=True).step(MOR).executed
        assert TableServices(_Lake(pending=1), db, url, beside_writer=False).step(shared).executed
    with table_lock(url, LockPurpose.TABLE_SERVICES, "pg.s.mor") as held:
        assert held
        assert TableServices(_Lake(), db, url, beside_writer=True).step(MOR).skipped == BUSY


def test_a_table_not_applied_is_skipped(store: tuple[StateStore, str]) -> None:
    db, url = store
    db.transition("pg.s.mor", TableState.PAUSED)
    lake = _Lake()
    outcome = TableServices(lake, db, url, beside_writer=True).step(MOR)
    assert outcome.skipped == "state PAUSED" and lake.runs == []


def test_the_thread_starts_only_for_served_tables_and_stops(store: tuple[StateStore, str]) -> None:
    db, url = store
    services = TableServices(_Lake(), db, url, beside_writer=True)
    assert not ServiceThread(services, [_target("pg.s.cow", TableType.COPY_ON_WRITE, False)], 1.0).start()
    thread = ServiceThread(services, [MOR], 0.05)
    assert thread.start()
    thread.stop()
    services_seen = db.current_copy("pg.s.mor").freshness.services  # type: ignore[union-attr]
    assert services_seen is not None and services_seen.pending_plans == 0


def test_outcomes_read_in_one_line_for_people_and_as_json_for_machines() -> None:
    from cdc_lake.apply.commands import describe_services, services_json
    from cdc_lake.apply.table_services import ServiceOutcome

    done = ServiceOutcome("pg.s.mor", ("1", "2"), ServiceBacklog(0, None), 12.34)
    assert describe_services(done) == "pg.s.mor: executed 2 compaction plans in 12.3 s; 0 pending"
    failed = ServiceOutcome("pg.s.mor", (), ServiceBacklog(1, 100.0), 1.0, error="boom")
    assert describe_services(failed) == "pg.s.mor: FAILED: boom; 1 pending"
    assert describe_services(ServiceOutcome("pg.s.mor", skipped=BUSY)) == f"pg.s.mor: skipped ({BUSY})"
    as_json = services_json(failed, now=160.0)
    assert as_json["status"] == "failed" and as_json["pending_plans"] == 1
    assert as_json["read_optimized_staleness_seconds"] == 60.0 and as_json["executed"] == []


def test_a_look_at_a_table_without_pending_plans_runs_nothing(store: tuple[StateStore, str]) -> None:
    db, url = store
    lake = _Lake(pending=0)
    outcome = TableServices(lake, db, url, beside_writer=True).step(MOR)
    assert outcome.executed == () and outcome.error is None and lake.runs == []
    assert TableServices(lake, db, url, beside_writer=True).step(MOR, schedule=True).error is None
    assert lake.runs == [("/lake/pg.s.mor", PlanNow.EVERY_FILE_GROUP)]


def test_a_table_whose_oldest_change_waited_max_delta_seconds_gets_its_next_plan(
    store: tuple[StateStore, str],
) -> None:
    """The writer plans only when it writes: a table whose writes stopped kept its last logs out of every
    base file, and with plans bounded by ``plan_io_mb`` the file groups a plan left waited for later
    ones.  A look at a table whose oldest uncompacted change has waited ``max_delta_seconds`` makes the
    table's next plan (within its bound) itself; a table without a time trigger gets none."""
    db, url = store
    timed = dataclasses.replace(MOR, compaction=CompactionSpec(inline=False, max_delta_seconds=120))
    lake = _Lake(pending=0, since=1_000.0)
    TableServices(lake, db, url, beside_writer=True, clock=lambda: 1_119.0).step(timed)
    assert lake.runs == []
    TableServices(lake, db, url, beside_writer=True, clock=lambda: 1_120.0).step(timed)
    assert lake.runs == [("/lake/pg.s.mor", PlanNow.NEXT)]
    lake.runs.clear()
    TableServices(lake, db, url, beside_writer=True, clock=lambda: 9_999.0).step(MOR)
    assert lake.runs == []


def test_a_job_compacts_every_file_group_of_a_table_whose_plans_are_bounded(
    store: tuple[StateStore, str],
) -> None:
    """``plan_io_mb`` bounds a plan so a compaction beside the writer leaves it a core.  A job (``apply
    --once``'s services, ``compact``) has no writer beside it: a due compaction there covers every file
    group, where it executed the writer's one-bucket plan and left the other buckets to later runs (the
    tier-0 stack test's read-optimized view missed the updates of the buckets the plan left out)."""
    db, url = store
    bounded = dataclasses.replace(MOR, compaction=CompactionSpec(inline=False, plan_io_mb=1))
    lake = _Lake(pending=1)
    TableServices(lake, db, url, beside_writer=False).step(bounded)
    assert lake.runs == [("/lake/pg.s.mor", PlanNow.EVERY_FILE_GROUP)]
    lake.runs.clear()
    lake.pending = 1
    TableServices(lake, db, url, beside_writer=True).step(bounded)
    assert lake.runs == [("/lake/pg.s.mor", PlanNow.NOTHING)]
    lake.runs.clear()
    TableServices(lake, db, url, beside_writer=False).step(bounded)  # nothing due: no look plans
    assert lake.runs == []


def test_run_leaves_a_job_executed_table_to_the_job_and_still_records_its_backlog(
    store: tuple[StateStore, str],
) -> None:
    """``compaction.executor: job``: ``run``'s thread executes nothing of the table (a ``compact --every``
    process does, off the writer's cores) but records its backlog, keeping the job's recorded failure,
    so ``lag`` and the staleness alert see a job that stopped or fails."""
    db, url = store
    job = dataclasses.replace(MOR, compaction=CompactionSpec(inline=False, executor=CompactionExecutor.JOB))
    db.record_services("pg.s.mor", 1, 1_000_000, "compaction of table 'pg.s.mor' failed: disk full")
    lake = _Lake(pending=2)
    in_run = TableServices(lake, db, url, beside_writer=True)
    outcome = in_run.step(job)
    assert outcome.executed == () and lake.runs == []
    assert outcome.backlog == ServiceBacklog(2, 1_000.0)
    seen = db.current_copy("pg.s.mor").freshness.services  # type: ignore[union-attr]
    assert seen is not None and seen.pending_plans == 2 and seen.error is not None
    assert in_run.step(MOR).executed  # a table of executor run: run's thread executes it
    lake.pending = 2
    runs = list(lake.runs)
    once = TableServices(lake, db, url, beside_writer=False)  # apply --once's look after its batches
    assert once.step(job).executed == () and lake.runs == runs
    every = TableServices(
        lake, db, url, beside_writer=True, same_process=False, executor=CompactionExecutor.JOB
    )
    assert every.step(job).executed and every.step(MOR).backlog is not None


def test_a_job_beside_the_writer_plans_within_the_bound_and_takes_the_apply_lock_unless_shared(
    store: tuple[StateStore, str],
) -> None:
    """``compact --every``: a writer runs beside it (``run``), so a due plan is the table's next one within
    ``plan_io_mb``, as ``run``'s thread makes it; it is another process than the writer, so it holds
    the table's apply lock while it executes unless the lock provider is shared by processes."""
    db, url = store
    bounded = dataclasses.replace(MOR, compaction=CompactionSpec(inline=False, plan_io_mb=1))
    lake = _Lake(pending=1)
    job_beside = TableServices(
        lake, db, url, beside_writer=True, same_process=False, executor=CompactionExecutor.JOB
    )
    job_beside.step(bounded)
    assert lake.runs == [("/lake/pg.s.mor", PlanNow.NOTHING)]
    shared = dataclasses.replace(bounded, format_options=(("hoodie.write.lock.provider", HMS_LOCK),))
    with table_lock(url, LockPurpose.APPLY, "pg.s.mor") as held:
        assert held
        assert job_beside.step(bounded).skipped == BUSY
        lake.pending = 1
        assert job_beside.step(shared).executed


def test_a_compaction_executed_by_a_job_needs_plans_the_writer_leaves() -> None:
    from pydantic import ValidationError

    from cdc_lake.config.lake import CompactionSettings

    assert CompactionSettings(inline=False, executor="job").executor == "job"
    with pytest.raises(ValidationError, match="executor: job needs inline: false"):
        CompactionSettings(executor="job")


class _Broken(_Lake):
    """A lake whose first execution fails with an error no format wraps (a bug's, a JVM's)."""

    def run_services(self, spec: TableSpec, *, plan: PlanNow = PlanNow.NOTHING) -> tuple[str, ...]:
        if not self.runs:
            self.runs.append((spec.base_path, plan))
            raise RuntimeError("an error nobody wrapped")
        return super().run_services(spec, plan=plan)


def test_the_thread_outlives_an_unexpected_error_and_looks_again(store: tuple[StateStore, str]) -> None:
    """A look failing with an error no format wraps is logged and the next look goes on: the thread died
    of it before, leaving ``run`` without compaction and ``compact --every`` idle for good."""
    db, url = store
    lake = _Broken()
    outcomes: list[ServiceOutcome] = []
    services = TableServices(lake, db, url, beside_writer=True)
    thread = ServiceThread(services, [MOR], 0.01, on_outcome=outcomes.append)
    assert thread.start()
    deadline = time.monotonic() + 10
    while not any(o.executed for o in outcomes) and time.monotonic() < deadline:
        time.sleep(0.01)
    thread.stop()
    assert len(lake.runs) >= 2, lake.runs
    assert any(o.executed for o in outcomes), outcomes


def test_an_execution_waits_for_the_background_turn_a_validation_look_holds(
    store: tuple[StateStore, str],
) -> None:
    """Inside ``run`` a compaction and a continuous validation look never run together: the execution
    starts once the look's turn ends (issue 35 goal 1, :mod:`cdc_lake.spark.background`)."""
    db, url = store
    lake = _Lake(pending=1)
    slot = BackgroundSlot()
    services = TableServices(lake, db, url, beside_writer=True, turn=slot)
    outcomes: list[ServiceOutcome] = []
    with slot.turn("continuous validation of pg.s.mor"):
        stepper = threading.Thread(target=lambda: outcomes.append(services.step(MOR)))
        stepper.start()
        time.sleep(0.3)
        assert lake.runs == [], "the compaction ran while a validation look held the turn"
    stepper.join(5)
    assert lake.runs == [("/lake/pg.s.mor", PlanNow.NOTHING)] and outcomes[0].executed == ("20261202000000",)
    assert slot.holder is None
