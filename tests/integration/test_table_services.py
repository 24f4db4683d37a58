"""MERGE_ON_READ with compaction outside the writes: plans scheduled by the applier, executed beside it.

The table is MERGE_ON_READ with ``lake.compaction.inline: false`` and the record index, then the bucket
index (tier 0's default layout, whose own test closes the file).  Before this
layout had table services, ``inline: false`` scheduled nothing and nothing executed: logs grew forever and
Trino, which reads base files only, never saw a change (the first assertion on pending plans fails on that
code).  Now each apply commit schedules a plan after ``max_delta_commits`` delta commits; ``run``'s
table-service thread executes the plans while the applier keeps committing rounds of updates, deletes
and inserts; the snapshot (Spark, hudi-rs) equals the source after every round, and the backlog a
read-optimized reader misses is measured, served as metrics and alerted on (``CdcLakeCompactionBehind``,
checked by promtool against ``lag``); Trino, through the Hive catalog, shows the bootstrap's rows as
they were (updated rows old, deleted rows still there) while no plan has executed.  ``cdc-lake compact
--schedule`` then compacts everything, and Trino equals the source.  With ``compaction.executor: job``
a ``cdc-lake compact --every`` process executes the plans under Hudi's file-system lock, and neither
``run``'s thread nor ``apply --once`` does.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    commit_runs,
    onboard,
    postgres_db,
    wait_streamed,
    write_db_config,
)
from support.common import cli_run, write_and_load
from support.ops import alerts_everywhere
from support.trino_reader import trino_rows

from cdc_lake.apply.commands import service_thread
from cdc_lake.apply.table_services import ServiceOutcome
from cdc_lake.config import Config
from cdc_lake.hudi import services as hudi_services
from cdc_lake.hudi.services import service_backlog
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.layout import IndexType, TableLayout, TableType
from cdc_lake.lake.target import select_targets
from cdc_lake.spark.session import TABLE_SERVICES_POOL, use_pool
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap import partition_copy, partitions

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ROWS = 300


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as source_db:
        yield source_db


def _round(db: SourceDb, n: int, name: str) -> None:
    db.execute(
        f"update {name} set v = v + {n} where id % 5 = {n % 5}",
        f"delete from {name} where id % 37 = {n}",
        f"insert into {name} select g, {n}, repeat('n', 50) from generate_series({ROWS + 10 * n}, "
        f"{ROWS + 10 * n + 4}) g",
    )


def _bootstrapped(
    db: SourceDb, tmp_path: Path, name: str, lake: dict[str, Any], **sections: Any
) -> tuple[Path, Config]:
    """A ``ROWS``-row tier-0 table ``name``, its config (``lake`` settings and ``sections`` added, the
    stack's Hive catalog), onboarded and bootstrapped."""
    db.execute(
        f"create table {name} (id integer primary key, v integer, note text)",
        f"insert into {name} select g, 0, repeat('n', 50) from generate_series(1, {ROWS}) g",
    )
    hive = {"uri": db.stack.hive_metastore.uri, "database": f"lake_{db.engine}"}
    config_path = write_db_config(
        tmp_path, db, [{"name": name, "tier": 0}], str(tmp_path / "lake"), catalog={"hive": hive}
    )
    data = yaml.safe_load(config_path.read_text())
    data["lake"] = {**data["lake"], **lake}
    data.update(sections)
    config = write_and_load(config_path, data)
    onboard(config_path, db.source)
    outcome = cli_run(config_path, "bootstrap", db.qualified(name))
    assert outcome.exit_code == 0, outcome.stderr or outcome.output
    return config_path, config


@pytest.mark.parametrize("index", ["RECORD_INDEX", "BUCKET"])
def test_compaction_outside_the_writes_keeps_every_reader_exact(
    spark: SparkSession, db: SourceDb, tmp_path: Path, index: str
) -> None:
    """Both MERGE_ON_READ indexes whose compaction runs outside the writes: the record index, and the
    bucket index of tier 0's default layout."""
    name = f"items_{index.lower()}"
    lake = {
        "table_type": "MERGE_ON_READ",
        "index": index,
        # max_delta_seconds: the service thread also plans when a change has waited 3 s, beside the
        # applier's commits (on table version 6 Hudi skips a plan while a write is in flight).
        "compaction": {
            "inline": False, "max_delta_commits": 2, "check_seconds": 1, "max_staleness_seconds": 2,
            "max_delta_seconds": 3,
        },
        # Updates of a file group Hudi counts as small (under this limit: the whole 300-row table) are
        # merged into a new base file, not logged, when the index cannot index log files (the record
        # index): no log, nothing to compact.
        "format_options": {"hoodie.parquet.small.file.limit": "0"},
    }
    config_path, config = _bootstrapped(db, tmp_path, name, lake, monitoring={"alert_for_seconds": 0})
    table = db.qualified(name)
    base_path = config.lake.table_base_path(table)

    # Two rounds, two delta commits: the applier's second commit schedules a plan and executes none.
    for n in (1, 2):
        _round(db, n, name)
        apply_until_live(spark, config, table)
    backlog = service_backlog(spark, base_path)
    assert backlog.pending_plans >= 1, backlog
    assert backlog.uncompacted_since is not None, backlog
    assert_lake_equals_source(spark, config, db, name, read_optimized=False)
    # Trino reads base files only (docs/hudi.md, "Readers"): every bootstrapped row as the bootstrap
    # wrote it, the updated ones old and the deleted ones still shown, until a compaction.
    trino = trino_rows(db.stack, config, table, ["id", "v"])
    seen = {row["id"]: row["v"] for row in trino if row["id"] <= ROWS}
    assert seen == dict.fromkeys(range(1, ROWS + 1), 0), "Trino saw a change no base file holds"
    now = {row["id"]: row["v"] for row in db.rows(name, ("id",))}
    assert any(now.get(key) != 0 for key in range(1, ROWS + 1)), "the rounds changed no bootstrapped row"
    time.sleep(3)  # the oldest uncompacted change is now older than max_staleness_seconds (2)
    with StateStore.open(config.state_store.url) as store:  # as a look of the service thread records it
        since_ms = int(backlog.uncompacted_since * 1000)
        assert store.record_services(table, backlog.pending_plans, since_ms, None)
    firing, report, metrics = alerts_everywhere(config_path, tmp_path)
    assert "CdcLakeCompactionBehind" in firing, report["breaches"]
    (row,) = [t for t in report["tables"] if t["table"] == table]
    assert row["compaction_pending_plans"] >= 1 and row["read_optimized_staleness_seconds"] > 2, row
    assert f'cdc_lake_table_read_optimized_staleness_seconds{{source="{db.source}",table="{table}"' in metrics

    # run's table-service thread executes plans while the applier commits more rounds.
    with StateStore.open(config.state_store.url) as store:
        thread = service_thread(config, spark, store, select_targets(config))
        services = thread.services
        executed: list[str] = []
        original = services.step

        def counting_step(target, *, schedule=False):  # type: ignore[no-untyped-def]
            assert spark.sparkContext.getLocalProperty("spark.scheduler.pool") == TABLE_SERVICES_POOL
            result = original(target, schedule=schedule)
            executed.extend(result.executed)
            assert result.error is None, result.error
            return result

        services.step = counting_step  # type: ignore[method-assign]
        assert thread.check_seconds == 1
        assert thread.start()
        try:
            for n in range(3, 9):
                _round(db, n, name)
                apply_until_live(spark, config, table)
                if n % 3 == 0:
                    assert_lake_equals_source(spark, config, db, name, read_optimized=False)
        finally:
            thread.stop()
    assert len(executed) >= 2, executed
    assert_lake_equals_source(spark, config, db, name, read_optimized=False)

    # The job: plan and execute everything; the read-optimized view (Trino) is then the source.
    compacted = cli_run(config_path, "compact", table, "--schedule", "--json")
    assert compacted.exit_code == 0, compacted.stderr or compacted.output
    (result,) = [json.loads(line) for line in compacted.stdout.splitlines()]
    assert result["status"] == "ok" and result["pending_plans"] == 0, result
    assert result["read_optimized_staleness_seconds"] == 0, result
    assert_lake_equals_source(spark, config, db, name)


def test_a_commit_waits_for_one_compaction_task_not_the_whole_compaction(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The applier's job takes the first core a table-service task frees: under Spark's FIFO scheduler a
    compaction's tasks took every core until the last of them had run, and the commit that came
    meanwhile waited for the whole compaction (issue 35: 68-70 s at 10M rows on the bucket index).
    ``run``'s table-service thread submits its jobs to their own fair-scheduler pool
    (``SCHEDULER_DEFAULTS``); this job stands in for a compaction: 12 tasks of 1 s, more waves than
    cores; the applier's one-task job comes after its first wave started."""
    log = str(tmp_path / "starts")
    tasks = 12

    def started(name: str, seconds: float) -> None:  # a task's body: note its start, hold its core
        with open(log, "a") as out:
            out.write(f"{time.time()} {name}\n")
        time.sleep(seconds)

    def compaction() -> None:
        use_pool(spark, TABLE_SERVICES_POOL)
        spark.sparkContext.parallelize(range(tasks), tasks).foreach(lambda i: started(f"service-{i}", 1))

    thread = threading.Thread(target=compaction)
    thread.start()
    while not Path(log).exists():
        time.sleep(0.05)
    spark.sparkContext.parallelize([0], 1).foreach(lambda i: started("commit", 0))
    thread.join()

    lines = Path(log).read_text().splitlines()
    starts = sorted((float(at), name) for at, name in (line.split() for line in lines))
    order = [name for _, name in starts]
    assert order.index("commit") < tasks - 1, f"the commit's task started after every service task: {order}"
    assert spark.sparkContext.getConf().get("spark.scheduler.mode") == "FAIR"


def test_compact_refuses_a_table_whose_writes_compact_themselves(db: SourceDb, tmp_path: Path) -> None:
    db.execute("create table plain (id integer primary key)")
    config_path = write_db_config(tmp_path, db, [{"name": "plain"}], str(tmp_path / "lake"))
    refused = cli_run(config_path, "compact", db.qualified("plain"))
    assert refused.exit_code != 0
    assert refused.stderr.startswith("error: ") and refused.stderr.count("\n") == 1, refused.stderr
    assert f"table {db.qualified('plain')}" in refused.stderr and "inline: false" in refused.stderr


HOT_ROWS = 50_000
"""About ten plan partitions of 5,000 rows: more than one commit's group (a plan partition per slot, and
the test session's default parallelism is 4)."""


def test_a_tier0_table_is_merge_on_read_by_default_and_apply_once_compacts_it(
    spark: SparkSession, db: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default tier-0 layout (issue 35), end to end from a config naming no layout: onboarded and
    bootstrapped as MERGE_ON_READ + BUCKET in one commit of base files (a bucket table's later groups
    would go into log files: the 10M-row benchmark's first compaction then rewrote the whole copy); its
    writes only plan compaction, and ``apply --once`` (no ``run`` thread beside it) executes the plan
    its batches left: before, no plan was ever executed outside ``run`` and ``compact``, and the table
    was COPY_ON_WRITE.  The bootstrap sizes the bucket count for the table's rows (``lake.rows_per_bucket``
    5,000: 10 buckets, where every table had 4 before) and every later writer, the applier's upserts and
    the compaction, keeps it: a write with the config's default count would give keys a second row."""
    monkeypatch.setattr(partitions, "SINGLE_PARTITION_ROWS", 1000)
    monkeypatch.setattr(partitions, "ROWS_PER_PARTITION", 5000)
    monkeypatch.setattr(partition_copy, "PARTITIONS_PER_COMMIT_PER_SLOT", 1)
    db.execute(
        "create table hot (id integer primary key, v integer, note text)",
        f"insert into hot select g, 0, repeat('h', 20) from generate_series(1, {HOT_ROWS}) g",
    )
    config_path = write_db_config(tmp_path, db, [{"name": "hot", "tier": 0}], str(tmp_path / "lake"))
    data = yaml.safe_load(config_path.read_text())
    data["lake"]["rows_per_bucket"] = HOT_ROWS // 10
    config = write_and_load(config_path, data)
    assert not {"table_type", "index", "compaction", "tier_layouts"} & config.lake.model_fields_set
    table = db.qualified("hot")
    base_path = config.lake.table_base_path(table)
    onboard(config_path, db.source)
    outcome = cli_run(config_path, "bootstrap", table)
    assert outcome.exit_code == 0, outcome.stderr or outcome.output
    properties = (Path(base_path) / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.type=MERGE_ON_READ" in properties, properties
    (group,) = commit_runs(config_path, table)
    assert len(group) >= 8, group
    assert not list(Path(base_path).glob("*.log.*")), "the bootstrap wrote log files"
    commit = latest_commit(spark, base_path, ours=True)
    assert commit is not None
    tier0 = TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET, 10)
    assert CommitMetadata.from_dict(commit.metadata).layout == tier0
    assert _buckets(base_path) == set(range(10))

    # The writer plans after 5 delta commits: rounds applied in this process until a plan is pending.
    for n in range(1, 8):
        db.execute(f"update hot set v = {n} where id % 7 = {n % 7}")
        apply_until_live(spark, config, table)
        if service_backlog(spark, base_path).pending_plans:
            break
    assert service_backlog(spark, base_path).pending_plans >= 1, "no compaction planned in 7 delta commits"
    planned = {row["id"]: row["v"] for row in db.rows("hot", ("id",))}

    db.execute("update hot set v = -1 where id = 1")
    wait_streamed(config, table)  # in Kafka, so the job has a batch to apply
    applied = cli_run(config_path, "apply", "--once", "--json", "--tables", table)
    assert applied.exit_code == 0, applied.stderr or applied.output
    (outcome,) = [json.loads(line) for line in applied.stdout.splitlines() if line.startswith("{")]
    # Where the batch's time went: every step of docs/applier.md's table, the read and the write timed.
    steps = outcome["step_seconds"]
    assert list(steps) == ["plan", "decode", "schema", "frame", "write", "offsets"], outcome
    assert outcome["offsets"] >= 1 and steps["decode"] > 0 and steps["write"] > 0, outcome
    after = service_backlog(spark, base_path)
    assert after.pending_plans == 0, after
    # The read-optimized view (what Trino reads) now holds every change up to the plan.
    read_optimized = {
        row["id"]: row["v"]
        for row in spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")
        .load(base_path).select("id", "v").collect()
    }
    assert {k: v for k, v in read_optimized.items() if k != 1} == {k: v for k, v in planned.items() if k != 1}
    assert_lake_equals_source(spark, config, db, "hot", read_optimized=False)
    # Logs and compacted base files went into the bootstrap's ten buckets, and the commits still say so.
    assert _buckets(base_path) == set(range(10))
    commit = latest_commit(spark, base_path, ours=True)
    assert commit is not None and CommitMetadata.from_dict(commit.metadata).layout == tier0


def _buckets(base_path: str) -> set[int]:
    """The bucket numbers of the table's file groups (Hudi names a bucket's file group after it:
    ``00000007-<uuid>``), from its base and log files."""
    files = [*Path(base_path).glob("*.parquet"), *Path(base_path).glob(".*.log.*")]
    return {int(path.name.lstrip(".").split("-", 1)[0]) for path in files}


FILE_SYSTEM_LOCK = {
    "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
    "hoodie.write.lock.filesystem.expire": "1",
    "hoodie.write.lock.client.wait_time_ms_between_retry": "200",
    "hoodie.write.lock.client.num_retries": "300",
}


def test_a_compaction_job_beside_the_writer_executes_the_plans_run_leaves_it(
    spark: SparkSession, db: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compaction.executor: job`` (docs/hudi.md, "Table services"): ``cdc-lake compact --every``, a
    process of its own under Hudi's file-system lock provider, executes the plans while this process
    applies rounds with ``run``'s table-service thread beside it and an ``apply --once``; neither of
    those executes a plan (any execution in this process fails the test), the thread records the
    backlog, and the snapshot (Spark, hudi-rs) equals the source after the rounds; once the job caught
    up, the read-optimized view and Trino do too, and SIGTERM stops the job cleanly."""
    name = "items_job"
    lake = {
        "table_type": "MERGE_ON_READ",
        "index": "BUCKET",
        "compaction": {
            "inline": False, "max_delta_commits": 2, "check_seconds": 1, "max_delta_seconds": 3,
            "executor": "job",
        },
        "format_options": FILE_SYSTEM_LOCK,
    }
    config_path, config = _bootstrapped(db, tmp_path, name, lake)
    table = db.qualified(name)
    base_path = config.lake.table_base_path(table)

    def executed_here(*args: object, **kwargs: object) -> tuple[str, ...]:
        raise AssertionError("a plan of a table of executor job was executed beside the writer")

    monkeypatch.setattr(hudi_services, "execute_compactions", executed_here)
    log = (tmp_path / "compact.log").open("wb")
    job = subprocess.Popen(
        [sys.executable, "-m", "cdc_lake", "--config", str(config_path), "compact", "--every", "1"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        with StateStore.open(config.state_store.url) as store:
            thread = service_thread(config, spark, store, select_targets(config))
            looks: list[ServiceOutcome] = []
            thread.on_outcome = looks.append
            assert thread.start()
            try:
                for n in range(1, 7):
                    _round(db, n, name)
                    apply_until_live(spark, config, table)
                _round(db, 7, name)
                wait_streamed(config, table)
                applied = cli_run(config_path, "apply", "--once", "--json", "--tables", table)
                assert applied.exit_code == 0, applied.stderr or applied.output
            finally:
                thread.stop()
            assert looks and all(look.executed == () and look.error is None for look in looks), looks
            assert any(look.backlog is not None for look in looks), looks
        assert_lake_equals_source(spark, config, db, name, read_optimized=False)
        deadline = time.monotonic() + 240
        while (backlog := service_backlog(spark, base_path)).uncompacted_since is not None:
            assert job.poll() is None, (tmp_path / "compact.log").read_text()
            assert time.monotonic() < deadline, f"the job left {backlog}"
            time.sleep(1)
    finally:
        job.send_signal(signal.SIGTERM)
        code = job.wait(timeout=120)
        log.close()
    printed = (tmp_path / "compact.log").read_text()
    assert code == 0, printed
    assert "compaction plan" in printed and "stopped" in printed.splitlines(), printed
    assert not (Path(base_path) / ".hoodie" / "lock").exists(), "the job left Hudi's lock file"
    assert_lake_equals_source(spark, config, db, name)
