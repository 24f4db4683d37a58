"""The run service's schedule: tier 0 continuously, other tiers on their interval, failures backed off."""

from __future__ import annotations

import threading
import time

from cdc_lake.apply.runner import TableOutcome
from cdc_lake.apply.service import RETRY_MIN_SECONDS, ApplyService, _Schedule
from cdc_lake.lake.layout import CompactionSpec, IndexType, TableType
from cdc_lake.lake.target import TableTarget


def _target(name: str, tier: int) -> TableTarget:
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


class _Runner:
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


def test_next_due_by_tier_backlog_and_failures() -> None:
    service = ApplyService(_Runner(), [], lambda tier: {0: 0.0, 1: 900.0}[tier], poll_seconds=1.0)  # type: ignore[arg-type]
    schedule = _Schedule(due=0.0)
    tier0, tier1 = _target("a", 0), _target("b", 1)

    assert service.next_due(tier0, TableOutcome("a", offsets=5, lag_messages=0), schedule, 100.0) == 100.0
    assert service.next_due(tier0, TableOutcome("a", lag_messages=0), schedule, 100.0) == 101.0
    assert service.next_due(tier1, TableOutcome("b", offsets=5, lag_messages=0), schedule, 100.0) == 1000.0
    assert service.next_due(tier1, TableOutcome("b", offsets=5, lag_messages=7), schedule, 100.0) == 100.0
    first = service.next_due(tier0, TableOutcome("a", error="x"), schedule, 100.0)
    second = service.next_due(tier0, TableOutcome("a", error="x"), schedule, 100.0)
    assert (first, second) == (100.0 + RETRY_MIN_SECONDS, 100.0 + 2 * RETRY_MIN_SECONDS)
    service.next_due(tier0, TableOutcome("a"), schedule, 100.0)
    assert schedule.failures == 0


def test_run_applies_tables_concurrently_until_stopped() -> None:
    runner = _Runner()
    targets = [_target("hot", 0), _target("cold", 1), _target("bad", 0)]
    service = ApplyService(
        runner,
        targets,
        lambda tier: 0.0 if tier == 0 else 3600.0,
        workers=3,  # type: ignore[arg-type]
        poll_seconds=0.05,
    )
    seen: list[TableOutcome] = []
    thread = threading.Thread(target=service.run, kwargs={"on_outcome": seen.append})
    thread.start()
    time.sleep(0.6)
    service.stop()
    thread.join(timeout=5)

    assert not thread.is_alive()
    assert runner.steps["hot"] >= 5, "tier 0 polls continuously"
    assert runner.steps["cold"] == 1, "tier 1 waits for its interval"
    assert runner.steps["bad"] == 1, "a failed table backs off"
    assert any(o.error == "boom" for o in seen)
