"""The run service's schedule in the unit tests: a table target per tier, and a runner counting steps."""

from __future__ import annotations

import threading

from cdc_lake.apply.runner import TableOutcome
from cdc_lake.lake.layout import CompactionSpec, IndexType, TableType
from cdc_lake.lake.target import TableTarget


def tier_target(name: str, tier: int) -> TableTarget:
    """A Postgres table's target named ``name`` (its qualified name too) in ``tier``."""
    return TableTarget(
        name,
        "postgres",
        f"t.{name}",
        tier,
        f"/lake/{name}",
        None,
        (),
        None,
        TableType.COPY_ON_WRITE,
        IndexType.GLOBAL_BLOOM,
        CompactionSpec(),
        False,
    )


class CountingRunner:
    """Counts steps per table; the table named 'bad' always fails."""

    def __init__(self) -> None:
        self.steps: dict[str, int] = {}
        self.lock = threading.Lock()

    def step(self, target: TableTarget, limit: object = None) -> TableOutcome:
        with self.lock:
            self.steps[target.qualified_name] = self.steps.get(target.qualified_name, 0) + 1
        if target.qualified_name == "bad":
            return TableOutcome("bad", error="boom")
        return TableOutcome(target.qualified_name)
