"""A table keeps the layout it was created with when the config's ``lake.table_type`` or ``lake.index``
changes: the applier writes it in the layout its commits record (``cdc_lake.lake.layout``), warns once
naming the table and ``cdc-lake rebootstrap`` (which copies it in the config's layout), and the table
ends with one row per key, equal to the changes applied in order, through both readers.

Without it a bucket index looks a key up only in the file group its hash names, and a global index only
in files it can find: the next batch wrote a second row for every key it updated, or failed.  Events are
written straight to Kafka (:class:`SyntheticTopic`), so the expected rows are known exactly.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from support.apply import SyntheticTopic, config_dict, lake_rows, record_catching_up
from support.common import write_and_load

from cdc_lake.apply.runner import ApplyRunner
from cdc_lake.config import Config
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.layout import IndexType, TableLayout, TableType
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]

COW_BLOOM = TableLayout(TableType.COPY_ON_WRITE, IndexType.GLOBAL_BLOOM)
MOR_BUCKET = TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET, 4)  # created by the applier: no sizing


def _config(stack: LocalStack, tmp_path: Path, topic: SyntheticTopic, layout: TableLayout) -> Config:
    lake = {"table_type": layout.table_type.value, "index": layout.index.value}
    data = config_dict(
        stack, [], str(tmp_path / "lake"), f"sqlite:///{tmp_path}/state.db", lake=lake, synthetic=[topic]
    )
    return write_and_load(tmp_path / "cdc-lake.yaml", data)


def _apply(spark: SparkSession, config: Config) -> None:
    (target,) = select_targets(config)
    with StateStore.open(config.state_store.url) as store:
        outcome = ApplyRunner.for_config(spark, store, config).step(target)
    assert outcome.error is None, outcome.error
    assert outcome.offsets > 0


@pytest.mark.parametrize(
    ("created", "configured"), [(COW_BLOOM, MOR_BUCKET), (MOR_BUCKET, COW_BLOOM)], ids=str
)
def test_a_table_keeps_its_layout_when_the_config_names_another(
    spark: SparkSession,
    local_stack: LocalStack,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    created: TableLayout,
    configured: TableLayout,
) -> None:
    prefix = f"layout_{uuid.uuid4().hex[:8]}"
    topic = SyntheticTopic(local_stack, prefix)
    table = f"{prefix}.s.t"
    expected: dict[int, Any] = {}
    config = _config(local_stack, tmp_path, topic, created)
    record_catching_up(config)
    topic.send([(topic.key(k), topic.change("c", k, f"v{k}")) for k in range(1, 13)])
    expected.update({k: f"v{k}" for k in range(1, 13)})
    _apply(spark, config)
    # Keys the table's first write did not create (a MERGE_ON_READ table holds them in log files only).
    topic.send([(topic.key(k), topic.change("c", k, f"v{k}")) for k in range(13, 17)])
    expected.update({k: f"v{k}" for k in range(13, 17)})
    _apply(spark, config)

    config = _config(local_stack, tmp_path, topic, configured)
    updated = [*range(1, 7), *range(13, 17)]
    topic.send(
        [(topic.key(k), topic.change("u", k, f"w{k}")) for k in updated]
        + [(topic.key(k), topic.change("d", k)) for k in (7, 8)]
        + [(topic.key(k), topic.change("c", k, f"n{k}")) for k in (17, 18)]
    )
    expected.update({k: f"w{k}" for k in updated} | {17: "n17", 18: "n18"})
    for k in (7, 8):
        del expected[k]
    with caplog.at_level(logging.WARNING, logger="cdc_lake.apply.lake_state"):
        _apply(spark, config)

    base_path = config.lake.table_base_path(table)
    rows = lake_rows(spark, base_path)
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids)), f"duplicate keys in the lake: {sorted(ids)}"
    assert {row["id"]: row["name"] for row in rows} == expected
    properties = (Path(base_path) / ".hoodie" / "hoodie.properties").read_text()
    assert f"hoodie.table.type={created.table_type.value}" in properties
    commit = latest_commit(spark, base_path, ours=True)
    assert commit is not None and CommitMetadata.from_dict(commit.metadata).layout == created
    warnings = [r.getMessage() for r in caplog.records if "keeps the layout" in r.getMessage()]
    assert warnings == [
        f"{table} keeps the layout it was created with, {created}; the config's {configured} applies to a "
        f"new copy: cdc-lake rebootstrap {table}"
    ]
