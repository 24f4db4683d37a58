"""Prometheus metrics: lag gauges measured on scrape, and counters the applier increments.

:func:`lag_samples` turns a :class:`~cdc_lake.ops.lag.LagReport` into samples (name, labels,
value); :class:`LagCollector` serves them to ``prometheus_client`` as gauges, measuring at most
once per ``monitoring.refresh_seconds`` however often Prometheus scrapes.  The same samples are
what :mod:`cdc_lake.ops.alerts` checks for ``cdc-lake lag``, so a breach ``lag`` reports is the one
the alert rule fires on.

The applier's counters (:data:`APPLIED_EVENTS`, :data:`COMMITS`, :data:`FAILURES`) live in the
process that applies: ``cdc-lake run`` serves them with the gauges on ``monitoring.metrics_port``
(:func:`serve`).  Bootstrap rows come from the state store, so ``cdc-lake metrics`` shows them too.

Every sample name starts with ``cdc_lake_``; labels are ``source``, ``connector``, ``slot``,
``table``, ``tier`` and, for one-hot states, ``state``/``status``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cdc_lake.config import Config
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import TableInfo
from cdc_lake.state.store import StateStore

if TYPE_CHECKING:
    from cdc_lake.ops.lag import LagReport

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
    "cdc_lake_table_last_commit_timestamp_seconds": "Time of the table's last Hudi commit (epoch seconds)",
    "cdc_lake_table_apply_checked_age_seconds": "Seconds since the applier last measured an appliable table",
    "cdc_lake_lag_errors": "Parts of the pipeline the last measurement could not reach",
}


@dataclass(frozen=True)
class Sample:
    """One gauge value with its labels."""

    name: str
    labels: dict[str, str]
    value: float


def _commit_epoch(instant: str | None) -> float | None:
    """A Hudi instant (``yyyyMMddHHmmssSSS``, UTC in cdc-lake's writer) as epoch seconds."""
    if not instant or len(instant) < 14 or not instant[:14].isdigit():
        return None
    parsed = time.strptime(instant[:14], "%Y%m%d%H%M%S")
    millis = int(instant[14:17]) / 1000 if instant[14:17].isdigit() else 0.0
    return float(time.mktime(parsed) - time.timezone) + millis


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
        labels = {"source": table.source, "table": table.table, "tier": str(table.tier)}
        add("cdc_lake_table_kafka_lag_messages", labels, table.kafka_lag_messages)
        add("cdc_lake_table_freshness_seconds", labels, table.freshness_seconds)
        add("cdc_lake_table_failed", labels, table.state == "FAILED")
        add("cdc_lake_table_last_commit_timestamp_seconds", labels, _commit_epoch(table.last_commit))
        if table.appliable:
            add("cdc_lake_table_apply_checked_age_seconds", labels, table.checked_age_seconds)
        for state in TABLE_STATES:
            add("cdc_lake_table_state", {**labels, "state": state}, table.state == state)
    add("cdc_lake_lag_errors", {}, len(report.errors))
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


BootstrapRows = Callable[[StateStore, TableInfo], int]
"""How many rows a table's bootstrap wrote, from the state store (given by the caller: the
bootstrap package depends on cdc_lake, not the reverse)."""


class LagCollector(Collector):
    """Measures lag on scrape (at most once per ``refresh_seconds``) and yields it as gauges."""

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

    def samples(self) -> list[Sample]:
        """The latest samples, measured now if the cached ones are older than ``refresh_seconds``."""
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] >= self.config.monitoring.refresh_seconds:
                # Imported here: the applier imports this module, and lag imports the applier.
                from cdc_lake.ops.lag import collect_lag

                self._cached = (now, lag_samples((self.measure or collect_lag)(self.config)))
            return self._cached[1]

    def collect(self) -> Iterator[Metric]:
        """The gauges, then the bootstrap rows per table."""
        yield from _families(self.samples())
        if self.bootstrap_rows is None:
            return
        rows = CounterMetricFamily(
            "cdc_lake_bootstrap_rows", "Rows written by the table's bootstrap", labels=["source", "table"]
        )
        with StateStore.open(self.config.state_store.url) as store:
            for info in store.list_tables():
                rows.add_metric([info.source, info.qualified_name], float(self.bootstrap_rows(store, info)))
        yield rows


# The applier's counters, one set per process, incremented through the hooks below.
APPLIED_EVENTS = Counter(
    "cdc_lake_applied_events", "Change events applied to the lake", ["table"], registry=None
)
COMMITS = Counter("cdc_lake_commits", "Hudi commits made by the applier", ["table"], registry=None)
FAILURES = Counter(
    "cdc_lake_failures", "Batches that failed and left the table FAILED", ["table"], registry=None
)


def record_batch(table: str, changes: int, committed: bool) -> None:
    """Hook for the applier: a batch of ``table`` applied ``changes`` events (and made a commit)."""
    APPLIED_EVENTS.labels(table=table).inc(changes)
    if committed:
        COMMITS.labels(table=table).inc()


def record_failure(table: str) -> None:
    """Hook for the applier: a batch of ``table`` failed."""
    FAILURES.labels(table=table).inc()


def registry_for(
    config: Config, with_applier: bool, bootstrap_rows: BootstrapRows | None = None
) -> CollectorRegistry:
    """A registry with the lag gauges of ``config`` (and this process's applier counters if asked)."""
    registry = CollectorRegistry()
    registry.register(LagCollector(config, bootstrap_rows))
    if with_applier:
        for collector in (APPLIED_EVENTS, COMMITS, FAILURES):
            registry.register(collector)
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
