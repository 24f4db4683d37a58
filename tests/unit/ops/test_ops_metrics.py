"""The metrics' conventions: promtool's lint, per-table labels, build info, histograms and names by type."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from support.metrics_scrape import APPLIED, LAST_COMMIT_TIME, full_scrape, table_row

from cdc_lake import applier_metrics
from cdc_lake.config import Config, MonitoringSettings
from cdc_lake.lake.format import DEFAULT_FORMAT, format_facts
from cdc_lake.ops import lag
from cdc_lake.ops.lag import LagReport
from cdc_lake.ops.metrics import LagCollector, freshness_buckets, registry_for
from cdc_lake.stack.promtool import promtool_binary
from cdc_lake.state.store import StateStore

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def families(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Metric]:
    return {f.name: f for f in text_string_to_metric_families(full_scrape(tmp_path, monkeypatch))}


def test_promtool_check_metrics_finds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked = subprocess.run(
        [str(promtool_binary()), "check", "metrics"],
        input=full_scrape(tmp_path, monkeypatch),
        capture_output=True,
        text=True,
        check=False,
    )

    assert checked.returncode == 0 and not checked.stdout + checked.stderr, checked.stdout + checked.stderr


def test_every_series_about_a_table_carries_its_source_and_tier(families: dict[str, Metric]) -> None:
    about_tables = {
        name: family for name, family in families.items() if any("table" in s.labels for s in family.samples)
    }

    for name, family in about_tables.items():
        for sample in family.samples:
            assert sample.labels.get("source") and sample.labels.get("tier"), (name, sample.labels)
    # The applier's own series too, not only the measured gauges.
    assert {"cdc_lake_applied_events", "cdc_lake_commits", "cdc_lake_failures",
            "cdc_lake_batch_duration_seconds"} <= set(about_tables)
    applied = next(s for s in families["cdc_lake_applied_events"].samples if s.labels["table"] == APPLIED)
    assert applied.labels == {"source": "pg", "table": APPLIED, "tier": "0"}


def test_build_info_names_the_versions(families: dict[str, Metric]) -> None:
    info = families["cdc_lake_build_info"]

    assert info.type == "gauge"
    [sample] = info.samples
    assert sample.value == 1.0
    versions = {"version", "python_version", "pyspark_version", "lake_format", "lake_format_version"}
    assert set(sample.labels) == versions
    assert all(sample.labels.values())
    facts = format_facts(DEFAULT_FORMAT)
    assert (sample.labels["lake_format"], sample.labels["lake_format_version"]) == (facts.name, facts.version)


def test_batch_durations_are_a_histogram_per_table(families: dict[str, Metric]) -> None:
    family = families["cdc_lake_batch_duration_seconds"]

    assert family.type == "histogram"
    mine = [s for s in family.samples if s.labels.get("table") == APPLIED]
    count = next(s.value for s in mine if s.name.endswith("_count"))
    under_3s = next(s.value for s in mine if s.name.endswith("_bucket") and s.labels["le"] == "2.5")
    under_1s = next(s.value for s in mine if s.name.endswith("_bucket") and s.labels["le"] == "1.0")
    assert count >= 1 and under_3s >= 1 and under_1s == 0


def test_an_empty_batch_is_not_a_duration(families: dict[str, Metric]) -> None:
    before = _count(families, "cdc_lake_batch_duration_seconds", APPLIED)
    applier_metrics.record_batch(APPLIED, 0, changes=0, offsets=0, committed=False, seconds=0.01)

    after = next(
        s.value
        for family in applier_metrics.BATCH_SECONDS.collect()
        for s in family.samples
        if s.name.endswith("_count") and s.labels["table"] == APPLIED
    )
    assert after == before


def test_freshness_is_also_a_histogram_with_the_tiers_thresholds_as_buckets(
    families: dict[str, Metric],
) -> None:
    family = families["cdc_lake_table_freshness_sampled_seconds"]

    assert family.type == "histogram"
    bounds = {s.labels["le"] for s in family.samples if s.name.endswith("_bucket")}
    assert {"300.0", "3600.0", "14400.0"} <= bounds  # the default tiers' freshness_max_seconds
    mine = [s for s in family.samples if s.labels.get("table") == APPLIED]
    assert next(s.value for s in mine if s.name.endswith("_count")) == 1.0
    assert next(s.value for s in mine if s.name.endswith("_sum")) == 10_000.0


def test_freshness_buckets_follow_the_configured_thresholds() -> None:
    tiers = {3: {"freshness_max_seconds": 42}}
    config = Config(monitoring=MonitoringSettings.model_validate({"tiers": tiers}))

    assert 42.0 in freshness_buckets(config)
    assert freshness_buckets(config) == sorted(set(freshness_buckets(config)))


def test_each_measurement_adds_one_freshness_observation() -> None:
    report = LagReport(measured_at=datetime.now(tz=UTC), tables=[table_row(APPLIED, 0)])
    config = Config(monitoring=MonitoringSettings(refresh_seconds=3600))
    collector = LagCollector(config, measure=lambda c: report)

    collector.samples()
    collector.samples()  # cached: no new measurement, no new observation
    counts = [
        s.value
        for family in collector.collect()
        for s in family.samples
        if s.name == "cdc_lake_table_freshness_sampled_seconds_count"
    ]
    assert counts == [1.0]


def test_names_follow_the_prometheus_conventions(families: dict[str, Metric]) -> None:
    for name, family in families.items():
        assert name.startswith("cdc_lake_"), name
        # prometheus_client's `_created` timestamps would be one more gauge per counter and histogram.
        assert not name.endswith("_created"), name
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), name
        if family.type == "gauge":
            # A gauge named like a counter (or a histogram's parts) misleads rate() and readers.
            assert not name.endswith(("_total", "_count", "_sum", "_bucket", "_errors", "_failures")), name
    assert "cdc_lake_lag_errors" not in families
    assert families["cdc_lake_lag_unreachable_parts"].type == "gauge"
    assert families["cdc_lake_lag_unreachable_parts"].samples[0].value == 1.0


def test_bootstrap_rows_are_a_gauge_per_table(families: dict[str, Metric]) -> None:
    """Each bootstrap writes its rows again from zero: a gauge, never a counter that restarts."""
    assert "cdc_lake_bootstrap_rows" not in families
    family = families["cdc_lake_table_bootstrap_rows_written"]

    assert family.type == "gauge"
    assert [(s.labels, s.value) for s in family.samples] == [
        ({"source": "pg", "table": APPLIED, "tier": "0"}, 42.0)
    ]


def test_the_last_commit_time_is_the_one_the_lag_report_read_from_the_instant(
    families: dict[str, Metric],
) -> None:
    family = families["cdc_lake_table_last_commit_timestamp_seconds"]

    assert family.samples and {s.value for s in family.samples} == {LAST_COMMIT_TIME}


def test_a_possibly_diverged_table_has_its_gauge(families: dict[str, Metric]) -> None:
    marked = {s.labels["table"]: s.value for s in families["cdc_lake_table_possibly_diverged"].samples}

    assert marked["pg.public.skipped"] == 1.0
    assert marked[APPLIED] == 0.0


def test_each_table_counts_its_quarantined_messages(families: dict[str, Metric]) -> None:
    family = families["cdc_lake_quarantined_messages"]
    counted = {s.labels["table"]: s.value for s in family.samples}

    assert family.type == "gauge"
    assert counted["pg.public.skipped"] == 2.0
    assert counted[APPLIED] == 0.0
    assert all(set(s.labels) == {"source", "table", "tier"} for s in family.samples)


def test_the_docs_list_every_metric_with_its_type(families: dict[str, Metric]) -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()

    for name, family in families.items():
        shown = f"{name}_total" if family.type == "counter" else name
        assert f"| `{shown}` | {family.type} |" in operations, shown
    changed = operations[operations.index("### What changed") :]
    assert "cdc_lake_bootstrap_rows_total" in changed and "cdc_lake_lag_errors" in changed


def _count(families: dict[str, Metric], name: str, table: str) -> float:
    counts = (s for s in families[name].samples if s.name.endswith("_count"))
    return next(s.value for s in counts if s.labels.get("table") == table)


def test_every_onboarded_table_has_its_failure_counter_at_0_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A table `run` may apply but that never committed nor failed: dashboards must show 0, not "No data".
    quiet = "pg.public.never_failed"
    url = f"sqlite:///{tmp_path}/state.db"
    with StateStore.open(url) as store:
        store.upsert_source("pg", "postgres", ["c-pg"])
        store.upsert_table(quiet, "pg", 2, "/lake/pg/public/never_failed")
    monkeypatch.setattr(lag, "collect_lag", lambda config: LagReport(measured_at=datetime.now(tz=UTC)))

    registry = registry_for(Config.model_validate({"state_store": {"url": url}}), with_applier=True)
    families = text_string_to_metric_families(generate_latest(registry).decode())
    scraped = {(s.name, s.labels.get("table")): s for family in families for s in family.samples}

    for name in ("cdc_lake_failures_total", "cdc_lake_commits_total", "cdc_lake_applied_events_total"):
        sample = scraped[(name, quiet)]
        assert sample.value == 0 and sample.labels == {"source": "pg", "table": quiet, "tier": "2"}, name
