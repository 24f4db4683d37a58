"""Alert rules from the config, the samples `lag` checks, runbooks and the dashboard."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import yaml

from cdc_lake.config import Config, MonitoringSettings, TierThresholds
from cdc_lake.ops.alerts import ALERTS, breaches, render_rules
from cdc_lake.ops.lag import CaptureRow, LagReport, ReplicaRow, TableRow
from cdc_lake.ops.metrics import HELP, lag_samples
from cdc_lake.sources.base import CaptureLag, ReplicaDelay

ROOT = Path(__file__).resolve().parents[2]


def _config(**monitoring: object) -> Config:
    return Config(monitoring=MonitoringSettings.model_validate(monitoring))


def _table(tier: int, freshness: float, state: str = "LIVE", lag: int = 0) -> TableRow:
    return TableRow(f"pg.public.t{tier}", "pg", tier, state, lag, freshness, None, 1.0, True, None)


def test_rules_carry_each_tiers_thresholds_from_the_config() -> None:
    config = _config(tiers={0: {"freshness_max_seconds": 42}, 3: {"freshness_max_seconds": 7000}})

    rules = {r["alert"]: r for r in yaml.safe_load(render_rules(config))["groups"][0]["rules"]}

    freshness = rules["CdcLakeFreshnessBreached"]["expr"]
    assert 'cdc_lake_table_freshness_seconds{tier="0"} > 42' in freshness
    assert 'cdc_lake_table_freshness_seconds{tier="1"} > 3600' in freshness
    assert 'cdc_lake_table_freshness_seconds{tier="3"} > 7000' in freshness
    assert set(rules) == {alert.name for alert in ALERTS}
    assert all(rule["for"] == "300s" for rule in rules.values())


def test_a_tier_without_thresholds_uses_the_nearest_lower_one() -> None:
    settings = MonitoringSettings(tiers={0: TierThresholds(freshness_max_seconds=5)})

    assert settings.thresholds_for(9).freshness_max_seconds == 4 * 3600
    assert MonitoringSettings(tiers={2: TierThresholds(freshness_max_seconds=5)}).thresholds_for(0)


def test_breaches_follow_the_rules_per_tier_and_per_label_set() -> None:
    config = _config(
        tiers={0: {"freshness_max_seconds": 10}, 1: {"freshness_max_seconds": 100}}, replica_lag_max_bytes=10
    )
    report = LagReport(
        measured_at=datetime.now(tz=UTC),
        captures=[CaptureRow("pg", 1, CaptureLag("c", "lost", 5, 5, slot="s", active=False))],
        replicas=[ReplicaRow("pg", ReplicaDelay(50, 1.0, False, "0/1"))],
        tables=[_table(0, 11.0), _table(1, 11.0), _table(2, 1.0, state="FAILED")],
        source_up={"pg": True},
    )

    found = breaches(lag_samples(report), config)

    by_alert: dict[str, list[dict[str, str]]] = {}
    for breach in found:
        by_alert.setdefault(breach.alert, []).append(breach.labels)
    assert [labels["table"] for labels in by_alert["CdcLakeFreshnessBreached"]] == ["pg.public.t0"]
    assert [labels["table"] for labels in by_alert["CdcLakeTableFailed"]] == ["pg.public.t2"]
    # Bytes over the limit and replay stopped: one alert instance per label set, as PromQL `or` gives.
    assert by_alert["CdcLakeReplicaLagging"] == [{"source": "pg"}]
    assert by_alert["CdcLakeCapturePositionLost"][0]["status"] == "lost"
    assert "CdcLakeSlotInactive" in by_alert
    assert "CdcLakeWalRetainedHigh" not in by_alert


def test_a_healthy_report_breaches_nothing() -> None:
    report = LagReport(
        measured_at=datetime.now(tz=UTC),
        captures=[CaptureRow("pg", 0, CaptureLag("c", "reserved", 5, 0, slot="s", active=True))],
        tables=[_table(0, 1.0)],
        source_up={"pg": True},
    )

    assert breaches(lag_samples(report), Config()) == []


def test_every_alert_has_a_runbook_page_that_names_a_command() -> None:
    for alert in ALERTS:
        page = ROOT / "docs" / "runbooks" / f"{alert.runbook}.md"
        text = page.read_text()
        assert text.startswith(f"# {alert.name}:"), page
        assert "cdc-lake " in text, page
        assert f"({alert.runbook}.md)" in (ROOT / "docs" / "runbooks" / "README.md").read_text()


def test_the_dashboard_and_the_docs_use_only_exported_metrics() -> None:
    exported = {*HELP, "cdc_lake_applied_events_total", "cdc_lake_commits_total", "cdc_lake_failures_total",
                "cdc_lake_bootstrap_rows_total"}
    dashboard = json.loads((ROOT / "docs" / "grafana" / "cdc-lake.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"cdc_lake_[a-z_]+", target["expr"])
    }
    assert used <= exported
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert all(name in operations for name in HELP)
