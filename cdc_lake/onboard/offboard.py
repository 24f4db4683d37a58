"""``cdc-lake offboard SOURCE|TABLE``: stop capturing a source or one table; the lake copy is kept.

Offboarding a table re-plans the source without it: a tier-0 table's connector is deleted, a
shared table leaves the shared connector and then its publication.  Offboarding a source
deletes all its connectors.  A deleted connector's slot and publication are dropped only with
``drop_slot`` (which also sweeps up those left by earlier offboards); otherwise they are kept so
a later onboard resumes from the slot, and the report warns that the slot holds WAL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdc_lake.capture.plan import plan_source
from cdc_lake.config import Config, Table
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.exceptions import CdcLakeError, OnboardError, UnknownSourceError, UnknownTableError
from cdc_lake.onboard import DEFAULT_TIMEOUT
from cdc_lake.onboard.reconcile import Reconciler
from cdc_lake.onboard.run import configured_table, connector_endpoints, onboarded_tables
from cdc_lake.sources import engine_for
from cdc_lake.sources.base import PreflightOptions
from cdc_lake.state import StateStore, TableState


@dataclass(frozen=True)
class OffboardRequest:
    """A source name or a ``source.schema.table``, whether to drop slots, and the password variable."""

    target: str
    password_env: str
    drop_slot: bool = False
    timeout: float = DEFAULT_TIMEOUT


@dataclass
class OffboardReport:
    """What offboarding did: per connector, every change, warnings, and the tables now OFFBOARDED."""

    target: str
    connectors: dict[str, str]
    actions: list[str]
    warnings: list[str]
    tables: list[str]

    def to_json(self) -> dict[str, Any]:
        """The report for ``--json``."""
        return {
            "target": self.target,
            "connectors": self.connectors,
            "actions": self.actions,
            "warnings": self.warnings,
            "offboarded": self.tables,
        }


def source_of(target: str) -> str:
    """The source part of an offboard target (``SOURCE`` or ``source.schema.table``)."""
    parts = target.split(".")
    if len(parts) not in (1, 3) or not all(parts):
        raise UnknownTableError(f"{target}: expected SOURCE or source.schema.table")
    return parts[0]


def offboard(config: Config, request: OffboardRequest) -> OffboardReport:
    """Offboard ``request.target``; a failure part-way says what was done and to re-run."""
    source = config.source(source_of(request.target))
    engine = engine_for(source)
    with StateStore.open(config.state_store.url) as store:
        onboarded = onboarded_tables(store, source.name)
        ever = [table.qualified_name for table in store.list_tables(source.name)]
        recorded = store.get_source(source.name)
    if recorded is None:
        raise UnknownSourceError(f"source {source.name} is not onboarded")
    whole_source = request.target == source.name
    if whole_source:
        removed = onboarded
    elif request.target in onboarded:
        removed = [request.target]
    else:
        raise UnknownTableError(f"table {request.target} is not onboarded")
    remaining = [configured_table(source, name) for name in onboarded if name not in removed]
    plans = plan_source(source, remaining)
    names = {plan.name for plan in plans}
    known_tables = [Table(name=name.split(".", 1)[1]) for name in ever]
    outcomes: dict[str, str] = {}
    with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
        reconciler = Reconciler(
            config,
            source,
            engine,
            connect,
            PreflightOptions(),
            connector_endpoints(config, request.password_env),
            request.timeout,
        )
        try:
            for plan in plans:
                outcomes[plan.name] = reconciler.ensure(plan)
            for name in recorded.connector_names:
                if name not in names:
                    reconciler.retire(name, known_tables, drop_slot=request.drop_slot)
                    outcomes[name] = "deleted"
            if whole_source:
                reconciler.sweep(known_tables, drop_slot=request.drop_slot)
        except CdcLakeError as exc:
            done = "; ".join(reconciler.journal.actions) or "nothing"
            raise OnboardError(
                f"offboard {request.target} failed: {exc}. Done so far: {done}. "
                f"Fix the cause and re-run cdc-lake offboard {request.target}"
            ) from exc
    with StateStore.open(config.state_store.url) as store:
        store.upsert_source(source.name, source.engine, [plan.name for plan in plans])
        for name in removed:
            store.transition(name, TableState.OFFBOARDED)
    return OffboardReport(
        target=request.target,
        connectors=outcomes,
        actions=[*reconciler.journal.actions, *(f"recorded {name} as OFFBOARDED" for name in removed)],
        warnings=list(dict.fromkeys(reconciler.journal.warnings)),
        tables=removed,
    )
