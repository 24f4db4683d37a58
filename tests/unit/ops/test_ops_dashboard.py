"""The Grafana dashboard: only exported metrics, and the source, tier and table variables on every panel.

A panel's selector must filter by each variable whose label its metric carries (read from a scrape
of every family, :mod:`support.metrics_scrape`), so picking a source, tier or table narrows every
panel that can be narrowed; the variables themselves chain (tiers of the chosen sources, tables of
the chosen sources and tiers).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.metrics_scrape import full_scrape

ROOT = Path(__file__).resolve().parents[3]
VARIABLES = ("source", "tier", "table")
_SELECTOR = re.compile(r"(cdc_lake_[a-z_]+)(\{[^}]*\})?")


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / "docs" / "grafana" / "cdc-lake.json").read_text())
    return loaded


@pytest.fixture
def labels_by_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """Every exported sample name (``_total``, ``_bucket`` included) and the labels it carries."""
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(full_scrape(tmp_path, monkeypatch)):
        for sample in family.samples:
            found.setdefault(sample.name, set()).update(k for k, v in sample.labels.items() if v)
    return found


def test_the_dashboard_uses_only_exported_metrics(labels_by_series: dict[str, set[str]]) -> None:
    used = {
        name
        for panel in _dashboard()["panels"]
        for target in panel["targets"]
        for name, _ in _SELECTOR.findall(target["expr"])
    }

    assert used and used <= set(labels_by_series), used - set(labels_by_series)


def test_every_panel_follows_the_source_tier_and_table_variables(
    labels_by_series: dict[str, set[str]],
) -> None:
    for panel in _dashboard()["panels"]:
        for target in panel["targets"]:
            for name, selector in _SELECTOR.findall(target["expr"]):
                for variable in VARIABLES:
                    if variable in labels_by_series[name]:
                        assert f'{variable}=~"${variable}"' in selector, (panel["title"], name, variable)


def test_the_variables_chain_source_tier_table() -> None:
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}

    assert set(VARIABLES) <= set(variables)
    for variable in VARIABLES:
        assert variables[variable]["includeAll"] and variables[variable]["multi"], variable
        assert variables[variable]["allValue"] == ".*", variable
    tiers = r'label_values\(cdc_lake_[a-z_]+\{source=~"\$source"\}, tier\)'
    tables = r'label_values\(cdc_lake_[a-z_]+\{source=~"\$source",tier=~"\$tier"\}, table\)'
    assert re.fullmatch(tiers, variables["tier"]["query"])
    assert re.fullmatch(tables, variables["table"]["query"])


def test_the_new_states_have_panels() -> None:
    exprs = " ".join(t["expr"] for panel in _dashboard()["panels"] for t in panel["targets"])

    for shown in (
        "SCHEMA_CHANGED",
        "cdc_lake_table_possibly_diverged",
        "cdc_lake_batch_duration_seconds_bucket",
        "cdc_lake_table_freshness_sampled_seconds_bucket",
        "cdc_lake_build_info",
    ):
        assert shown in exprs, shown


def test_debeziums_streaming_lag_and_queue_have_panels_following_the_source_variable() -> None:
    exprs = " ".join(t["expr"] for panel in _dashboard()["panels"] for t in panel["targets"])

    # The exporter's `server` label is the topic prefix: the source's name unless topic_prefix is set.
    for shown in (
        'debezium_metrics_millisecondsbehindsource{context="streaming",server=~"$source"}',
        'debezium_metrics_queueremainingcapacity{context="streaming",server=~"$source"}',
    ):
        assert shown in exprs, shown


def test_debeziums_panels_show_one_line_per_connector() -> None:
    # The tier-0 connectors of one source share `server`: grouped by it, a quiet connector and a late
    # sibling would be one line (max: the late one's; sum: their queues added).
    panels = _dashboard()["panels"]
    targets = [t for panel in panels for t in panel["targets"] if "debezium_metrics_" in t["expr"]]

    assert targets
    for target in targets:
        groupings = re.findall(r"\bby \(([^)]*)\)", target["expr"])
        assert groupings, target["expr"]
        assert all("connector" in grouping.split(", ") for grouping in groupings), target["expr"]
        assert "{{connector}}" in target["legendFormat"], target["legendFormat"]
