"""Per-table status rows for ``cdc-lake status``: lifecycle, last commit, offsets and freshness.

Each row is of the table's current copy (:meth:`cdc_lake.state.store.StateStore.current_copy`).
:func:`status_error` is how ``status`` exits: non-zero whenever a table needs an operator, the most
urgent kind deciding the code (docs/operations.md):

====  =====================================================================================
code  when
====  =====================================================================================
0     no table FAILED, SCHEMA_CHANGED or possibly diverged
4     a table is FAILED: the applier stopped it (docs/runbooks/table-failed.md)
5     none FAILED, a table stopped in SCHEMA_CHANGED (docs/schema-changes.md)
6     none FAILED or SCHEMA_CHANGED, a table is possibly diverged: it applies, but a quarantined
      message's change is missing from the lake (docs/schema-changes.md)
====  =====================================================================================

A stopped table outranks a wrong one, and FAILED outranks SCHEMA_CHANGED (a FAILED table may be
losing its capture position; a SCHEMA_CHANGED one waits for a decision).  The one-line message names
every table of every kind, most urgent first, whatever the code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cdc_lake.exceptions import DivergedTablesError, HealthCheckError, SchemaChangedTablesError
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.models import utcnow
from cdc_lake.state.store import StateStore


@dataclass(frozen=True)
class TableStatus:
    """Everything ``status`` reports about one table."""

    name: str
    source: str
    state: TableState
    tier: int
    lake_base_path: str
    last_commit: str | None
    applied_offsets: dict[int, int]
    freshness_seconds: float | None
    lag_messages: int | None
    last_error: str | None
    updated_at: datetime
    possibly_diverged: str | None = None

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict; partitions become string keys as JSON requires."""
        return {
            "name": self.name,
            "source": self.source,
            "state": self.state.value,
            "tier": self.tier,
            "lake_base_path": self.lake_base_path,
            "last_commit": self.last_commit,
            "applied_offsets": {str(p): offset for p, offset in sorted(self.applied_offsets.items())},
            "freshness_seconds": self.freshness_seconds,
            "lag_messages": self.lag_messages,
            "last_error": self.last_error,
            "updated_at": self.updated_at.isoformat(),
            "possibly_diverged": self.possibly_diverged,
        }


def table_statuses(store: StateStore, now: datetime | None = None) -> list[TableStatus]:
    """The status of every onboarded table, by name, with freshness measured at ``now``."""
    now = now or utcnow()
    statuses = []
    for table in store.list_tables():
        current = store.current_copy(table.qualified_name)
        freshness = current.freshness
        statuses.append(
            TableStatus(
                name=table.qualified_name,
                source=table.source,
                state=table.state,
                tier=table.tier,
                lake_base_path=current.path,
                last_commit=current.last_commit,
                applied_offsets=current.applied_offsets,
                freshness_seconds=None if freshness is None else freshness.age_seconds(now),
                lag_messages=None if freshness is None else freshness.lag_messages,
                last_error=table.last_error,
                updated_at=table.updated_at,
                possibly_diverged=table.possibly_diverged,
            )
        )
    return statuses


_NEEDS_AN_OPERATOR: tuple[tuple[str, str, type[HealthCheckError]], ...] = (
    ("FAILED", "docs/runbooks/table-failed.md", HealthCheckError),
    ("SCHEMA_CHANGED", "docs/schema-changes.md", SchemaChangedTablesError),
    ("possibly diverged", "docs/schema-changes.md", DivergedTablesError),
)
"""Each kind of table ``status`` exits non-zero for, most urgent first: its name, where to read on and
the error (whose exit code is the kind's)."""


def status_error(statuses: Sequence[TableStatus]) -> HealthCheckError | None:
    """The error ``status`` exits with (see the module docstring), or None when no table needs an operator."""
    tables = {
        "FAILED": [row.name for row in statuses if row.state is TableState.FAILED],
        "SCHEMA_CHANGED": [row.name for row in statuses if row.state is TableState.SCHEMA_CHANGED],
        "possibly diverged": [row.name for row in statuses if row.possibly_diverged],
    }
    found = [(kind, doc, error) for kind, doc, error in _NEEDS_AN_OPERATOR if tables[kind]]
    if not found:
        return None
    message = "; ".join(
        f"{len(tables[kind])} tables {kind}: {', '.join(tables[kind])} (see {doc})" for kind, doc, _ in found
    )
    return found[0][2](message)
