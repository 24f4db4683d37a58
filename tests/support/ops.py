"""Checking an alert condition three ways: ``cdc-lake lag``, the metrics, and the rule under promtool.

:func:`alerts_everywhere` runs ``lag --json`` and ``metrics --once`` on the same config, turns the
scraped samples into promtool input series, and has promtool evaluate the rules file
``alerts render`` wrote: every rule must fire on exactly the instances ``lag`` reported (labels
compared; annotations are left out of the copy promtool reads, as they are templates for people).
``lag`` and the scrape are two observations a few seconds apart: a slot whose walsender is
reconnecting can be inactive in one and active in the other, so a disagreement is observed again
(three times at most) before it fails the test.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from cdc_lake.stack.promtool import promtool_binary
from support.common import cli_run


def _series(text: str) -> list[dict[str, str]]:
    series = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            value = repr(float(sample.value))
            series.append({"series": f"{sample.name}{{{labels}}}", "values": f"{value} {value} {value}"})
    return series


def alerts_everywhere(config: Path, workdir: Path) -> tuple[set[str], dict[str, Any], str]:
    """The alerts firing by ``lag``; also the lag JSON and the metrics text, after promtool agreed.

    Raises AssertionError when promtool's firing alerts differ from ``lag``'s breaches three times.
    """
    for _ in range(2):
        try:
            return _observe(config, workdir)
        except AssertionError:
            time.sleep(5)
    return _observe(config, workdir)


def _observe(config: Path, workdir: Path) -> tuple[set[str], dict[str, Any], str]:
    lag = cli_run(config, "lag", "--json")
    assert lag.exit_code in (0, 4), lag.stderr or lag.output
    report = json.loads(lag.stdout)
    scraped = cli_run(config, "metrics", "--once")
    assert scraped.exit_code == 0, scraped.stderr or scraped.output
    rendered = cli_run(config, "alerts", "render", "--runbook-base-url", "https://runbooks.invalid/cdc-lake")
    assert rendered.exit_code == 0, rendered.stderr
    rules = yaml.safe_load(rendered.stdout)
    for rule in rules["groups"][0]["rules"]:
        rule.pop("annotations")
    rules_file = workdir / "rules.yml"
    rules_file.write_text(yaml.safe_dump(rules, sort_keys=False))
    severity = {rule["alert"]: rule["labels"]["severity"] for rule in rules["groups"][0]["rules"]}
    expected: dict[str, list[dict[str, Any]]] = {name: [] for name in severity}
    for breach in report["breaches"]:
        labels = {**breach["labels"], "severity": severity[breach["alert"]]}
        expected[breach["alert"]].append({"exp_labels": labels})
    tests = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _series(scraped.stdout),
                "alert_rule_test": [
                    {"eval_time": "2m", "alertname": name, "exp_alerts": alerts}
                    for name, alerts in expected.items()
                ],
            }
        ],
    }
    tests_file = workdir / "rules_test.yml"
    tests_file.write_text(yaml.safe_dump(tests, sort_keys=False))
    checked = subprocess.run(
        [str(promtool_binary()), "check", "rules", str(rules_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [str(promtool_binary()), "test", "rules", str(tests_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    firing = {breach["alert"] for breach in report["breaches"]}
    assert (lag.exit_code == 4) == bool(firing), lag.output
    return firing, report, scraped.stdout
