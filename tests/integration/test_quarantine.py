"""A bad message quarantined by the operator: copied with its offset, recorded, and the table goes on.

The table stops at an undecodable message (FAILED, offset 3); ``cdc-lake quarantine`` copies it into
the state store's quarantine with its topic, partition, offset and reason and marks the table possibly
diverged; meanwhile new changes arrive, and the next ``apply --once`` applies them all, skipping only
the quarantined offset, which the Hudi commit lists in its metadata.  A clean validate clears the mark.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from apply_support import SyntheticTopic, config_dict, lake_rows, onboard, write_config
from click.testing import CliRunner
from hudi_rs_support import hudi_rs_rows
from pyspark.sql import SparkSession

from cdc_lake.apply.quarantine import QUARANTINED_KEY
from cdc_lake.cli.main import cli
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def test_a_quarantined_message_is_kept_with_its_offset_and_the_table_keeps_applying(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    topic = SyntheticTopic(local_stack, f"quar_{run}")
    bad_value = topic.change("c", 9)[:-3]
    topic.send(
        [(topic.key(k), topic.change("c", k, f"v{k}")) for k in (1, 2, 3)]
        + [(topic.key(9), bad_value), (topic.key(4), topic.change("c", 4, "after"))]
    )
    config_path = tmp_path / "cdc-lake.yaml"
    config = write_config(
        config_path,
        config_dict(
            local_stack, [], str(tmp_path / "lake"), f"sqlite:///{tmp_path}/state.db", synthetic=[topic]
        ),
    )
    onboard(config)
    table = f"quar_{run}.s.t"
    base = ["--config", str(config_path)]
    runner = CliRunner()

    first = runner.invoke(cli, [*base, "apply", "--once"])
    assert first.exit_code == 1 and "offset 3" in first.output
    with StateStore.open(config.state_store.url) as store:
        assert store.require_table(table).state is TableState.FAILED

    chosen = runner.invoke(
        cli,
        [*base, "quarantine", table, "--partition", "0", "--offset", "3", "--reason", "truncated by a bug"],
    )
    assert chosen.exit_code == 0, chosen.output
    assert "possibly diverged" in chosen.output
    refused = runner.invoke(
        cli, [*base, "quarantine", table, "--partition", "0", "--offset", "1", "--reason", "applied already"]
    )
    assert refused.exit_code == 1 and "already applied" in refused.output
    topic.send(
        [(topic.key(k), topic.change("c", k, f"v{k}")) for k in (5, 6)]
        + [(topic.key(1), topic.change("u", 1, "one"))]
    )

    second = runner.invoke(cli, [*base, "apply", "--once"])

    assert second.exit_code == 0, second.output
    rows = lake_rows(spark, config.lake.table_base_path(table))
    expected = [(1, "one"), (2, "v2"), (3, "v3"), (4, "after"), (5, "v5"), (6, "v6")]
    assert [(r["id"], r["name"]) for r in rows] == expected
    second_reader = hudi_rs_rows(config.lake.table_base_path(table), ["id", "name"])
    assert sorted((r["id"], r["name"]) for r in second_reader) == expected, "hudi-rs"
    commit = latest_commit(spark, config.lake.table_base_path(table))
    assert commit is not None and json.loads(commit.metadata[QUARANTINED_KEY]) == {"0": [3]}
    with StateStore.open(config.state_store.url) as store:
        info = store.require_table(table)
        assert info.state is TableState.LIVE
        assert info.possibly_diverged is not None and "offset 3" in info.possibly_diverged
        (kept,) = store.quarantined(table)
        assert (kept.topic, kept.partition, kept.offset) == (topic.topic, 0, 3)
        assert kept.value == bad_value and kept.key == topic.key(9) and kept.reason == "truncated by a bug"
        assert any(r.command == "quarantine" and r.detail["offset"] == 3 for r in store.list_runs(table))
        assert store.clear_possibly_diverged(table).possibly_diverged is None
    status = runner.invoke(cli, [*base, "status", "--json"])
    assert json.loads(status.output)[0]["possibly_diverged"] is None
