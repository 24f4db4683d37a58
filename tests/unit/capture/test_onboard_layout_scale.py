"""Connector layout at 200 tables: one shared connector and slot, one per tier-0 table; preflight limits.

200 tables of which 10 are tier 0 take 11 connectors, 11 slots and 11 WAL senders; the other 190
share one connector, one slot and one publication.  Preflight refuses the onboarding when the
server's ``max_replication_slots`` or ``max_wal_senders`` leaves less room than that, naming the value
to set, before any connector is created.
"""

from __future__ import annotations

from dataclasses import replace

from support.configs import postgres
from support.postgres_facts import CUSTOMERS, HEALTHY

from cdc_lake.capture.plan import plan_source
from cdc_lake.config import Table
from cdc_lake.sources.base import PreflightOptions
from cdc_lake.sources.postgres.checks import evaluate

TABLES = 200
TIER0 = 10


def _layout() -> list[Table]:
    return [Table(name=f"shop.t{n:03d}", tier=0 if n < TIER0 else 1 + n % 2) for n in range(TABLES)]


def test_two_hundred_tables_take_one_shared_connector_and_one_per_tier_zero_table() -> None:
    plans = plan_source(postgres(_layout()), _layout())

    assert len(plans) == TIER0 + 1
    shared = [p for p in plans if not p.tier0]
    assert len(shared) == 1 and len(shared[0].capture.tables) == TABLES - TIER0
    slots = {p.capture.ids.slot for p in plans}
    publications = {p.capture.ids.publication for p in plans}
    assert len(slots) == len(publications) == TIER0 + 1


def test_preflight_checks_slots_and_wal_senders_for_the_whole_layout() -> None:
    tables = _layout()
    captures = [plan.capture for plan in plan_source(postgres(tables), tables)]
    facts = replace(
        HEALTHY,
        settings={**HEALTHY.settings, "max_replication_slots": "10", "max_wal_senders": "10"},
        tables={t.name: replace(CUSTOMERS, name=t.name) for t in tables},
    )

    results = {r.name: r for r in evaluate(facts, captures, PreflightOptions())}

    assert results["replication slots"].failed
    assert results["replication slots"].detail == "1 of 10 used, 11 needed"
    assert "at least 12" in (results["replication slots"].fix or "")
    assert results["wal senders"].failed
    assert "at least 12" in (results["wal senders"].fix or "")

    room = {"max_replication_slots": "12", "max_wal_senders": "12"}
    roomy = replace(facts, settings={**facts.settings, **room})
    results = {r.name: r for r in evaluate(roomy, captures, PreflightOptions())}
    assert not results["replication slots"].failed and not results["wal senders"].failed
    assert not results["publication"].failed
