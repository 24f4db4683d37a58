"""The alerts: one declaration per alert, rendered as Prometheus rules and checked by ``cdc-lake lag``.

Each :class:`Alert` is a set of :class:`Condition` (OR-ed): a metric of :mod:`cdc_lake.ops.metrics`,
label matchers, a comparison and a threshold read from the config's ``monitoring`` section (per
tier where the metric has a ``tier`` label).  :func:`render_rules` writes them as a Prometheus
rules file (``cdc-lake alerts render``); :func:`breaches` evaluates the very same conditions on
the samples ``cdc-lake lag`` measured, so ``lag`` exits non-zero exactly when a rule would fire
(``for:`` aside).  Every alert names its runbook in ``docs/runbooks/``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from cdc_lake.config import Config
from cdc_lake.ops.metrics import Sample

Threshold = Callable[[Config, int], float]
"""A threshold from the config for a tier (alerts without a tier get tier 0)."""

_OPS: dict[str, Callable[[float, float], bool]] = {">": operator.gt, "<": operator.lt, "==": operator.eq}


@dataclass(frozen=True)
class Condition:
    """``metric{matchers} op threshold``; ``per_tier`` renders one expression per tier."""

    metric: str
    op: str
    threshold: Threshold
    matchers: Mapping[str, str] = field(default_factory=dict)
    per_tier: bool = False

    def expressions(self, config: Config, tiers: Sequence[int]) -> list[str]:
        """The PromQL expressions of this condition (one per tier if ``per_tier``)."""
        if not self.per_tier:
            return [self._expr(dict(self.matchers), self.threshold(config, 0))]
        return [self._expr({**self.matchers, "tier": str(t)}, self.threshold(config, t)) for t in tiers]

    def _expr(self, matchers: Mapping[str, str], threshold: float) -> str:
        selector = ",".join(
            f'{key}=~"{value}"' if _is_regex(value) else f'{key}="{value}"' for key, value in matchers.items()
        )
        braces = f"{{{selector}}}" if selector else ""
        return f"{self.metric}{braces} {self.op} {_number(threshold)}"

    def holds(self, sample: Sample, config: Config) -> float | None:
        """The threshold ``sample`` breaches, or None when it does not."""
        if sample.name != self.metric:
            return None
        labels = sample.labels
        if any(re.fullmatch(value, labels.get(key, "")) is None for key, value in self.matchers.items()):
            return None
        tier = int(sample.labels.get("tier", "0")) if self.per_tier else 0
        threshold = self.threshold(config, tier)
        return threshold if _OPS[self.op](sample.value, threshold) else None


@dataclass(frozen=True)
class Alert:
    """One alert: its conditions, severity, a summary (Prometheus template) and its runbook page."""

    name: str
    severity: str
    summary: str
    runbook: str
    conditions: tuple[Condition, ...]

    def expr(self, config: Config, tiers: Sequence[int]) -> str:
        """The rule's PromQL expression."""
        return " or ".join(e for c in self.conditions for e in c.expressions(config, tiers))


def _is_regex(value: str) -> bool:
    return any(ch in value for ch in "|.*+?()[]")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _const(value: float) -> Threshold:
    return lambda config, tier: value


def _tier(name: str) -> Threshold:
    return lambda config, tier: float(getattr(config.monitoring.thresholds_for(tier), name))


def _monitoring(name: str) -> Threshold:
    return lambda config, tier: float(getattr(config.monitoring, name))


def _applier_silence(config: Config, tier: int) -> float:
    return float(config.apply.interval_for(tier) + config.monitoring.applier_silent_max_seconds)


RUNBOOKS = "docs/runbooks"

ALERTS: tuple[Alert, ...] = (
    Alert(
        "CdcLakeWalRetainedHigh", "warning",
        "{{ $labels.source }}: {{ $labels.connector }} holds {{ $value | humanize1024 }}B of WAL/binlog",
        "wal-retained-high",
        (Condition("cdc_lake_slot_retained_wal_bytes", ">", _tier("wal_retained_max_bytes"), per_tier=True),),
    ),
    Alert(
        "CdcLakeSlotInactive", "warning",
        "{{ $labels.source }}: replication slot {{ $labels.slot }} has no active reader",
        "slot-inactive",
        (Condition("cdc_lake_slot_active", "==", _const(0)),),
    ),
    Alert(
        "CdcLakeSlotWalUnreserved", "critical",
        "{{ $labels.source }}: slot {{ $labels.slot }} needs WAL beyond max_slot_wal_keep_size",
        "slot-wal-unreserved",
        (Condition("cdc_lake_capture_status", "==", _const(1), {"status": "unreserved"}),),
    ),
    Alert(
        "CdcLakeCapturePositionLost", "critical",
        "{{ $labels.source }}: {{ $labels.connector }} cannot resume: slot or binlog {{ $labels.status }}",
        "position-lost",
        (Condition("cdc_lake_capture_status", "==", _const(1), {"status": "lost|missing|purged"}),),
    ),
    Alert(
        "CdcLakeBinlogNearPurge", "warning",
        "{{ $labels.source }}: the binlog {{ $labels.connector }} needs is next to be purged",
        "binlog-near-purge",
        (
            Condition(
                "cdc_lake_binlog_files_ahead_of_purge", "<", _monitoring("binlog_min_files_ahead")
            ),
        ),
    ),
    Alert(
        "CdcLakeReplicaLagging", "warning",
        "{{ $labels.source }}: the read replica trails the primary or does not replay",
        "replica-lagging",
        (
            Condition("cdc_lake_replica_lag_seconds", ">", _monitoring("replica_lag_max_seconds")),
            Condition("cdc_lake_replica_lag_bytes", ">", _monitoring("replica_lag_max_bytes")),
            Condition("cdc_lake_replica_replaying", "==", _const(0)),
        ),
    ),
    Alert(
        "CdcLakeUnreachable", "critical",
        "cdc-lake cannot measure part of the pipeline (source {{ $labels.source }})",
        "unreachable",
        (
            Condition("cdc_lake_source_up", "==", _const(0)),
            Condition("cdc_lake_lag_errors", ">", _const(0)),
        ),
    ),
    Alert(
        "CdcLakeConnectorFailed", "critical",
        "{{ $labels.source }}: connector {{ $labels.connector }} failed or is missing",
        "connector-failed",
        (
            Condition("cdc_lake_connector_failed_tasks", ">", _const(0)),
            Condition("cdc_lake_connector_state", "==", _const(1), {"state": "FAILED|MISSING"}),
        ),
    ),
    Alert(
        "CdcLakeTableFailed", "critical",
        "{{ $labels.table }} is FAILED: the applier stopped it (bad message or schema change)",
        "table-failed",
        (Condition("cdc_lake_table_failed", "==", _const(1)),),
    ),
    Alert(
        "CdcLakeFreshnessBreached", "warning",
        "{{ $labels.table }} (tier {{ $labels.tier }}) is {{ $value | humanizeDuration }} behind its source",
        "freshness-breached",
        (
            Condition(
                "cdc_lake_table_freshness_seconds", ">", _tier("freshness_max_seconds"), per_tier=True
            ),
        ),
    ),
    Alert(
        "CdcLakeKafkaLagHigh", "warning",
        "{{ $labels.table }}: {{ $value }} messages in Kafka not applied yet",
        "kafka-lag-high",
        (
            Condition(
                "cdc_lake_table_kafka_lag_messages", ">", _tier("kafka_lag_max_messages"), per_tier=True
            ),
        ),
    ),
    Alert(
        "CdcLakeApplierNotRunning", "critical",
        "{{ $labels.table }}: no applier has looked at it for {{ $value | humanizeDuration }}",
        "applier-not-running",
        (Condition("cdc_lake_table_apply_checked_age_seconds", ">", _applier_silence, per_tier=True),),
    ),
)


def rule_tiers(config: Config) -> list[int]:
    """Every tier a rule must cover: the configured thresholds' and the configured tables'."""
    return sorted({*config.monitoring.tiers, *(table.tier for _, table in config.iter_tables())})


def render_rules(config: Config) -> str:
    """The Prometheus alerting rules file (YAML) for ``config``'s thresholds."""
    tiers = rule_tiers(config)
    rules: list[dict[str, Any]] = []
    for alert in ALERTS:
        rules.append({
            "alert": alert.name,
            "expr": alert.expr(config, tiers),
            "for": f"{config.monitoring.alert_for_seconds}s",
            "labels": {"severity": alert.severity},
            "annotations": {
                "summary": alert.summary,
                "runbook": f"{RUNBOOKS}/{alert.runbook}.md",
            },
        })
    header = "# Generated by `cdc-lake alerts render` from the config's monitoring thresholds.\n"
    return header + yaml.safe_dump(
        {"groups": [{"name": "cdc-lake", "rules": rules}]}, sort_keys=False, width=1000
    )


@dataclass(frozen=True)
class Breach:
    """An alert condition a measured sample meets."""

    alert: str
    runbook: str
    labels: dict[str, str]
    value: float
    threshold: float

    def subject(self) -> str:
        """What the breach concerns, as ``label=value`` pairs."""
        return " ".join(f"{k}={v}" for k, v in sorted(self.labels.items()) if v) or "the pipeline"

    def measured(self) -> str:
        """The value and the threshold."""
        return f"{_number(self.value)} (threshold {_number(self.threshold)})"

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "alert": self.alert,
            "runbook": f"{RUNBOOKS}/{self.runbook}.md",
            "labels": dict(self.labels),
            "value": self.value,
            "threshold": self.threshold,
        }


def breaches(samples: Sequence[Sample], config: Config) -> list[Breach]:
    """Every alert instance the rules would fire on ``samples`` (one per alert and label set)."""
    found = []
    for alert in ALERTS:
        seen: set[tuple[tuple[str, str], ...]] = set()
        for condition in alert.conditions:
            for sample in samples:
                threshold = condition.holds(sample, config)
                # Prometheus drops empty label values, and `or` keeps one series per label set.
                labels = {key: value for key, value in sample.labels.items() if value}
                labelset = tuple(sorted(labels.items()))
                if threshold is not None and labelset not in seen:
                    seen.add(labelset)
                    found.append(Breach(alert.name, alert.runbook, labels, sample.value, threshold))
    return found
