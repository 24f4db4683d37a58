"""Exactly once: ``cdc-lake apply --once`` killed with SIGKILL at random points, restarted, ends exact.

Each engine gets a backlog of changes; ``apply --once`` runs in its own process group (Python, the Spark
JVM and its Python workers) with small batches, and the whole group is SIGKILLed, each time at a
random moment after the run completed a commit, while more changes keep arriving.  A last run
completes; the lake must equal the source with no duplicate key, and the offsets in the last commit
must be the topic's end.  CI kills once (each kill costs a Spark start); ``benchmarks/fault_bench.py``
runs the full size (``--kills``, ``--rows``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.apply import (
    Capture,
    Workload,
    assert_lake_matches,
    fault_size,
    per_engine_capture,
    record_catching_up,
    workload_config,
)
from support.common import wait_until

from cdc_lake.config import Config
from cdc_lake.exceptions import HudiWriteError
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.lake.checkpoint import OFFSETS_KEY
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1500)]

KILLS = fault_size("KILLS", 1)
BACKLOG = fault_size("ROWS", 220)
"""Changes waiting before the first run: at 50 a batch, that run is still busy when it is killed."""
ARRIVING = 40
"""Changes made after each kill."""

capture = per_engine_capture()


def _start_apply(config_path: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "cdc_lake", "-v", "--config", str(config_path), "apply", "--once"]
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _applied(spark: SparkSession, config: Config, capture: Capture) -> int:
    try:
        commit = latest_commit(spark, config.lake.table_base_path(capture.qualified_name))
    except HudiWriteError:  # the applier is creating the table right now
        return 0
    return 0 if commit is None else sum(json.loads(commit.metadata[OFFSETS_KEY]).values())


def _wait_for_commit(
    spark: SparkSession, config: Config, capture: Capture, before: int, process: subprocess.Popen[bytes]
) -> None:
    def committed() -> bool:
        return _applied(spark, config, capture) > before or process.poll() is not None

    wait_until(committed, 300, "a commit by the applier")


def test_sigkill_during_batches_then_restart_ends_exact(
    spark: SparkSession, capture: Capture, local_stack: LocalStack, tmp_path: Path
) -> None:
    rng = random.Random()
    seed = rng.randrange(10**6)
    print(f"random seed {seed}")
    rng.seed(seed)
    config_path = tmp_path / "cdc-lake.yaml"
    config = workload_config(config_path, local_stack, capture, batch_max_events=50)
    record_catching_up(config)
    workload = Workload(capture, seed)
    workload.run(BACKLOG)
    capture.wait_for(workload.messages)
    log = tmp_path / "apply.log"

    progress = []
    for _ in range(KILLS):
        before = _applied(spark, config, capture)
        process = _start_apply(config_path, log)
        # Kill at a random moment after this run completed a commit: inside a later batch's read,
        # decode, write, commit or state-store update.
        _wait_for_commit(spark, config, capture, before, process)
        time.sleep(rng.uniform(0.0, 8.0))
        assert process.poll() is None, f"apply ended before the kill; see {log}:\n{log.read_text()[-3000:]}"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        progress.append(_applied(spark, config, capture))
        workload.run(ARRIVING)
    assert progress == sorted(progress) and progress[0] > 0

    capture.wait_for(workload.messages)
    for _ in range(2):  # a second run only if the first stopped at ends it saw while changes still arrived
        if _applied(spark, config, capture) == capture.end_offset():
            break
        finished = subprocess.run(
            [sys.executable, "-m", "cdc_lake", "--config", str(config_path), "apply", "--once"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert finished.returncode == 0, finished.stderr[-3000:]
    assert _applied(spark, config, capture) == capture.end_offset()
    assert_lake_matches(spark, capture, config.lake.table_base_path(capture.qualified_name))
    timeline = Path(config.lake.table_base_path(capture.qualified_name), ".hoodie", "timeline")
    print(f"offsets applied after each kill: {progress}; rollbacks: {len(list(timeline.glob('*.rollback')))}")
