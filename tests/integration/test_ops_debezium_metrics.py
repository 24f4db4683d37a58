"""Debezium's metrics on the local stack: the Connect worker's JMX exporter agent serves a streaming
Postgres connector's MilliSecondsBehindSource under the shipped rules, with the labels the alert and
the dashboard select on; two tier-0 connectors of one source as two series told apart by ``connector``.
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
        found.execute(
            "create table public.items (id bigint primary key)",
            "create table public.quiet (id bigint primary key)",
        )
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


def _behind_by_connector(stack: LocalStack, server: str) -> dict[str, float]:
    """Every streaming MilliSecondsBehindSource series of topic prefix ``server``, by its ``connector``
    label (a series without one under the key ``""``)."""
    scraped = requests.get(stack.connect.metrics_url, timeout=10)
    scraped.raise_for_status()
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(scraped.text):
        for sample in family.samples:
            wanted = {"plugin": "postgres", "context": "streaming", "server": server}
            behind = sample.name == "debezium_metrics_millisecondsbehindsource"
            if behind and wanted.items() <= sample.labels.items():
                label = sample.labels.get("connector", "")
                assert label not in found, f"two series with connector={label!r}: {sample.labels}"
                found[label] = float(sample.value)
    return found


def test_two_tier_zero_connectors_of_one_source_are_two_series_by_connector(
    db: SourceDb, local_stack: LocalStack, tmp_path: Path
) -> None:
    """Issue 36: without a ``connector`` label the tier-0 connectors of one source gave one label set, and a
    quiet connector's alert fired from its busy sibling's figures.  Here the busy one has streamed a change
    (its lag is an age, >= 0) while the quiet one has streamed none (-1): each is its own series."""
    tables = [{"name": "items", "tier": 0}, {"name": "quiet", "tier": 0}]
    onboard(write_db_config(tmp_path / "cfg", db, tables, str(tmp_path / "lake")), db.source)
    busy = f"cdc-lake.{db.source}.tier0.public.items"
    quiet = f"cdc-lake.{db.source}.tier0.public.quiet"
    db.execute("insert into public.items values (1)")

    def both_served() -> bool:
        behind = _behind_by_connector(local_stack, db.source)
        return set(behind) == {busy, quiet} and behind[busy] >= 0

    wait_until(both_served, 60, f"two streaming series, connector={busy} streamed")
    assert _behind_by_connector(local_stack, db.source)[quiet] == -1
