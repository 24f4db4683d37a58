"""The alerts: one declaration per alert, rendered as Prometheus rules and checked by ``cdc-lake lag``.

Each :class:`Alert` is a set of :class:`Condition` (OR-ed): a metric of :mod:`cdc_lake.ops.metrics`,
label matchers, a comparison and a threshold read from the config's ``monitoring`` section (per
tier where the metric has a ``tier`` label).  :func:`render_rules` writes them as a Prometheus
rules file (``cdc-lake alerts render``); :func:`breaches` evaluates the very same conditions on
the samples ``cdc-lake lag`` measured, so ``lag`` exits non-zero exactly when a rule would fire
(``for:`` aside).  One condition is not a threshold: :class:`Absent` fires when Prometheus has no
``cdc_lake_build_info`` at all (every cdc-lake endpoint gone, or never scraped), which ``lag``,
being a measurement, cannot observe.  Nor does ``lag`` measure Debezium's own metrics, which the
Connect workers' JMX exporter agent serves (rules in ``cdc_lake/stack/resources``): an
:class:`External` condition is PromQL over them, rendered and never breached by ``lag``.

Every alert has a runbook page in ``docs/runbooks/``; the rules carry ``summary``, ``description``
and ``runbook_url`` annotations, the URL made of ``monitoring.runbook_base_url`` (where the
operator publishes docs/runbooks; rendering without it is refused: a pager link must resolve).
The pages ship inside the package too (``cdc_lake/ops/runbooks`` links to ``docs/runbooks``, and
the wheel holds the files), so an installed ``cdc-lake runbook NAME`` prints the page any message
names (:func:`runbook_page`).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from string import Template
from typing import Any

import yaml

from cdc_lake.config import RUNBOOK_BASE_URL, Config
from cdc_lake.exceptions import ConfigError
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
class Absent:
    """``absent(metric)``: no series of ``metric`` reaches Prometheus; ``lag`` never sees it."""

    metric: str

    def expressions(self, config: Config, tiers: Sequence[int]) -> list[str]:
        """The one PromQL expression."""
        return [f"absent({self.metric})"]

    def holds(self, sample: Sample, config: Config) -> float | None:
        """Never: a sample measured by ``lag`` is, by being there, not absent."""
        return None


@dataclass(frozen=True)
class External:
    """PromQL over another exporter's metrics, ``$threshold`` from the config; ``lag`` never sees them."""

    expr: str
    threshold: Threshold

    def expressions(self, config: Config, tiers: Sequence[int]) -> list[str]:
        """The one PromQL expression, its threshold filled in."""
        return [Template(self.expr).substitute(threshold=_number(self.threshold(config, 0)))]

    def holds(self, sample: Sample, config: Config) -> float | None:
        """Never: ``lag`` measures none of these metrics."""
        return None


@dataclass(frozen=True)
class Alert:
    """One alert: its conditions, severity, summary and description (Prometheus templates), runbook page."""

    name: str
    severity: str
    summary: str
    description: str
    runbook: str
    conditions: tuple[Condition | Absent | External, ...]

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
"""How messages name the runbook pages (the repository path; ``cdc-lake runbook`` accepts it)."""


def runbook_names() -> list[str]:
    """The runbook pages shipped with the package, without ``.md``."""
    pages = resources.files("cdc_lake.ops").joinpath("runbooks")
    names = (p.name for p in pages.iterdir())
    return sorted(n.removesuffix(".md") for n in names if n.endswith(".md") and n != "README.md")


def runbook_name(name: str) -> str:
    """The page ``NAME`` that ``NAME``, ``NAME.md`` or ``docs/runbooks/NAME.md`` names."""
    return name.removeprefix(f"{RUNBOOKS}/").removesuffix(".md")


def runbook_page(name: str) -> str:
    """The shipped runbook page ``NAME``, ``NAME.md`` or ``docs/runbooks/NAME.md`` (as messages name it)."""
    page = runbook_name(name)
    if page not in runbook_names():
        raise ConfigError(f"no runbook '{name}'; the runbooks are: {', '.join(runbook_names())}")
    return resources.files("cdc_lake.ops").joinpath("runbooks", f"{page}.md").read_text(encoding="utf-8")

ALERTS: tuple[Alert, ...] = (
    Alert(
        "CdcLakeWalRetainedHigh", "warning",
        "{{ $labels.source }}: {{ $labels.connector }} holds {{ $value | humanize1024 }}B of WAL/binlog",
        "The primary of source {{ $labels.source }} keeps {{ $value | humanize1024 }}B of WAL or binlog for"
        " connector {{ $labels.connector }} (tier {{ $labels.tier }}), over the tier's"
        " wal_retained_max_bytes: the connector reads slower than the source writes, or not at all. The"
        " primary's disk fills.",
        "wal-retained-high",
        (Condition("cdc_lake_slot_retained_wal_bytes", ">", _tier("wal_retained_max_bytes"), per_tier=True),),
    ),
    Alert(
        "CdcLakeSlotInactive", "warning",
        "{{ $labels.source }}: replication slot {{ $labels.slot }} has no active reader",
        "No process streams from replication slot {{ $labels.slot }} of source {{ $labels.source }}"
        " (connector {{ $labels.connector }} stopped, failed or disconnected): the slot retains WAL until"
        " it is read again.",
        "slot-inactive",
        (Condition("cdc_lake_slot_active", "==", _const(0)),),
    ),
    Alert(
        "CdcLakeSlotWalUnreserved", "critical",
        "{{ $labels.source }}: slot {{ $labels.slot }} needs WAL beyond max_slot_wal_keep_size",
        "Replication slot {{ $labels.slot }} of source {{ $labels.source }} needs WAL the primary no longer"
        " promises to keep (wal_status unreserved): at the next checkpoint the slot may be lost, and the"
        " tables of connector {{ $labels.connector }} then need a re-bootstrap.",
        "slot-wal-unreserved",
        (Condition("cdc_lake_capture_status", "==", _const(1), {"status": "unreserved"}),),
    ),
    Alert(
        "CdcLakeCapturePositionLost", "critical",
        "{{ $labels.source }}: {{ $labels.connector }} cannot resume: slot or binlog {{ $labels.status }}",
        "Connector {{ $labels.connector }} of source {{ $labels.source }} cannot resume where it stopped: its"
        " replication slot or binlog is {{ $labels.status }}. Changes made meanwhile are lost to the stream;"
        " its tables need a new capture position and a re-bootstrap.",
        "position-lost",
        (Condition("cdc_lake_capture_status", "==", _const(1), {"status": "lost|missing|purged"}),),
    ),
    Alert(
        "CdcLakeBinlogNearPurge", "warning",
        "{{ $labels.source }}: the binlog {{ $labels.connector }} needs is next to be purged",
        "Only {{ $value }} older binlog files remain on the primary of source {{ $labels.source }} before the"
        " one connector {{ $labels.connector }} still needs: the next purge loses its position.",
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
        "The read replica of source {{ $labels.source }} is behind the primary beyond"
        " replica_lag_max_seconds/_bytes or does not replay: bootstraps and validate, which read it, wait.",
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
        "The last measurement could not reach part of the pipeline (a source database, Kafka Connect or"
        " Kafka): its other alerts cannot fire while it is unreachable. `cdc-lake lag` names what failed.",
        "unreachable",
        (
            Condition("cdc_lake_source_up", "==", _const(0)),
            Condition("cdc_lake_lag_unreachable_parts", ">", _const(0)),
        ),
    ),
    Alert(
        "CdcLakeCompactionBehind", "warning",
        "{{ $labels.table }}: read-optimized readers miss {{ $value | humanizeDuration }} of changes",
        "Table {{ $labels.table }} (tier {{ $labels.tier }}) is MERGE_ON_READ with compaction outside its"
        " writes, and the oldest change no base file holds yet is older than the max_staleness_seconds of"
        " its tier's compaction settings: Trino and other read-optimized readers see the table that old."
        " Snapshot readers (Spark's default query, the format's own readers) stay fresh. Compaction"
        " does not run, fails or falls behind.",
        "compaction-behind",
        (
            Condition(
                "cdc_lake_table_read_optimized_staleness_seconds", ">",
                lambda config, tier: float(config.lake.compaction_of_tier(tier).max_staleness_seconds),
            ),
        ),
    ),
    Alert(
        "CdcLakeConnectorFailed", "critical",
        "{{ $labels.source }}: connector {{ $labels.connector }} failed or is missing",
        "Kafka Connect reports connector {{ $labels.connector }} of source {{ $labels.source }} (or one of"
        " its tasks) FAILED, or no longer has it: no change of its tables reaches Kafka.",
        "connector-failed",
        (
            Condition("cdc_lake_connector_failed_tasks", ">", _const(0)),
            Condition("cdc_lake_connector_state", "==", _const(1), {"state": "FAILED|MISSING"}),
        ),
    ),
    Alert(
        "CdcLakeDebeziumStreamingBehind", "warning",
        "{{ $labels.plugin }} connector {{ $labels.connector }} ({{ $labels.server }}) reads changes"
        " {{ $value | humanizeDuration }} after their commit",
        "Debezium's streaming {{ $labels.plugin }} connector {{ $labels.connector }} with topic prefix"
        " {{ $labels.server }} (the source's name unless it sets topic_prefix) reads changes"
        " {{ $value | humanizeDuration }} after"
        " they were committed (MilliSecondsBehindSource), over debezium_behind_max_seconds, while still"
        " reading: capture is the slow part, not Kafka or the applier. The slot or binlog retains meanwhile.",
        "debezium-streaming-behind",
        (
            # MilliSecondsBehindSource keeps the last change's lag while the source is quiet: only a
            # connector that read a change within the threshold is behind now.  The tier-0 connectors
            # of one source share plugin and server: the match is per connector (its custom.metric.tags
            # label), so a quiet connector is never paired with a busy sibling's recent change.
            External(
                'debezium_metrics_millisecondsbehindsource{context="streaming"} / 1000 > $threshold'
                " and on(plugin, server, connector, task)"
                ' debezium_metrics_millisecondssincelastevent{context="streaming"} / 1000 < $threshold',
                _monitoring("debezium_behind_max_seconds"),
            ),
        ),
    ),
    Alert(
        "CdcLakeTableFailed", "critical",
        "{{ $labels.table }} is FAILED: the applier stopped it (bad message or schema change)",
        "The applier stopped {{ $labels.table }} (source {{ $labels.source }}, tier {{ $labels.tier }}) at a"
        " batch it cannot apply; the lake copy stays at its last good commit. `cdc-lake status` prints the"
        " cause (topic, partition, offset).",
        "table-failed",
        (Condition("cdc_lake_table_failed", "==", _const(1)),),
    ),
    Alert(
        "CdcLakeTableSchemaChanged", "critical",
        "{{ $labels.table }} is SCHEMA_CHANGED: the applier stopped it at a source schema change",
        "The source table of {{ $labels.table }} (source {{ $labels.source }}, tier {{ $labels.tier }})"
        " changed in a way its schema_changes policy does not follow (a column dropped, narrowed or retyped,"
        " added with a default or not copied, the key changed): the lake copy stays at the last commit"
        " before it until the table is re-bootstrapped. `cdc-lake status` names the change and the"
        " command.",
        "schema-changed",
        (Condition("cdc_lake_table_state", "==", _const(1), {"state": "SCHEMA_CHANGED"}),),
    ),
    Alert(
        "CdcLakeTablePossiblyDiverged", "warning",
        "{{ $labels.table }} is possibly diverged: the lake may lack a change (`cdc-lake status` says why)",
        "A message of {{ $labels.table }} (source {{ $labels.source }}, tier {{ $labels.tier }}) was"
        " quarantined, or a commit completed after the table's apply lock was lost during its write: the"
        " table applies on, but the lake may lack a change or hold another writer's, until a clean"
        " `cdc-lake validate` or a re-bootstrap clears the mark.",
        "possibly-diverged",
        (Condition("cdc_lake_table_possibly_diverged", "==", _const(1)),),
    ),
    Alert(
        "CdcLakeFreshnessBreached", "warning",
        "{{ $labels.table }} (tier {{ $labels.tier }}) is {{ $value | humanizeDuration }} behind its source",
        "The lake copy of {{ $labels.table }} (source {{ $labels.source }}) last matched its source"
        " {{ $value | humanizeDuration }} ago, over tier {{ $labels.tier }}'s freshness_max_seconds:"
        " its readers see old data. Look upstream first: capture, connector, Kafka, the applier.",
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
        "{{ $value }} messages of {{ $labels.table }} (source {{ $labels.source }}) wait in Kafka, over tier"
        " {{ $labels.tier }}'s kafka_lag_max_messages: the applier is slower than the source or not running.",
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
        "No applier (`cdc-lake run` or `apply --once`) has measured {{ $labels.table }} (source"
        " {{ $labels.source }}) for {{ $value | humanizeDuration }}, more than tier {{ $labels.tier }}'s"
        " apply interval plus applier_silent_max_seconds.",
        "applier-not-running",
        (Condition("cdc_lake_table_apply_checked_age_seconds", ">", _applier_silence, per_tier=True),),
    ),
    Alert(
        "CdcLakeMetricsAbsent", "critical",
        "No cdc-lake metrics reach Prometheus",
        "Prometheus has no cdc_lake_build_info series: no `cdc-lake run` or `cdc-lake metrics` endpoint is"
        " scraped (stopped, crashed, moved, or the scrape config lost it), so no other cdc-lake alert can"
        " fire.",
        "metrics-absent",
        (Absent("cdc_lake_build_info"),),
    ),
)


def rule_tiers(config: Config) -> list[int]:
    """Every tier a rule must cover: the configured thresholds' and the configured tables'."""
    return sorted({*config.monitoring.tiers, *(table.tier for _, table in config.iter_tables())})


def render_rules(config: Config, runbook_base_url: str | None = None) -> str:
    """The Prometheus alerting rules file (YAML) for ``config``'s thresholds.

    ``runbook_base_url`` overrides ``monitoring.runbook_base_url``; one of them is required.
    """
    if runbook_base_url is not None and RUNBOOK_BASE_URL.match(runbook_base_url) is None:
        raise ConfigError(f"--runbook-base-url {runbook_base_url!r}: not an http(s) URL")
    base = runbook_base_url or config.monitoring.runbook_base_url
    if base is None:
        raise ConfigError(
            "monitoring.runbook_base_url is not set: the rules' runbook_url needs the address where"
            " docs/runbooks is published (for example https://github.com/ORG/cdc-lake/blob/TAG/docs/runbooks),"
            " or pass --runbook-base-url"
        )
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
                "description": alert.description,
                "runbook_url": f"{base.rstrip('/')}/{alert.runbook}.md",
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
    metric: str = ""
    """The measured series; its name's suffix is the unit of value and threshold (:attr:`unit`)."""

    def subject(self) -> str:
        """What the breach concerns, as ``label=value`` pairs."""
        return " ".join(f"{k}={v}" for k, v in sorted(self.labels.items()) if v) or "the pipeline"

    @property
    def unit(self) -> str:
        """``seconds`` or ``bytes`` (Prometheus' base units, the metric name's suffix), else ``""``."""
        return next((unit for unit in ("seconds", "bytes") if self.metric.endswith(f"_{unit}")), "")

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "alert": self.alert,
            "runbook": f"{RUNBOOKS}/{self.runbook}.md",
            "labels": dict(self.labels),
            "metric": self.metric,
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
                    found.append(
                        Breach(alert.name, alert.runbook, labels, sample.value, threshold, sample.name)
                    )
    return found
