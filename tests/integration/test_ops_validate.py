"""`cdc-lake validate` names rows changed behind the pipeline's back, and the lake-side alerts fire.

A small Postgres table is onboarded, bootstrapped and applied until LIVE; then:
* `validate` matches (exit 0);
* a row deleted directly in the lake, and a row updated on the source with the connector paused,
  are named by key (missing, different) and `validate` exits 4;
* with nobody applying, freshness and the applier's silence pass their (tiny) thresholds;
* a bad message in the table's topic makes `apply --once` leave the table FAILED, which `status`,
  `lag`, the metrics and the rule all show.
Each alert check also has promtool evaluate the generated rule on the scraped metrics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from support.bootstrap import SourceDb, apply_until_live, onboard, postgres_db, write_db_config
from support.common import cli_run, load
from support.ops import alerts_everywhere

from cdc_lake.hudi.format import hudi_spec
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.target import target_for
from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1800)]

MONITORING = {
    "alert_for_seconds": 0,
    "applier_silent_max_seconds": 2,
    "tiers": {1: {"freshness_max_seconds": 3}},
}


@pytest.fixture
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as found:
        found.execute(
            "create table public.items (id bigint primary key, note text, amount numeric(10, 2), "
            "at timestamptz not null)",
            "insert into public.items select g, 'n' || g, g / 4.0, timestamptz '2024-01-01 00:00Z' + g * "
            "interval '1 minute' from generate_series(1, 300) g",
        )
        yield found


def test_validate_names_changed_rows_and_lake_alerts_fire(
    spark: SparkSession, db: SourceDb, local_stack: LocalStack, tmp_path: Path
) -> None:
    config_path = write_db_config(
        tmp_path / "cfg",
        db,
        [{"name": "items", "tier": 1}],
        str(tmp_path / "lake"),
        monitoring=MONITORING,
        apply={"default_interval_seconds": {1: 1}},
    )
    onboard(config_path, db.source)
    table = db.qualified("items")
    config = load(config_path)
    assert cli_run(config_path, "bootstrap", table).exit_code == 0
    apply_until_live(spark, config, table)

    same = cli_run(config_path, "validate", table, "--buckets", "16", "--json")
    assert same.exit_code == 0, same.stderr or same.output
    (result,) = json.loads(same.stdout)
    assert result["matches"] and result["source_rows"] == result["lake_rows"] == 300

    # Behind the pipeline's back: key 7 deleted in the lake; key 11 updated on the source with the
    # connector paused (the replica has it, Kafka and the lake do not).
    source, entry = config.table(table)
    target = target_for(config, source, entry)
    base_path = config.lake.table_base_path(table)
    doomed = read_table(spark, base_path).where(F.col("id") == 7)
    write_batch(spark, hudi_spec(target.spec(("id",))), doomed, WriteOperation.DELETE)
    assert cli_run(config_path, "connectors", "pause", db.source).exit_code == 0
    try:
        _wait_paused(config_path, db.source)
        db.execute("update public.items set note = 'changed' where id = 11")
        # Nobody applies in this test: do not wait for the lake to catch up with Kafka.
        quick = ("--buckets", "16", "--catch-up-timeout", "5")
        differs = cli_run(config_path, "validate", table, *quick, "--json")
        human = cli_run(config_path, "validate", table, *quick)
    finally:
        assert cli_run(config_path, "connectors", "resume", db.source).exit_code == 0
    assert differs.exit_code == 4, differs.stderr or differs.output
    (result,) = json.loads(differs.stdout)
    assert (result["missing"], result["different"], result["extra"]) == ([{"id": 7}], [{"id": 11}], [])
    assert result["source_rows"] == 300 and result["lake_rows"] == 299
    assert "the lake differs from the source for " + table in differs.stderr
    assert "    id=7" in human.stdout and "    id=11" in human.stdout
    assert all(len(line) <= 80 for line in human.stdout.splitlines()), human.stdout

    # Nobody applies: freshness (3s) and the applier's silence (1s interval + 2s) are breached.
    time.sleep(4)
    firing, report, metrics = alerts_everywhere(config_path, tmp_path)
    assert {"CdcLakeFreshnessBreached", "CdcLakeApplierNotRunning"} <= firing, report["breaches"]
    assert f'cdc_lake_table_freshness_seconds{{source="{db.source}",table="{table}",tier="1"}}' in metrics

    # A message that is not Avro in the Confluent framing: the applier stops the table.
    producer = Producer({"bootstrap.servers": local_stack.kafka.address()})
    producer.produce(target.topic, key=b"not-a-key", value=b"not-an-avro-message")
    producer.flush(30)
    applied = cli_run(config_path, "apply", "--once", "--tables", table, "--json")
    assert applied.exit_code != 0
    (outcome,) = [json.loads(line) for line in applied.stdout.splitlines() if line.startswith("{")]
    assert outcome["status"] == "failed" and outcome["table"] == table
    status = cli_run(config_path, "status")
    assert status.exit_code == 4 and "table-failed.md" in status.stderr
    firing, report, metrics = alerts_everywhere(config_path, tmp_path)
    assert "CdcLakeTableFailed" in firing, report["breaches"]
    assert f'cdc_lake_table_failed{{source="{db.source}",table="{table}",tier="1"}} 1.0' in metrics


def _wait_paused(config_path: Path, source: str, timeout: float = 120.0) -> None:
    """Wait until the source's connector and tasks are PAUSED (a pause takes effect asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = json.loads(cli_run(config_path, "connectors", "status", source, "--json").stdout)
        if all(r["state"] == "PAUSED" and all(t["state"] == "PAUSED" for t in r["tasks"]) for r in rows):
            return
        assert time.monotonic() < deadline, f"connectors of {source} not PAUSED after {timeout:.0f}s: {rows}"
        time.sleep(1)
