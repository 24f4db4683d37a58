"""Prometheus metrics: lag gauges measured on scrape, served with the applier's counters and histograms.

:func:`lag_samples` turns a :class:`~cdc_lake.ops.lag.LagReport` into samples (name, labels,
value); :class:`LagCollector` serves them to ``prometheus_client`` as gauges, measuring at most
once per ``monitoring.refresh_seconds`` however often Prometheus scrapes.  The same samples are
what :mod:`cdc_lake.ops.alerts` checks for ``cdc-lake lag``, so a breach ``lag`` reports is the one
the alert rule fires on.  Each measurement also adds every table's freshness to a histogram
(``cdc_lake_table_freshness_sampled_seconds``; the tiers' ``freshness_max_seconds`` are among its
buckets, so the share of time a table met its threshold is a ratio of two of its series).

The applier's counters and its batch duration histogram (:mod:`cdc_lake.applier_metrics`, in the
core: the applier records them without importing this stage) live in the process that applies:
``cdc-lake run`` serves them with the gauges on ``monitoring.metrics_port`` (:func:`serve`), the
counters of every onboarded table at 0 until they count (:class:`ApplierCollector`).
Bootstrap rows come from the state store, so ``cdc-lake metrics`` shows them too; every registry
carries ``cdc_lake_build_info`` (always 1), the series whose absence the ``CdcLakeMetricsAbsent``
rule watches.

Names follow Prometheus' conventions (checked with ``promtool check metrics``): every name starts
with ``cdc_lake_``; counters end in ``_total``, gauges never look like counters; units are seconds
and bytes.  Labels are ``source``, ``connector``, ``slot``, ``table``, ``tier`` and, for one-hot
states, ``state``/``status``; every series about a table carries ``source``, ``table`` and ``tier``
(:data:`~cdc_lake.applier_metrics.TABLE_LABELS`).
"""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cdc_lake.applier_metrics import BATCH_SECONDS, COUNTERS, GAUGES, TABLE_LABELS, table_labels, zero_tables
from cdc_lake.config import Config
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.lake.format import format_facts
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import TableInfo
from cdc_lake.state.store import StateStore

if TYPE_CHECKING:
    from cdc_lake.ops.lag import LagReport, TableRow

_LOG = logging.getLogger(__name__)

CAPTURE_STATUSES = (
    "reserved", "extended", "unreserved", "lost", "missing", "retained", "purged", "unknown",
)
"""A capture's ``status``: Postgres ``wal_status`` or ``missing``; binlog retained, purged or unknown."""

TABLE_STATES = tuple(state.value for state in TableState)
CONNECTOR_STATES = ("RUNNING", "PAUSED", "STOPPED", "UNASSIGNED", "RESTARTING", "FAILED", "MISSING")

HELP = {
    "cdc_lake_slot_retained_wal_bytes": "WAL (Postgres) or binlog bytes the primary keeps for the connector",
    "cdc_lake_slot_unconfirmed_wal_bytes": "WAL or binlog bytes the connector has not confirmed",
    "cdc_lake_slot_active": "1 when a process streams from the replication slot",
    "cdc_lake_slot_safe_wal_bytes": "Postgres safe_wal_size: WAL writable before the slot is lost",
    "cdc_lake_capture_status": "1 for the capture's status (wal_status or missing; binlog retained/purged)",
    "cdc_lake_binlog_files_ahead_of_purge": "Binlog files older than the one the connector needs",
    "cdc_lake_replica_lag_bytes": "WAL bytes between the primary and the read replica's replay",
    "cdc_lake_replica_lag_seconds": "Seconds the read replica trails the primary",
    "cdc_lake_replica_replaying": "1 while the read replica replays (0: paused or its SQL thread stopped)",
    "cdc_lake_source_up": "1 when the source's lag queries succeeded",
    "cdc_lake_connector_state": "1 for the connector's Kafka Connect state",
    "cdc_lake_connector_failed_tasks": "Tasks of the connector in state FAILED",
    "cdc_lake_table_kafka_lag_messages": "Messages between the table's applied offsets and the topic's end",
    "cdc_lake_table_freshness_seconds": "Age of the lake copy: how long ago it last matched the source",
    "cdc_lake_table_state": "1 for the table's lifecycle state",
    "cdc_lake_table_failed": "1 when the table is FAILED",
    "cdc_lake_table_possibly_diverged": "1 while the table may lack a change (quarantine, lost lock)",
    "cdc_lake_quarantined_messages": "Messages of the table in quarantine (skipped; quarantine --list)",
    "cdc_lake_table_compaction_pending_plans": "Compaction plans of a MERGE_ON_READ table not executed yet",
    "cdc_lake_table_read_optimized_staleness_seconds": (
        "Age of the oldest change no base file holds yet (what read-optimized readers such as Trino miss)"
    ),
    "cdc_lake_table_last_commit_timestamp_seconds": "Time of the table's last lake commit (epoch seconds)",
    "cdc_lake_table_apply_checked_age_seconds": "Seconds since the applier last measured an appliable table",
    "cdc_lake_lag_unreachable_parts": "Parts of the pipeline the last measurement could not reach",
}

FRESHNESS_BUCKETS = (
    5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0
)
"""Bounds of the sampled freshness histogram, seconds; the tiers' thresholds are added to them."""


@dataclass(frozen=True)
class Sample:
    """One gauge value with its labels."""

    name: str
    labels: dict[str, str]
    value: float


def _row_labels(table: TableRow) -> dict[str, str]:
    return {"source": table.source, "table": table.table, "tier": str(table.tier)}


def lag_samples(report: LagReport) -> list[Sample]:
    """The gauges of ``report`` (values that could not be measured are left out)."""
    out: list[Sample] = []

    def add(name: str, labels: dict[str, str], value: float | int | bool | None) -> None:
        if value is not None:
            out.append(Sample(name, labels, float(value)))

    for capture in report.captures:
        lag = capture.lag
        labels = {
            "source": capture.source,
            "connector": lag.connector,
            "slot": lag.slot or "",
            "tier": str(capture.tier),
        }
        add("cdc_lake_slot_retained_wal_bytes", labels, lag.retained_bytes)
        add("cdc_lake_slot_unconfirmed_wal_bytes", labels, lag.unconfirmed_bytes)
        add("cdc_lake_slot_active", labels, lag.active)
        add("cdc_lake_slot_safe_wal_bytes", labels, lag.safe_bytes)
        add("cdc_lake_binlog_files_ahead_of_purge", labels, lag.files_ahead_of_purge)
        for status in CAPTURE_STATUSES:
            add("cdc_lake_capture_status", {**labels, "status": status}, lag.status == status)
    for replica in report.replicas:
        if replica.delay is None:
            continue
        labels = {"source": replica.source}
        add("cdc_lake_replica_lag_bytes", labels, replica.delay.behind_bytes)
        add("cdc_lake_replica_lag_seconds", labels, replica.delay.behind_seconds)
        add("cdc_lake_replica_replaying", labels, replica.delay.replaying)
    for source, up in sorted(report.source_up.items()):
        add("cdc_lake_source_up", {"source": source}, up)
    for connector in report.connectors:
        labels = {"source": connector.source, "connector": connector.connector}
        add("cdc_lake_connector_failed_tasks", labels, connector.failed_tasks)
        for state in CONNECTOR_STATES:
            add("cdc_lake_connector_state", {**labels, "state": state}, connector.state == state)
    for table in report.tables:
        labels = _row_labels(table)
        add("cdc_lake_table_kafka_lag_messages", labels, table.kafka_lag_messages)
        add("cdc_lake_table_freshness_seconds", labels, table.freshness_seconds)
        add("cdc_lake_table_failed", labels, table.state == "FAILED")
        add("cdc_lake_table_possibly_diverged", labels, table.possibly_diverged is not None)
        add("cdc_lake_quarantined_messages", labels, table.quarantined)
        add("cdc_lake_table_compaction_pending_plans", labels, table.compaction_pending_plans)
        add("cdc_lake_table_read_optimized_staleness_seconds", labels, table.read_optimized_staleness_seconds)
        add("cdc_lake_table_last_commit_timestamp_seconds", labels, table.last_commit_time)
        if table.appliable:
            add("cdc_lake_table_apply_checked_age_seconds", labels, table.checked_age_seconds)
        for state in TABLE_STATES:
            add("cdc_lake_table_state", {**labels, "state": state}, table.state == state)
    add("cdc_lake_lag_unreachable_parts", {}, len(report.errors))
    return out


def _families(samples: list[Sample]) -> Iterator[Metric]:
    by_name: dict[str, list[Sample]] = {}
    for sample in samples:
        by_name.setdefault(sample.name, []).append(sample)
    for name, group in by_name.items():
        keys = sorted({key for sample in group for key in sample.labels})
        family = GaugeMetricFamily(name, HELP[name], labels=keys)
        for sample in group:
            family.add_metric([sample.labels.get(key, "") for key in keys], sample.value)
        yield family


def freshness_buckets(config: Config) -> list[float]:
    """The sampled freshness histogram's bounds: :data:`FRESHNESS_BUCKETS` and every tier's threshold."""
    thresholds = {float(t.freshness_max_seconds) for t in config.monitoring.tiers.values()}
    return sorted({*FRESHNESS_BUCKETS, *thresholds})


def build_info(lake_format: str) -> Metric:
    """``cdc_lake_build_info``: 1, labelled with the versions this process runs and its lake format
    (``lake_format``, a ``lake.format`` name) with the format's version."""
    facts = format_facts(lake_format)
    family = GaugeMetricFamily(
        "cdc_lake_build_info",
        "Always 1: the cdc-lake, Python and pyspark versions of the process serving these metrics, and "
        "the lake format it writes with that format's version",
        labels=["version", "python_version", "pyspark_version", "lake_format", "lake_format_version"],
    )
    versions = [_version("cdc-lake"), platform.python_version(), _version("pyspark")]
    family.add_metric([*versions, facts.name, facts.version], 1.0)
    return family


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


BootstrapRows = Callable[[StateStore, TableInfo], int]
"""How many rows a table's bootstrap wrote, from the state store (given by the caller: the
bootstrap package depends on cdc_lake, not the reverse)."""


class LagCollector(Collector):
    """Measures lag on scrape (at most once per ``refresh_seconds``) and yields it as gauges.

    Each measurement adds every table's freshness to this collector's histogram
    (``cdc_lake_table_freshness_sampled_seconds``).
    """

    def __init__(
        self,
        config: Config,
        bootstrap_rows: BootstrapRows | None = None,
        measure: Callable[[Config], LagReport] | None = None,
    ) -> None:
        self.config = config
        self.bootstrap_rows = bootstrap_rows
        self.measure = measure
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Sample]] | None = None
        self._freshness = Histogram(
            "cdc_lake_table_freshness_sampled_seconds",
            "The table's freshness at each measurement (every monitoring.refresh_seconds while scraped)",
            TABLE_LABELS,
            buckets=freshness_buckets(config),
            registry=None,
        )

    def samples(self) -> list[Sample]:
        """The latest samples, measured now if the cached ones are older than ``refresh_seconds``."""
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] >= self.config.monitoring.refresh_seconds:
                # Imported here: the lag report loads the Kafka and Connect clients, which the alert
                # rules (this module's samples) do not need.
                from cdc_lake.ops.lag import collect_lag

                report = (self.measure or collect_lag)(self.config)
                for table in report.tables:
                    if table.freshness_seconds is not None:
                        self._freshness.labels(**_row_labels(table)).observe(table.freshness_seconds)
                self._cached = (now, lag_samples(report))
            return self._cached[1]

    def collect(self) -> Iterator[Metric]:
        """The gauges and the freshness histogram, then the bootstrap rows per table."""
        yield from _families(self.samples())
        yield from self._freshness.collect()
        if self.bootstrap_rows is None:
            return
        rows = GaugeMetricFamily(
            "cdc_lake_table_bootstrap_rows_written",
            "Rows written by the table's current or last bootstrap (each bootstrap starts again at 0)",
            labels=list(TABLE_LABELS),
        )
        with StateStore.open_existing(self.config.state_store.url) as store:
            for info in store.list_tables():
                labels = table_labels(info.qualified_name, info.tier)
                written = float(self.bootstrap_rows(store, info))
                rows.add_metric([labels[key] for key in TABLE_LABELS], written)
        yield rows


class BuildInfoCollector(Collector):
    """Yields :func:`build_info` of the lake format ``lake_format``."""

    def __init__(self, lake_format: str) -> None:
        self.lake_format = lake_format

    def collect(self) -> Iterator[Metric]:
        """The one ``cdc_lake_build_info`` series."""
        yield build_info(self.lake_format)


class ApplierCollector(Collector):
    """This process's applier counters and histogram; each scrape first gives every onboarded table its
    counters (at 0 until they count), so a table that never failed has ``cdc_lake_failures_total 0``."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def collect(self) -> Iterator[Metric]:
        """The counters (a series for every table of the state store) and the batch duration histogram."""
        try:
            with StateStore.open_existing(self.config.state_store.url) as store:
                zero_tables((info.qualified_name, info.tier) for info in store.list_tables())
        except CdcLakeError as exc:  # the counters counted so far are still served
            _LOG.warning("metrics: cannot list the tables to serve their counters at 0: %s", exc)
        for collector in (*COUNTERS, BATCH_SECONDS, *GAUGES):
            yield from collector.collect()


def registry_for(
    config: Config, with_applier: bool, bootstrap_rows: BootstrapRows | None = None
) -> CollectorRegistry:
    """A registry with the build info and lag gauges of ``config`` (and this process's applier series)."""
    registry = CollectorRegistry()
    registry.register(BuildInfoCollector(config.lake.format))
    registry.register(LagCollector(config, bootstrap_rows))
    if with_applier:
        registry.register(ApplierCollector(config))
    return registry


def serve(
    config: Config, with_applier: bool, bootstrap_rows: BootstrapRows | None = None, port: int | None = None
) -> int:
    """Serve the metrics over HTTP (``/metrics``) in a daemon thread; returns the port bound."""
    chosen = config.monitoring.metrics_port if port is None else port
    registry = registry_for(config, with_applier, bootstrap_rows)
    server, _ = start_http_server(chosen, config.monitoring.metrics_host, registry)
    bound = int(server.server_address[1])
    _LOG.info("serving metrics on http://%s:%d/metrics", config.monitoring.metrics_host, bound)
    return bound
