"""Exactly once, end to end: a seeded random workload through bootstrap, ``cdc-lake run`` killed by
SIGKILL, and ``apply --once``, ends with the lake equal to the source.

Per engine, a table of the stack's primary is filled by a random :class:`support.apply.Workload` with
every shape that shares stream positions or carries TOAST placeholders (COPY / LOAD DATA bulk loads,
primary-key updates, multi-statement transactions, a delete, re-insert and update of one key,
INSERT … SELECT, updates of the TOASTed column, single-row changes), onboarded for real and
bootstrapped while the workload keeps writing.  Then ``cdc-lake run`` applies it as tier 0, in its own
process group (Python, the Spark JVM and its workers), with batches of a seeded size, and the whole
group is SIGKILLed at a random moment after it committed while changes still arrive.  ``apply --once``
runs twice more under the workload, and once the workload stops, until the topic's end.

Schema changes on the way: once the bootstrap is done, the workload adds one or two columns at seeded
places among its next ``OPERATIONS`` operations (``ALTER TABLE … ADD COLUMN`` of an int and a text
column, nullable with no default: the one DDL kind the applier evolves in place; every other kind
stops the table or needs a re-bootstrap, docs/schema-changes.md, so none is made here), and later
inserts and updates write them (values and NULLs; older and bulk-loaded rows keep NULL).  So the DDL
lands while ``run`` applies or under the ``apply --once`` runs, possibly in a batch the SIGKILL cuts.

The lake must equal the source in every column, the added ones included, read with Spark+Hudi and with
the second reader (hudi-rs), with no duplicate key; the offsets of the last commit must be the topic's
end; the table must be LIVE (the added columns never stop it).

The seed is ``CDC_LAKE_TEST_SEED`` when set, else random; it is printed.  It fixes the operations in
order, the DDL steps' places counted from the end of the bootstrap, and the batch size (the thread's
timing decides how many operations fall in each phase).  On a failure the
test writes the operations made as a replayable SQL script (``Workload.write_script``) to
``CDC_LAKE_WORKLOAD_DIR`` (default: the test's temporary directory) and names it in the assertion.
CI runs one seed per engine; ``benchmarks/fault_bench.py --seeds N`` runs N.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.apply import SIMPLE_DDL, Capture, Workload, assert_lake_matches, fault_size
from support.bootstrap import SourceDb, onboard, state_of, wait_for_schema, wait_streamed, write_db_config
from support.common import cli_run, load, wait_until
from support.compare import assert_rows_equal
from support.engines import StackEngine

from cdc_lake.config import Config
from cdc_lake.exceptions import LakeWriteError
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.hudi.writer import read_table
from cdc_lake.lake.commit_metadata import OFFSETS_KEY
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

SEED_ENV = "CDC_LAKE_TEST_SEED"
WORKLOAD_DIR_ENV = "CDC_LAKE_WORKLOAD_DIR"
OPERATIONS = fault_size("OPERATIONS", 16)
"""Operations at most in each phase (bootstrap, ``run``, ``apply --once``); as many before onboarding."""
TABLE = "items"


@pytest.fixture
def db(engine: StackEngine, local_stack: LocalStack) -> Iterator[SourceDb]:
    with engine.database(local_stack) as created:
        yield created


def _start(config_path: Path, verb: str, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "cdc_lake", "-v", "--config", str(config_path), verb]
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _applied(spark: SparkSession, config: Config, capture: Capture) -> int:
    """Offsets in the table's last completed commit (bootstrap or apply), summed over partitions."""
    try:
        commit = latest_commit(spark, config.lake.table_base_path(capture.qualified_name))
    except LakeWriteError:  # the applier is creating the table right now
        return 0
    return 0 if commit is None else sum(json.loads(commit.metadata[OFFSETS_KEY]).values())


def _apply_once(config_path: Path) -> None:
    result = cli_run(config_path, "apply", "--once")
    assert result.exit_code == 0, result.stderr or result.output


def _mismatches(spark: SparkSession, capture: Capture, base_path: str) -> int:
    """Keys whose Spark+Hudi row differs from the source's (missing, extra or another value)."""
    frame = read_table(spark, base_path)
    types = {f.name: f.dataType for f in frame.schema.fields}
    lake = {row["id"]: row for row in (r.asDict(recursive=True) for r in frame.collect())}
    source = {row["id"]: row for row in capture.rows()}
    count = len(set(lake) ^ set(source))
    for key in set(lake) & set(source):
        try:
            assert_rows_equal(capture.qualified_name, [source[key]], [lake[key]], types, capture.key)
        except AssertionError:
            count += 1
    return count


def test_seeded_workload_through_bootstrap_run_sigkill_and_apply_ends_exact(
    engine: StackEngine, spark: SparkSession, db: SourceDb, local_stack: LocalStack, tmp_path: Path
) -> None:
    seed = int(os.environ.get(SEED_ENV) or random.randrange(10**6))
    print(f"random seed {seed} (repeat with {SEED_ENV}={seed})")
    rng = random.Random(seed)
    schema = db.schema_of(TABLE).split(".")[0]
    capture = Capture(engine.name, db.source, schema, TABLE, db.source, local_stack, database=db.database)
    workload = Workload(capture, seed, mixed=True, ddl_window=OPERATIONS)
    db.execute(SIMPLE_DDL[engine.name].format(table=workload.table))
    workload.run(OPERATIONS)  # the rows the bootstrap copies (no connector streams them)
    batch = rng.randint(20, 50)
    tables = [{"name": TABLE, "tier": 0, "partition_by": ["region"]}]
    config_path = write_db_config(
        tmp_path,
        db,
        tables,
        str(tmp_path / "lake"),
        apply={"batch_max_events": batch},
        monitoring={"metrics_port": 0},  # no metrics server: a fixed port would clash across tests
    )
    onboard(config_path, db.source)
    config = load(config_path)
    table = db.qualified(TABLE)
    base_path = config.lake.table_base_path(table)
    log = tmp_path / "run.log"
    rows: list[dict[str, object]] = []
    try:
        # Writes go on until the bootstrap returns: a live source (the hand-off on an idle one is
        # test_handoff_idle_mariadb.py's).
        with workload.running(OPERATIONS * 50, pause=1.0):
            wait_for_schema(config, table)  # the bootstrap checks its types against Debezium's schema
            result = cli_run(config_path, "bootstrap", table)
            assert result.exit_code == 0, result.stderr or result.output
        bootstrapped = _applied(spark, config, capture)

        with workload.running(OPERATIONS, pause=1.0, ddl=True):
            service = _start(config_path, "run", log)
            try:
                wait_until(
                    lambda: _applied(spark, config, capture) > bootstrapped or service.poll() is not None,
                    300,
                    "a commit by cdc-lake run",
                )
                time.sleep(rng.uniform(0.0, 4.0))  # inside a later batch's read, write or commit
                assert service.poll() is None, f"run ended before the kill:\n{log.read_text()[-3000:]}"
            finally:
                os.killpg(service.pid, signal.SIGKILL)
                service.wait()
        killed_at = _applied(spark, config, capture)

        with workload.running(OPERATIONS, pause=0.3, ddl=True):
            _apply_once(config_path)
            _apply_once(config_path)
        assert len(workload.added) == len(workload.ddl_at), f"DDL steps made: {workload.added}"
        wait_streamed(config, table)
        for _ in range(3):  # another run only if one stopped at ends it saw while changes arrived
            if _applied(spark, config, capture) == capture.end_offset():
                break
            _apply_once(config_path)
        assert _applied(spark, config, capture) == capture.end_offset()
        assert state_of(config, table) is TableState.LIVE
        try:
            rows = assert_lake_matches(spark, capture, base_path)
        except AssertionError:
            compared, mismatched = len(capture.rows()), _mismatches(spark, capture, base_path)
            print(f"seed {seed}: rows compared {compared}, mismatches {mismatched}")
            raise
    except AssertionError as failure:
        script = workload.write_script(Path(os.environ.get(WORKLOAD_DIR_ENV) or tmp_path))
        raise AssertionError(f"seed {seed}: {failure}\nthe workload's statements: {script}") from failure
    assert bootstrapped < killed_at <= capture.end_offset()
    hoodie = Path(base_path, ".hoodie")
    timeline = hoodie / "timeline" if (hoodie / "timeline").is_dir() else hoodie  # version 8+ / 6
    print(
        f"seed {seed}: rows compared {len(rows)}, mismatches 0; batch {batch}, {len(workload.done)} "
        f"operations (columns added {workload.added} at {workload.ddl_at}), {capture.end_offset()} "
        f"messages; offsets after bootstrap {bootstrapped}, "
        f"at the kill {killed_at}; rollbacks {len(list(timeline.glob('*.rollback')))}"
    )
