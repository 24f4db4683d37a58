"""How ``lag`` prints for people: measured values and thresholds in units a person reads, numbers in JSON."""

from __future__ import annotations

import pytest
from support.metrics_scrape import APPLIED, breaching_report

from cdc_lake.cli.ops_output import render_lag, render_validation
from cdc_lake.config import Config
from cdc_lake.ops.alerts import breaches
from cdc_lake.ops.metrics import lag_samples
from cdc_lake.validation import ValidateResult


@pytest.fixture
def lines() -> list[str]:
    report = breaching_report()
    printed: list[str] = []
    render_lag(report, breaches(lag_samples(report), Config()), printed.append)
    return printed


def test_a_breach_in_seconds_reads_as_a_duration(lines: list[str]) -> None:
    # The applied table is 10,000 s (2h46m40s) old; tier 0's freshness threshold is the default's.
    threshold = Config().monitoring.thresholds_for(0).freshness_max_seconds
    minutes, seconds = divmod(int(threshold), 60)
    expected = f"{minutes}m{seconds}s" if seconds else f"{minutes}m"
    assert f"  CdcLakeFreshnessBreached: 2h46m40s (threshold {expected})" in lines, lines


def test_a_breach_in_bytes_reads_in_binary_units(lines: list[str]) -> None:
    assert any(line.startswith("  CdcLakeWalRetainedHigh: 5.0 GiB (threshold ") for line in lines), lines
    assert not any("5368709120" in line for line in lines)


def test_a_count_reads_with_thousands_separators(lines: list[str]) -> None:
    lagging = [line for line in lines if line.startswith("  CdcLakeKafkaLagHigh")]
    assert lagging and lagging[0].split(": ", 1)[1].startswith("1,000,000 (threshold "), lagging


def test_json_keeps_the_numbers() -> None:
    report = breaching_report()
    stale = next(
        b for b in breaches(lag_samples(report), Config())
        if b.alert == "CdcLakeFreshnessBreached" and b.labels.get("table") == APPLIED
    )

    assert stale.to_json()["value"] == 10_000.0
    assert isinstance(stale.to_json()["threshold"], float)


def test_validate_names_a_key_the_lake_holds_twice_as_a_duplicate() -> None:
    result = ValidateResult("pg.public.t", source_rows=11, lake_rows=13, duplicate_count=2)
    result.duplicate = [{"k": "2024-01-01 12:00:00.123475", "lake_rows": 2}, {"k": "x", "lake_rows": 2}]
    printed: list[str] = []
    render_validation(result, printed.append)
    assert not result.matches and result.to_json()["duplicate_count"] == 2
    assert printed[0].startswith("pg.public.t: DIFFERS"), printed
    assert "  duplicate in the lake: 2 keys" in printed
    assert "    2 lake rows for key k=2024-01-01 12:00:00.123475" in printed, printed
