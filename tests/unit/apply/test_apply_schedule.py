"""The run service's schedule: tier 0 continuously, other tiers on their interval, failures backed off."""

from __future__ import annotations

import threading
import time

from support.schedule import CountingRunner, tier_target

from cdc_lake.apply.runner import TableOutcome
from cdc_lake.apply.service import RETRY_MIN_SECONDS, ApplyService, _Schedule


def test_next_due_by_tier_backlog_and_failures() -> None:
    service = ApplyService(CountingRunner(), [], lambda tier: {0: 0.0, 1: 900.0}[tier], poll_seconds=1.0)  # type: ignore[arg-type]
    schedule = _Schedule(due=0.0)
    tier0, tier1 = tier_target("a", 0), tier_target("b", 1)

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
    runner = CountingRunner()
    targets = [tier_target("hot", 0), tier_target("cold", 1), tier_target("bad", 0)]
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
