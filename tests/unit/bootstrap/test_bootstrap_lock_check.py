"""The bootstrap lock checked before each group of the copy (issue 34, review 7, as for the apply lock).

A database session lock dies with its connection and another bootstrap of the table may then take it.
Before, the copy never re-checked its lock: it went on reading and bulk-inserting groups beside the new
holder (two Hudi writers on one table).  Now each group's read and write starts with the lock's check,
outside the retry of a failed group, so a lost lock ends the copy at once, naming it.  The fence that
cancels a group's running Spark jobs meanwhile is tested on the stack
(``tests/integration/test_apply_lock_fence.py``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, cast

import pytest
from pyspark.sql import SparkSession

from cdc_lake.config import load_config
from cdc_lake.exceptions import StateStoreError
from cdc_lake.lake.format import LakeFormat
from cdc_lake.lake.layout import TableSpec
from cdc_lake.lake.target import target_for
from cdc_lake.sources.snapshot import JdbcAccess
from cdc_lake.state.locks import HeldLock
from cdc_lake.state.records import BootstrapPartition, Watermark
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap import partition_copy
from cdc_lake_bootstrap.partition_copy import PartitionCopy
from cdc_lake_bootstrap.progress import TableProgress
from cdc_lake_bootstrap.read import SnapshotQuery


def test_a_lost_bootstrap_lock_ends_the_copy_before_the_group_is_read_or_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = tmp_path / "cdc-lake.yaml"
    config_file.write_text(
        f"state_store:\n  url: sqlite:///{tmp_path}/state.db\nlake:\n  base_path: {tmp_path}/lake\n"
        "sources:\n  src:\n    engine: postgres\n    primary: {port: 1, database: d, user: u}\n"
        "    tables:\n      - name: s.t\n"
    )
    config = load_config(config_file)
    source, table = next(config.iter_tables())
    checks: list[bool] = []

    def still_held() -> bool:
        checks.append(False)
        return False

    lost = HeldLock(True, "the bootstrap lock of src.s.t", still_held)
    reads: list[Any] = []
    monkeypatch.setattr(partition_copy, "snapshot_rows", lambda *args, **kwargs: reads.append(args))
    with StateStore.open(config.state_store.url) as store:
        copy = PartitionCopy(
            config, table, target_for(config, source, table), cast(LakeFormat, None), store,
            TableProgress("src.s.t"), lambda phase: None, lost.verify,
        )
        watermark = Watermark(
            "src.s.t", "src.s.t", {0: 0}, None, None, dt.datetime.now(dt.UTC), True,
            (BootstrapPartition(0, "true"),),
        )
        with pytest.raises(StateStoreError, match=r"^the bootstrap lock of src\.s\.t was lost \("):
            copy._write(
                cast(SparkSession, None), cast(JdbcAccess, None), cast(SnapshotQuery, None), watermark,
                cast(TableSpec, None), list(watermark.partitions), None,
            )

    assert checks == [False] and reads == [], "checked once, nothing read, not tried again"
