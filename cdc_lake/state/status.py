"""Per-table status rows for ``cdc-lake status``: lifecycle, last commit, offsets and freshness."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

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
