"""The apply lock fenced across a batch's write (issue 34, review 7): not only re-checked right before the
Hudi commit.

A database session lock dies with its connection (a state database restart, a pooler), and another
process may take it while the holder's write runs on.  :meth:`HeldLock.fenced` re-checks the lock every
:data:`~cdc_lake.state.locks.FENCE_SECONDS` while the runner's batch runs and, once it is lost, cancels
the table's Spark jobs: the write stops before its commit, the batch fails naming the lock, nothing is
recorded.  A commit that completes all the same (the loss came after its last Spark job) marks the
table possibly diverged, naming ``cdc-lake validate``.  Real services: the lock is an advisory lock on
the stack's Postgres, terminated there; the write's Spark job runs on the shared SparkSession.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import psycopg
import pytest
from psycopg import sql
from pyspark.sql import SparkSession

from cdc_lake.apply.rewrites import RewriteSource
from cdc_lake.apply.runner import ApplyRunner, applier_options
from cdc_lake.apply.table_applier import BatchResult
from cdc_lake.config import Config, load_config
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.exceptions import StateStoreError
from cdc_lake.lake.applier import ApplierFactory
from cdc_lake.lake.target import TableTarget, select_targets
from cdc_lake.stack.service import HOST, StackCredentials
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import FENCE_SECONDS, LockPurpose, table_lock
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.partition_copy import copy_job_group
from cdc_lake_bootstrap.progress import LineView
from cdc_lake_bootstrap.run import TableBootstrap

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]

EXAMPLE = Path(__file__).resolve().parents[2] / "cdc-lake.example.yaml"
TABLE = "pg.public.orders"
WRITE_SECONDS = 60
"""How long the stand-in write's Spark job would run if nothing stopped it."""


@pytest.fixture
def lock_url() -> Iterator[str]:
    """A fresh database on the stack's Postgres primary holding the locks, dropped afterwards."""
    creds = StackCredentials()
    port = Config.default().stack.ports.postgres_primary
    name = f"cdc_lake_locks_{uuid.uuid4().hex[:8]}"
    admin = dict(host=HOST, port=port, user=creds.db_user, password=creds.db_password, dbname="postgres")
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"postgresql+psycopg://{creds.db_user}:{creds.db_password}@{HOST}:{port}/{name}"
    finally:
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _drop_locks(lock_url: str) -> None:
    """Terminate the sessions holding advisory locks in the lock database, as a state database restart
    would."""
    creds = StackCredentials()
    port = Config.default().stack.ports.postgres_primary
    database = lock_url.rsplit("/", 1)[1]
    admin = dict(host=HOST, port=port, user=creds.db_user, password=creds.db_password, dbname=database)
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(
            "select pg_terminate_backend(pid) from pg_locks "
            "where locktype = 'advisory' and pid <> pg_backend_pid()"
        )


def test_a_lock_lost_during_the_block_is_found_within_the_fence_period(lock_url: str) -> None:
    with table_lock(lock_url, LockPurpose.APPLY, TABLE) as lock:
        assert lock
        kept = threading.Event()
        with lock.fenced(kept.set, every=0.1):
            time.sleep(0.5)
        assert not kept.is_set() and lock.lost is None, "a held lock is never reported lost"
        found = threading.Event()
        with lock.fenced(found.set, every=0.1):
            _drop_locks(lock_url)
            assert found.wait(10), "the fence did not find the lost lock"
        assert lock.lost is not None
        with pytest.raises(StateStoreError, match=r"the apply lock of pg\.public\.orders was lost"):
            lock.verify()


class _Write:
    """The stand-in of a batch's Hudi write: ``job_seconds`` of Spark work in the runner's job group,
    then, if the job finished, a commit.  ``lose`` drops the lock while the job runs (``during_job``) or
    after it, before the commit."""

    def __init__(self, spark: SparkSession, lock_url: str, during_job: bool) -> None:
        self.spark, self.lock_url, self.during_job = spark, lock_url, during_job
        self.committed = False
        self.forgotten = False
        self.schema_change = None
        self.job_seconds = WRITE_SECONDS if during_job else 1

    def apply_batch(self, limit: Any, before_commit: Any) -> BatchResult:
        before_commit()
        seconds = self.job_seconds
        if self.during_job:
            threading.Timer(3, _drop_locks, (self.lock_url,)).start()
        self.spark.sparkContext.parallelize(range(2), 2).foreach(lambda _: time.sleep(seconds))
        if not self.during_job:
            _drop_locks(self.lock_url)
            time.sleep(3 * FENCE_SECONDS)
        self.committed = True
        return BatchResult(TABLE, "pg.public.orders", {0: 0}, {0: 5}, {0: 5}, changes=5,
                           commit_instant="20261203091500000")

    def forget(self) -> None:
        self.forgotten = True


class _NoRegistry(SchemaRegistry):
    def __init__(self) -> None:
        pass


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(f"sqlite:///{tmp_path}/state.db") as opened:
        opened.upsert_source("pg", "postgres", ["cdc-lake.pg"])
        opened.upsert_table(TABLE, "pg", 1, "/lake/orders")
        for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
            opened.transition(TABLE, state)
        opened.save_watermark(TABLE, topic="pg.public.orders", offsets={0: 0}, ts_source_ms=None,
                              source_position=None)
        yield opened


def _runner(spark: SparkSession, store: StateStore, lock_url: str, write: _Write) -> ApplyRunner:
    no_log = SimpleNamespace(capabilities=SimpleNamespace(rewrite_log=False))
    runner = ApplyRunner(
        spark, store, applier_options(load_config(EXAMPLE)), _NoRegistry(), lock_url,
        lambda name: ("pg", cast(RewriteSource, no_log)),
    )
    runner.applier = lambda target: write  # type: ignore[assignment,method-assign,return-value]
    return runner


def _target() -> TableTarget:
    [found] = select_targets(load_config(EXAMPLE), (TABLE,))
    return dataclasses.replace(found, base_path="/lake/orders")


def test_a_lock_lost_during_the_write_cancels_its_spark_jobs_before_the_commit(
    spark: SparkSession, store: StateStore, lock_url: str
) -> None:
    """Before the fence the write ran its minute and committed beside whoever took the lock."""
    write = _Write(spark, lock_url, during_job=True)
    began = time.monotonic()

    outcome = _runner(spark, store, lock_url, write).step(_target())

    assert time.monotonic() - began < WRITE_SECONDS / 2, "the write's Spark job was not cancelled"
    assert not write.committed and write.forgotten
    assert outcome.error is not None and outcome.error.startswith(
        "the apply lock was lost while the batch was written ("
    ), outcome.error
    info = store.require_table(TABLE)
    assert store.get_applied_offsets(TABLE) == {}, "nothing is recorded"
    assert info.state is TableState.FAILED and info.possibly_diverged is None


def test_a_commit_completed_after_the_lock_was_lost_marks_the_table_possibly_diverged(
    spark: SparkSession, store: StateStore, lock_url: str
) -> None:
    write = _Write(spark, lock_url, during_job=False)

    outcome = _runner(spark, store, lock_url, write).step(_target())

    assert write.committed and outcome.error is None
    info = store.require_table(TABLE)
    assert store.get_applied_offsets(TABLE) == {0: 5}, "the commit Hudi holds is recorded"
    assert info.possibly_diverged is not None and info.possibly_diverged.startswith(
        "commit 20261203091500000 completed after the apply lock was lost during its write ("
    ), info.possibly_diverged
    assert f"run cdc-lake validate {TABLE}" in info.possibly_diverged


def test_a_bootstrap_lock_lost_during_the_copy_cancels_the_copys_spark_jobs(
    spark: SparkSession, store: StateStore, lock_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bootstrap's copy under the table's bootstrap lock: its running group's Spark jobs stop once the
    lock is lost (before, the copy never looked at its lock again)."""
    config = load_config(EXAMPLE)
    source, table = config.table(TABLE)
    copy = TableBootstrap(
        config, source, table, store, _NoRegistry(), LineView(lambda line: None), False,
        cast(ApplierFactory, None),
    )
    ran: list[float] = []

    def copying(lock: object) -> None:
        """A group of the copy: a Spark job in the copy's job group, as PartitionCopy runs it."""
        context = spark.sparkContext
        context.setJobGroup(copy_job_group(TABLE), "copy", interruptOnCancel=False)
        threading.Timer(3, _drop_locks, (lock_url,)).start()
        began = time.monotonic()
        try:
            context.parallelize(range(2), 2).foreach(lambda _: time.sleep(WRITE_SECONDS))
        finally:
            ran.append(time.monotonic() - began)

    monkeypatch.setattr(copy, "_run", copying)
    with table_lock(lock_url, LockPurpose.BOOTSTRAP, TABLE) as lock, pytest.raises(Exception, match="cancel"):
        copy.run(lock)

    assert ran and ran[0] < WRITE_SECONDS / 2, "the copy's Spark job was not cancelled"
    assert lock.lost is not None
