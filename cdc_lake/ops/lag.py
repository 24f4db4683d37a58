"""``cdc-lake lag``: how far behind every part of the pipeline is, measured now.

One :class:`LagReport` gathers, per onboarded source, what the primary keeps for each connector
(Postgres: the slot's retained and unconfirmed WAL, ``active``, ``wal_status``, ``safe_wal_size``;
MySQL/MariaDB: the connector's binlog position against the binlogs kept) and how far the read
replica trails; per connector, its Kafka Connect state; per table, the messages between the
applied offsets and the topic's end, freshness, last commit and state, all of the table's current
copy (:meth:`~cdc_lake.state.store.StateStore.current_copy`: after a re-bootstrap, the switched-in
one).  Each engine answers its own lag queries
(:meth:`~cdc_lake.sources.base.SourceEngine.capture_lag`); nothing here branches on the engine.  A
part that cannot be reached is recorded as an error of its source (or of Kafka Connect, or Kafka)
and the rest is still measured.  The same report feeds the metrics (:mod:`cdc_lake.ops.metrics`)
and the threshold checks (:mod:`cdc_lake.ops.alerts`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime

from cdc_lake.capture.plan import plan_source, table_topic
from cdc_lake.config import Config, Source, Table
from cdc_lake.connect.client import MISSING, KafkaConnectClient
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.kafka.offsets import end_offsets
from cdc_lake.lake.format import format_facts
from cdc_lake.sources import engine_for
from cdc_lake.sources.base import CaptureLag, ReplicaDelay
from cdc_lake.state.lifecycle import APPLIABLE_STATES
from cdc_lake.state.models import utcnow
from cdc_lake.state.records import TableInfo
from cdc_lake.state.status import TableStatus
from cdc_lake.state.store import StateStore


@dataclass(frozen=True)
class CaptureRow:
    """One connector's capture on a source, with the lowest tier among its tables."""

    source: str
    tier: int
    lag: CaptureLag


@dataclass(frozen=True)
class ReplicaRow:
    """A source's read replica and how far it trails (None when it has no replica or was unreachable)."""

    source: str
    delay: ReplicaDelay | None


@dataclass(frozen=True)
class ConnectorRow:
    """A connector's Kafka Connect state (``MISSING`` when not registered) and its failed tasks."""

    source: str
    connector: str
    state: str
    tasks: int
    failed_tasks: int


@dataclass(frozen=True)
class TableRow:
    """One onboarded table: state, Kafka lag, freshness, last commit, and when the applier last looked."""

    table: str
    source: str
    tier: int
    state: str
    kafka_lag_messages: int | None
    freshness_seconds: float | None
    last_commit: str | None
    checked_age_seconds: float | None
    appliable: bool
    last_error: str | None
    possibly_diverged: str | None = None
    """Why the lake copy may differ from the source (a quarantined message; a commit completed after the
    apply lock was lost), while marked."""
    quarantined: int = 0
    """How many of the table's messages are in quarantine (``cdc-lake quarantine --list``)."""
    compaction_pending_plans: int | None = None
    """Compaction plans not executed yet, for a table whose compaction runs outside its writes (None:
    not such a table, or not measured yet)."""
    read_optimized_staleness_seconds: float | None = None
    """How old the oldest change a read-optimized reader (Trino) misses is (None as above)."""
    table_services_error: str | None = None
    """Why the last execution of the table's services failed (None: it did not)."""
    last_commit_time: float | None = None
    """When ``last_commit`` was made, epoch seconds, as its format reads the instant (None: none)."""


@dataclass
class LagReport:
    """Everything ``cdc-lake lag`` measured; ``source_up`` is False for a source whose queries failed."""

    measured_at: datetime
    captures: list[CaptureRow] = field(default_factory=list)
    replicas: list[ReplicaRow] = field(default_factory=list)
    connectors: list[ConnectorRow] = field(default_factory=list)
    tables: list[TableRow] = field(default_factory=list)
    source_up: dict[str, bool] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "measured_at": self.measured_at.isoformat(),
            "captures": [{"source": c.source, "tier": c.tier, **asdict(c.lag)} for c in self.captures],
            "replicas": [
                {"source": r.source, **(asdict(r.delay) if r.delay is not None else {})}
                for r in self.replicas
            ],
            "connectors": [asdict(c) for c in self.connectors],
            "tables": [asdict(t) for t in self.tables],
            "source_up": dict(self.source_up),
            "errors": list(self.errors),
        }


def _onboarded(config: Config, infos: Mapping[str, TableInfo]) -> list[tuple[Source, list[Table]]]:
    found = []
    for source in config.sources.values():
        tables = [t for t in source.tables if t.qualified_name(source) in infos]
        if tables:
            found.append((source, tables))
    return found


def _source_lag(config: Config, source: Source, tables: Sequence[Table], report: LagReport) -> None:
    engine = engine_for(source)
    plans = plan_source(source, tables)
    offsets: dict[str, dict[str, object]] = {}
    try:
        with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
            registered = set(connect.list_connectors())
            for plan in plans:
                if plan.name in registered:
                    committed = connect.offsets(plan.name)
                    offsets[plan.name] = committed[0] if committed else {}
    except CdcLakeError as exc:
        report.errors.append(f"source {source.name}: connector offsets: {exc}")
    up = True
    try:
        lags = engine.capture_lag([plan.capture for plan in plans], offsets)
        for plan, lag in zip(plans, lags, strict=True):
            report.captures.append(CaptureRow(source.name, min(t.tier for t in plan.capture.tables), lag))
    except CdcLakeError as exc:
        up = False
        report.errors.append(str(exc))
    if source.replica is not None:
        try:
            report.replicas.append(ReplicaRow(source.name, engine.replica_delay()))
        except CdcLakeError as exc:
            up = False
            report.replicas.append(ReplicaRow(source.name, None))
            report.errors.append(str(exc))
    report.source_up[source.name] = up


def _connector_rows(config: Config, store: StateStore, report: LagReport) -> None:
    try:
        with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
            registered = set(connect.list_connectors())
            for name in sorted(config.sources):
                recorded = store.get_source(name)
                for connector in recorded.connector_names if recorded is not None else ():
                    if connector not in registered:
                        report.connectors.append(ConnectorRow(name, connector, MISSING, 0, 0))
                        continue
                    status = connect.status(connector)
                    report.connectors.append(
                        ConnectorRow(name, connector, status.state, len(status.tasks), status.failed_tasks)
                    )
    except CdcLakeError as exc:
        report.errors.append(f"kafka connect: {exc}")


def _table_rows(config: Config, store: StateStore, infos: Mapping[str, TableInfo], report: LagReport) -> None:
    now = report.measured_at
    quarantined = store.quarantine_counts()
    facts = format_facts(config.lake.format)
    for source, tables in _onboarded(config, infos):
        for table in tables:
            name = table.qualified_name(source)
            info = infos[name]
            lag: int | None = None
            current = store.current_copy(name)
            try:
                lag = table_kafka_lag(config, source, table, current.applied_offsets)
            except CdcLakeError as exc:
                report.errors.append(f"{name}: kafka offsets: {exc}")
            freshness = current.freshness
            services = None if freshness is None else freshness.services
            report.tables.append(
                TableRow(
                    table=name,
                    source=source.name,
                    tier=info.tier,
                    state=info.state.value,
                    kafka_lag_messages=lag,
                    freshness_seconds=None if freshness is None else freshness.age_seconds(now),
                    last_commit=current.last_commit,
                    last_commit_time=(
                        None if current.last_commit is None else facts.commit_time(current.last_commit)
                    ),
                    checked_age_seconds=(
                        None if freshness is None else max(0.0, (now - freshness.measured_at).total_seconds())
                    ),
                    appliable=info.state in APPLIABLE_STATES,
                    last_error=info.last_error,
                    possibly_diverged=info.possibly_diverged,
                    quarantined=quarantined.get(name, 0),
                    compaction_pending_plans=None if services is None else services.pending_plans,
                    read_optimized_staleness_seconds=(
                        None if services is None else services.staleness_seconds(now)
                    ),
                    table_services_error=None if services is None else services.error,
                )
            )


def table_kafka_lag(config: Config, source: Source, table: Table, applied: Mapping[int, int]) -> int:
    """Messages between ``applied`` (each partition's next offset to apply) and the table's topic's end."""
    topic = table_topic(source, table)
    ends = end_offsets(config.kafka.bootstrap_servers, topic, extra=dict(config.kafka.consumer))
    return sum(max(0, end - applied.get(partition, 0)) for partition, end in ends.items())


def with_kafka_lag(config: Config, statuses: Sequence[TableStatus]) -> tuple[list[TableStatus], str | None]:
    """``statuses`` with each configured table's Kafka lag measured now, as ``lag`` measures it, so
    ``status`` and ``lag`` agree also before the applier first measured a table (CATCHING_UP).

    When Kafka cannot say, the rest keep the lag the applier last recorded, and the error is returned.
    """
    configured = {table.qualified_name(source): (source, table) for source, table in config.iter_tables()}
    measured: list[TableStatus] = []
    for status in statuses:
        found = configured.get(status.name)
        if found is None:
            measured.append(status)
            continue
        try:
            lag = table_kafka_lag(config, *found, status.applied_offsets)
        except CdcLakeError as exc:
            return [*measured, *statuses[len(measured):]], f"{status.name}: kafka offsets: {exc}"
        measured.append(replace(status, lag_messages=lag))
    return measured, None


def collect_lag(config: Config, now: datetime | None = None) -> LagReport:
    """Measure every onboarded source, connector and table of ``config`` now."""
    report = LagReport(measured_at=now or utcnow())
    with StateStore.open_existing(config.state_store.url) as store:
        infos = {info.qualified_name: info for info in store.list_tables()}
        for source, tables in _onboarded(config, infos):
            _source_lag(config, source, tables, report)
        _connector_rows(config, store, report)
        _table_rows(config, store, infos, report)
    return report
