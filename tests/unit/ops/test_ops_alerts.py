"""Alert rules from the config, the samples `lag` checks, their runbooks, and the rules under promtool.

promtool (built by dev/setup.sh) checks the rendered file and evaluates it on the samples a
breaching lag report is served as: every rule fires on exactly the instances ``lag`` reports, and the
rule for vanished metrics fires when nothing is scraped.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from support.jmx_exporter import Bean, scrape
from support.metrics_scrape import breaching_report, full_scrape

from cdc_lake.cli.main import cli
from cdc_lake.config import Config, MonitoringSettings, TierThresholds
from cdc_lake.exceptions import ConfigError
from cdc_lake.ops.alerts import ALERTS, breaches, render_rules
from cdc_lake.ops.lag import CaptureRow, LagReport, ReplicaRow, TableRow
from cdc_lake.ops.metrics import lag_samples
from cdc_lake.sources.base import CaptureLag, ReplicaDelay
from cdc_lake.stack.promtool import promtool_binary

ROOT = Path(__file__).resolve().parents[3]
BASE = "https://git.example.com/ops/cdc-lake/blob/v1/docs/runbooks"


def _config(**monitoring: object) -> Config:
    return Config(monitoring=MonitoringSettings.model_validate({"runbook_base_url": BASE, **monitoring}))


def _rules(config: Config) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for r in yaml.safe_load(render_rules(config))["groups"][0]["rules"]}


def _table(tier: int, freshness: float, state: str = "LIVE", lag: int = 0) -> TableRow:
    return TableRow(f"pg.public.t{tier}", "pg", tier, state, lag, freshness, None, 1.0, True, None)


def test_rules_carry_each_tiers_thresholds_from_the_config() -> None:
    config = _config(tiers={0: {"freshness_max_seconds": 42}, 3: {"freshness_max_seconds": 7000}})

    rules = _rules(config)

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


def test_every_rule_links_its_runbook_by_url_and_describes_itself() -> None:
    rules = _rules(_config(runbook_base_url=BASE + "/"))

    for alert in ALERTS:
        annotations = rules[alert.name]["annotations"]
        assert annotations["runbook_url"] == f"{BASE}/{alert.runbook}.md"
        assert annotations["summary"] and annotations["description"], alert.name
        assert annotations["description"] != annotations["summary"], alert.name


def test_rendering_needs_the_runbook_base_url() -> None:
    with pytest.raises(ConfigError, match=r"monitoring\.runbook_base_url"):
        render_rules(Config())

    rendered = yaml.safe_load(render_rules(Config(), runbook_base_url=BASE))
    assert rendered["groups"][0]["rules"][0]["annotations"]["runbook_url"].startswith(BASE + "/")


def test_the_runbook_base_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="runbook_base_url"):
        MonitoringSettings.model_validate({"runbook_base_url": "docs/runbooks"})


def test_schema_changed_and_possibly_diverged_tables_breach() -> None:
    found = {(b.alert, b.labels.get("table")) for b in breaches(lag_samples(breaching_report()), Config())}

    assert ("CdcLakeTableSchemaChanged", "pg.public.changed") in found
    assert ("CdcLakeTablePossiblyDiverged", "pg.public.skipped") in found
    assert not {a for a, table in found if table == "pg.public.ok"}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool_binary()), *args], capture_output=True, text=True, check=False)


def _series(text: str) -> list[dict[str, str]]:
    series = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            series.append({"series": f"{sample.name}{{{labels}}}", "values": f"{float(sample.value)!r}+0x10"})
    return series


Expected = dict[str, list[dict[str, str]]]
"""Per alert, the label sets of the instances that must fire."""


def _rule_test(tmp_path: Path, series: list[dict[str, str]], expected: Expected) -> None:
    """promtool checks the rendered rules, then evaluates them (annotations aside) on ``series``."""
    config = _config()
    rendered = tmp_path / "rules.yml"
    rendered.write_text(render_rules(config))
    checked = _promtool("check", "rules", str(rendered))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = yaml.safe_load(rendered.read_text())
    for rule in rules["groups"][0]["rules"]:
        rule.pop("annotations")  # templates for people; their syntax is what `check rules` parsed
    bare = tmp_path / "bare.yml"
    bare.write_text(yaml.safe_dump(rules, sort_keys=False))
    severity = {rule["alert"]: rule["labels"]["severity"] for rule in rules["groups"][0]["rules"]}
    assert set(expected) <= set(severity), set(expected) - set(severity)
    tests = {
        "rule_files": [str(bare)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {
                    "eval_time": "6m",  # past the rules' `for: 300s`
                    "alertname": name,
                    "exp_alerts": [
                        {"exp_labels": {**labels, "severity": severity[name]}}
                        for labels in expected.get(name, [])
                    ],
                }
                for name in severity
            ],
        }],
    }
    spec = tmp_path / "rules_test.yml"
    spec.write_text(yaml.safe_dump(tests, sort_keys=False))
    tested = _promtool("test", "rules", str(spec))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_promtool_fires_exactly_what_lag_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = breaching_report()
    expected: Expected = {}
    for breach in breaches(lag_samples(report), _config()):
        expected.setdefault(breach.alert, []).append(breach.labels)
    # Every threshold alert is provoked; `lag` cannot see vanished metrics, nor Debezium's own.
    assert set(expected) == {alert.name for alert in ALERTS} - {"CdcLakeMetricsAbsent", DEBEZIUM_BEHIND}

    _rule_test(tmp_path, _series(full_scrape(tmp_path, monkeypatch, report)), expected)


def test_an_alert_fires_when_the_metrics_vanish(tmp_path: Path) -> None:
    unrelated = [{"series": 'up{job="node"}', "values": "1+0x10"}]

    _rule_test(tmp_path, unrelated, {"CdcLakeMetricsAbsent": [{}]})


DEBEZIUM_BEHIND = "CdcLakeDebeziumStreamingBehind"


def _debezium(server: str, behind_ms: int, since_last_event_ms: int) -> list[dict[str, str]]:
    """The JMX exporter's series of a streaming Postgres connector with topic prefix ``server``."""
    labels = f'plugin="postgres",context="streaming",server="{server}"'
    return [
        {"series": f"debezium_metrics_millisecondsbehindsource{{{labels}}}", "values": f"{behind_ms}+0x10"},
        {
            "series": f"debezium_metrics_millisecondssincelastevent{{{labels}}}",
            "values": f"{since_last_event_ms}+0x10",
        },
    ]


def test_debezium_streaming_behind_fires_while_changes_stream_late(tmp_path: Path) -> None:
    late = _debezium("late", behind_ms=200_000, since_last_event_ms=50)
    # Caught up long ago and quiet since: the last change's lag stays in the bean, the source is not behind.
    quiet = _debezium("quiet", behind_ms=200_000, since_last_event_ms=3_600_000)
    current = _debezium("current", behind_ms=800, since_last_event_ms=50)
    fired = {"plugin": "postgres", "context": "streaming", "server": "late"}

    _rule_test(tmp_path, [*late, *quiet, *current], {DEBEZIUM_BEHIND: [fired], "CdcLakeMetricsAbsent": [{}]})


def _streaming_bean(server: str, connector: str) -> Bean:
    """The streaming bean of Postgres connector ``connector`` (custom.metric.tags=connector=NAME)."""
    keys = [("type", "connector-metrics"), ("context", "streaming"), ("server", server)]
    return "debezium.postgres", [*keys, ("connector", connector)]


def _exported(beans: list[tuple[Bean, Mapping[str, object]]]) -> list[dict[str, str]]:
    """promtool input series: what the shipped exporter rules make of ``beans`` on a worker."""
    series = []
    for name, labels, value in scrape(beans):
        selector = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        series.append({"series": f"{name}{{{selector}}}", "values": f"{value!r}+0x10"})
    return series


def test_debezium_streaming_behind_fires_for_the_late_connector_not_its_quiet_sibling(tmp_path: Path) -> None:
    # Tier-0 connectors of one source share its topic prefix (`server`); only custom.metric.tags tell
    # them apart.  A: caught up long ago and quiet since, its last change's lag still in the bean.
    quiet = {"MilliSecondsBehindSource": 200_000, "MilliSecondsSinceLastEvent": 3_600_000}
    late = {"MilliSecondsBehindSource": 200_000, "MilliSecondsSinceLastEvent": 50}
    current = {"MilliSecondsBehindSource": 800, "MilliSecondsSinceLastEvent": 50}
    late_sibling = "cdc-lake.shop.tier0.public.b"
    beans: list[tuple[Bean, Mapping[str, object]]] = [
        (_streaming_bean("shop", "cdc-lake.shop.tier0.public.a"), quiet),
        (_streaming_bean("shop", late_sibling), late),
        # A quiet connector beside a busy one that is not behind: nothing fires.
        (_streaming_bean("crm", "cdc-lake.crm.tier0.public.a"), quiet),
        (_streaming_bean("crm", "cdc-lake.crm.tier0.public.b"), current),
    ]
    fired = {"plugin": "postgres", "context": "streaming", "server": "shop", "connector": late_sibling}

    _rule_test(tmp_path, _exported(beans), {DEBEZIUM_BEHIND: [fired], "CdcLakeMetricsAbsent": [{}]})


def test_debezium_streaming_behind_takes_its_threshold_from_the_config() -> None:
    expr = _rules(_config(debezium_behind_max_seconds=45))[DEBEZIUM_BEHIND]["expr"]

    assert 'debezium_metrics_millisecondsbehindsource{context="streaming"} / 1000 > 45' in expr
    assert breaches([], _config()) == []


def test_alerts_render_names_the_missing_setting_or_takes_the_option(tmp_path: Path) -> None:
    config = tmp_path / "cdc-lake.yaml"
    config.write_text(f"state_store:\n  url: sqlite:///{tmp_path}/state.db\n", encoding="utf-8")
    runner = CliRunner()
    render = ["--config", str(config), "alerts", "render"]

    refused = runner.invoke(cli, render)
    not_http = runner.invoke(cli, [*render, "--runbook-base-url", "docs/x"])
    rendered = runner.invoke(cli, [*render, "--runbook-base-url", BASE])

    assert refused.exit_code == 2 and "monitoring.runbook_base_url" in refused.output
    assert not_http.exit_code == 2 and "--runbook-base-url" in not_http.output
    rules = yaml.safe_load(rendered.stdout)["groups"][0]["rules"]
    assert {rule["annotations"]["runbook_url"] for rule in rules} == {
        f"{BASE}/{alert.runbook}.md" for alert in ALERTS
    }
