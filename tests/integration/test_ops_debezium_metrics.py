"""Debezium's metrics on the local stack: the Connect worker's JMX exporter agent serves a streaming
Postgres connector's MilliSecondsBehindSource under the shipped rules, with the labels the alert and
the dashboard select on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from support.bootstrap import SourceDb, onboard, postgres_db, write_db_config
from support.common import wait_until

from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as found:
        found.execute("create table public.items (id bigint primary key)")
        yield found


def _behind_source(stack: LocalStack, server: str) -> float | None:
    """The streaming MilliSecondsBehindSource the exporter serves for topic prefix ``server``."""
    scraped = requests.get(stack.connect.metrics_url, timeout=10)
    scraped.raise_for_status()
    for family in text_string_to_metric_families(scraped.text):
        for sample in family.samples:
            wanted = {"plugin": "postgres", "context": "streaming", "server": server}
            if (
                sample.name == "debezium_metrics_millisecondsbehindsource"
                and wanted.items() <= sample.labels.items()
            ):
                return float(sample.value)
    return None


def test_the_exporter_serves_a_streaming_connectors_lag_behind_source(
    db: SourceDb, local_stack: LocalStack, tmp_path: Path
) -> None:
    config = write_db_config(tmp_path / "cfg", db, [{"name": "items", "tier": 1}], str(tmp_path / "lake"))
    onboard(config, db.source)

    db.execute("insert into public.items values (1)")

    def streamed() -> bool:
        # -1 until the connector streamed its first change, then that change's age when it was read.
        behind = _behind_source(local_stack, db.source)
        return behind is not None and behind >= 0

    wait_until(streamed, 30, "debezium_metrics_millisecondsbehindsource of the streaming connector")
