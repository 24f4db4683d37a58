"""``cdc-lake onboard``: plan a source's connectors, check everything, then make it so, idempotently.

:func:`plan_onboarding` is read-only: it decides the tables (those asked for plus those already
onboarded), the connectors per tier, their rendered configs, and runs every preflight check.
:func:`execute_onboarding` refuses a plan with a failed check; otherwise it reconciles each
connector (tier 0 first), retires connectors the plan no longer has (a table that left tier 0),
and records the source and its tables as PENDING_BOOTSTRAP (``--after-failover``: OFFBOARDED tables
recaptured with their lake copies, :mod:`cdc_lake.onboard.recapture`).  Topics that exist already are checked
with the rest (:func:`cdc_lake.onboard.topics.check_topics`: not compacted, one partition unless keyed
by the primary key).  A failure part-way rolls back what this run made and says what, if anything, is
left.  Re-running changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc_lake.capture.plan import ConnectorPlan, plan_source, render_config
from cdc_lake.config import Config, Source, Table
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.connect.render import ConverterSettings
from cdc_lake.exceptions import CdcLakeError, OnboardError, SourceEngineError, UnknownTableError
from cdc_lake.onboard import DEFAULT_TIMEOUT
from cdc_lake.onboard.preflight import (
    check_connect,
    check_connector_names,
    check_kafka,
    check_registry,
    raise_for_failures,
    registry_base_url,
)
from cdc_lake.onboard.recapture import check_recapture, recapture_points, record_recaptures
from cdc_lake.onboard.reconcile import Reconciler
from cdc_lake.onboard.topics import check_topics
from cdc_lake.onboard.type_check import check_column_types
from cdc_lake.redaction import mask_mapping
from cdc_lake.sources import engine_for
from cdc_lake.sources.base import ConnectorEndpoints, PreflightOptions, SourceEngine
from cdc_lake.sources.checks import CheckResult, Outcome
from cdc_lake.state import StateStore, TableState

_PREFLIGHT_ATTEMPTS = 2


@dataclass(frozen=True)
class OnboardRequest:
    """What ``cdc-lake onboard`` was asked: a source, optionally some of its tables, and options.

    ``password_env`` names the variable holding the primary's password on the Connect worker.
    """

    source: str
    password_env: str
    tables: tuple[str, ...] = ()
    replica_identity_full: bool = False
    timeout: float = DEFAULT_TIMEOUT
    after_failover: bool = False
    """Keep the OFFBOARDED tables' lake copies and recapture them (:mod:`cdc_lake.onboard.recapture`)."""


@dataclass
class OnboardPlan:
    """A checked plan: the tables, connectors, their configs (and those registered now), every check."""

    config: Config
    source: Source
    engine: SourceEngine
    request: OnboardRequest
    tables: list[Table]
    connectors: list[ConnectorPlan]
    configs: dict[str, dict[str, str]]
    options: PreflightOptions
    registered: dict[str, dict[str, str]]
    obsolete: list[str]
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether a check failed (onboarding would stop)."""
        return any(check.failed for check in self.checks)

    @property
    def endpoints(self) -> ConnectorEndpoints:
        """Where the connectors' converters, schema history and password come from."""
        return connector_endpoints(self.config, self.request.password_env)

    def planned_changes(self) -> list[str]:
        """What executing the plan would change, for a dry run."""
        try:
            changes = list(
                dict.fromkeys(
                    line
                    for plan in self.connectors
                    for line in self.engine.planned_changes(plan.capture, self.options)
                )
            )
        except SourceEngineError as exc:
            changes = [f"(source changes unknown: {exc})"]
        for plan in self.connectors:
            tables = ", ".join(plan.capture.table_names)
            current = self.registered.get(plan.name)
            if current is None:
                changes.append(f"register connector {plan.name} for {tables}")
            elif current != self.configs[plan.name]:
                changes.append(f"update connector {plan.name} to capture {tables}")
        changes += [f"delete connector {name} and drop its slot and publication" for name in self.obsolete]
        return changes

    def to_json(self) -> dict[str, Any]:
        """The plan for ``--json``: checks, connectors with their redacted configs, planned changes."""
        return {
            "source": self.source.name,
            "engine": self.source.engine,
            "tables": [table.qualified_name(self.source) for table in self.tables],
            "checks": [check.to_json() for check in self.checks],
            "connectors": [_connector_json(plan, self.configs[plan.name]) for plan in self.connectors],
            "retire": self.obsolete,
        }


@dataclass
class OnboardReport:
    """What an onboarding run did: per connector created/updated/unchanged, every change, warnings."""

    source: str
    checks: list[CheckResult]
    connectors: dict[str, str]
    actions: list[str]
    warnings: list[str]
    tables: list[str]

    def to_json(self) -> dict[str, Any]:
        """The report for ``--json``."""
        return {
            "source": self.source,
            "checks": [check.to_json() for check in self.checks],
            "connectors": self.connectors,
            "actions": self.actions,
            "warnings": self.warnings,
            "tables": self.tables,
        }


def connector_endpoints(config: Config, password_env: str) -> ConnectorEndpoints:
    """Where connectors find the registry and Kafka, and the variable holding the password."""
    registry = config.schema_registry
    return ConnectorEndpoints(
        password_env=password_env,
        registry_url=registry_base_url(config.schema_registry.url),
        kafka_bootstrap=config.kafka.bootstrap_servers,
        kafka_clients=dict(config.kafka.connector_clients),
        converter=ConverterSettings(
            kind=registry.converter,
            confluent_url=registry.url,
            credentials_env=registry.connect_credentials_env,
            credentials_kind=registry.connect_credentials_kind,
        ),
    )


def _connector_json(plan: ConnectorPlan, config: dict[str, str]) -> dict[str, Any]:
    return {
        "name": plan.name,
        "tier0": plan.tier0,
        "tables": list(plan.capture.table_names),
        **plan.capture.ids.onboard_fields(),
        "heartbeat_topic": plan.heartbeat_topic,
        "config": mask_mapping(config),
    }


def planned_tables(source: Source, requested: Sequence[str], onboarded: Sequence[str]) -> list[Table]:
    """The tables to capture: those asked for (default: all configured) plus those already onboarded.

    An onboarded table that is no longer in the config is an error: offboard it first.
    """
    asked = [source.table(name) for name in requested] if requested else list(source.tables)
    if not asked:
        raise UnknownTableError(f"source {source.name} lists no tables in the config")
    names = {table.name for table in asked}
    kept = [
        configured_table(source, qualified)
        for qualified in onboarded
        if qualified.split(".", 1)[1] not in names
    ]
    return [*asked, *kept]


def configured_table(source: Source, qualified: str) -> Table:
    """The config of onboarded table ``qualified``; an error says to offboard it if it left the config."""
    try:
        return source.table(qualified.split(".", 1)[1])
    except UnknownTableError:
        raise UnknownTableError(
            f"table {qualified} is onboarded but no longer in the config: "
            f"put it back or run cdc-lake offboard {qualified}"
        ) from None


def onboarded_tables(store: StateStore, source: str) -> list[str]:
    """Qualified names of the source's tables that are onboarded and not offboarded."""
    return [
        table.qualified_name
        for table in store.list_tables(source)
        if table.state is not TableState.OFFBOARDED
    ]


def plan_onboarding(config: Config, request: OnboardRequest) -> OnboardPlan:
    """Plan and check the onboarding of ``request.source`` without changing anything."""
    source = config.source(request.source)
    engine = engine_for(source)
    with StateStore.open(config.state_store.url) as store:
        onboarded = onboarded_tables(store, source.name)
        recorded = store.get_source(source.name)
        tables = planned_tables(source, request.tables, onboarded)
        recapture = check_recapture(store, source, engine, tables) if request.after_failover else None
    connectors = plan_source(source, tables)
    names = {plan.name for plan in connectors}
    obsolete = [name for name in (recorded.connector_names if recorded else ()) if name not in names]
    endpoints = connector_endpoints(config, request.password_env)
    configs = {
        plan.name: {
            **render_config(source.engine, plan, engine.connector_params(plan.capture, endpoints)),
            "name": plan.name,
        }
        for plan in connectors
    }
    registered: dict[str, dict[str, str]] = {}
    in_use: dict[int, str] = {}
    with KafkaConnectClient.for_settings(config.kafka_connect, attempts=_PREFLIGHT_ATTEMPTS) as connect:
        service_checks = [check_connect(connect, source.engine), check_registry(config), check_kafka(config)]
        if not service_checks[0].failed:
            names_check, registered = check_connector_names(connect, configs)
            service_checks.append(names_check)
            if any(plan.capture.ids.onboard_fields()["server_id"] is not None for plan in connectors):
                in_use = server_ids_in_use(connect, source, names)
    options = PreflightOptions(
        registered=frozenset(registered),
        replica_required=not config.bootstrap.allow_primary_reads,
        replica_identity_full=request.replica_identity_full,
        server_ids_in_use=in_use,
    )
    checks = engine.preflight([plan.capture for plan in connectors], options)
    checks.extend(check_column_types(engine, source, tables))
    if not service_checks[2].failed:
        checks.append(check_topics(config, source, engine, tables))
    if recapture is not None:
        checks.append(recapture)
    return OnboardPlan(
        config=config,
        source=source,
        engine=engine,
        request=request,
        tables=tables,
        connectors=connectors,
        configs=configs,
        options=options,
        registered=registered,
        obsolete=obsolete,
        checks=[*checks, *service_checks],
    )


def server_ids_in_use(connect: KafkaConnectClient, source: Source, ours: set[str]) -> dict[int, str]:
    """Server ids of the other connectors that read this source's primary.

    One request reads every config (``GET /connectors?expand=info``): a list followed by a
    read per connector failed when another client deleted a connector in between.
    """
    in_use = {}
    for name, config in connect.list_configs().items():
        if name in ours:
            continue
        same_server = config.get("database.hostname") == source.primary.host and config.get(
            "database.port"
        ) == str(source.primary.port)
        server_id = config.get("database.server.id", "")
        if same_server and server_id.isdigit():
            in_use[int(server_id)] = f"connector {name}"
    return in_use


def execute_onboarding(plan: OnboardPlan) -> OnboardReport:
    """Carry out a checked plan; on failure roll back this run's changes and raise :class:`OnboardError`."""
    raise_for_failures(plan.source.name, plan.checks)
    source = plan.source
    points, fork = {}, ""
    if plan.request.after_failover:  # before the new connector writes to the topics
        points = recapture_points(plan.config, source, plan.tables)
        fork = plan.engine.fork_ordering()
    with KafkaConnectClient.for_settings(plan.config.kafka_connect) as connect:
        reconciler = Reconciler(
            plan.config, source, plan.engine, connect, plan.options, plan.endpoints, plan.request.timeout
        )
        outcomes: dict[str, str] = {}
        try:
            for connector in plan.connectors:
                outcomes[connector.name] = reconciler.ensure(connector)
            for name in plan.obsolete:
                reconciler.retire(name, source.tables, drop_slot=True)
                outcomes[name] = "deleted"
        except CdcLakeError as exc:
            raise OnboardError(_failure_message(source.name, exc, *reconciler.journal.rollback())) from exc
    with StateStore.open(plan.config.state_store.url) as store:
        recorded = _record(store, plan, frozenset(points))
        recorded += record_recaptures(store, points, fork)
    journal = reconciler.journal
    return OnboardReport(
        source=source.name,
        checks=plan.checks,
        connectors=outcomes,
        actions=[*journal.actions, *recorded],
        warnings=[*journal.warnings, *(c.detail for c in plan.checks if c.outcome is Outcome.WARN)],
        tables=[table.qualified_name(source) for table in plan.tables],
    )


def _failure_message(source: str, exc: CdcLakeError, undone: list[str], left: list[str]) -> str:
    parts = [f"source {source}: onboarding failed: {exc}"]
    if undone:
        parts.append(f"Rolled back: {'; '.join(undone)}")
    if left:
        parts.append(f"Left in place: {'; '.join(left)}")
    if not undone and not left:
        parts.append("Nothing was changed")
    parts.append(f"Fix the cause and re-run cdc-lake onboard {source}")
    return ". ".join(parts)


def _record(store: StateStore, plan: OnboardPlan, recaptured: frozenset[str]) -> list[str]:
    """Record the source and its tables (new ones PENDING_BOOTSTRAP, ``recaptured`` ones left to
    :func:`record_recaptures`); returns what changed."""
    source = plan.source
    names = [connector.name for connector in plan.connectors]
    before = store.get_source(source.name)
    store.upsert_source(source.name, source.engine, names)
    changed = []
    if before is None or list(before.connector_names) != names:
        changed.append(f"recorded source {source.name} with connectors {', '.join(names)}")
    for table in plan.tables:
        qualified = table.qualified_name(source)
        lake_path = plan.config.lake.table_base_path(qualified)
        existing = store.get_table(qualified)
        info = store.upsert_table(qualified, source.name, table.tier, lake_path)
        if qualified in recaptured:
            continue
        if existing is not None and existing.state is TableState.OFFBOARDED:
            store.transition(qualified, TableState.PENDING_BOOTSTRAP)
            changed.append(f"recorded {qualified} as PENDING_BOOTSTRAP again")
        elif existing is None:
            changed.append(f"recorded {qualified} as {info.state.value}")
        elif (existing.tier, existing.lake_base_path) != (info.tier, info.lake_base_path):
            changed.append(f"recorded {qualified} in tier {info.tier}")
    return changed


def update_connectors(config: Config, source: str, table: str, password_env: str) -> list[str]:
    """Bring the source's connectors in line with the config for ``table`` (a changed frozen column list).

    The :data:`~cdc_lake.capture.update.ConnectorUpdate` a re-bootstrap runs first: the same plan and
    reconciliation as ``cdc-lake onboard SOURCE --tables TABLE``; nothing changes when the connectors
    already capture what the config says, and a failed check raises.
    """
    request = OnboardRequest(source=source, password_env=password_env, tables=(table,))
    plan = plan_onboarding(config, request)
    raise_for_failures(source, plan.checks)
    if not plan.planned_changes():
        return []
    return execute_onboarding(plan).actions
