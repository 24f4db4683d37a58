"""Step 2: the position wait, its timeout saying how far behind, and the time rule without positions."""

from __future__ import annotations

import datetime as dt

import pytest

from cdc_lake.exceptions import BootstrapError, SourceEngineError
from cdc_lake.state.records import Watermark
from cdc_lake_bootstrap.replica_wait import ReplicaWait, wait_for_replica


class FakeReplica:
    """A replica that reaches positions it is told it has, and replays commits at given times.

    A wait that does not reach its position takes its whole timeout on ``clock``; ``stopped`` is what
    ``check_replica`` raises (a replica that stopped replicating), None while it replicates.
    """

    def __init__(
        self, reached: bool = True, replay_times: list[int | None] | None = None, stopped: str | None = None
    ) -> None:
        self.reached = reached
        self.replay_times = replay_times or []
        self.stopped = stopped
        self.waited: list[tuple[str, float]] = []
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def wait_replica_past(self, position: str, timeout: float) -> str:
        self.waited.append((position, timeout))
        if not self.reached:
            self.now += timeout
            raise SourceEngineError(f"source s: replica replayed 0/10, not past {position}")
        return "0/99"

    def check_replica(self) -> str:
        if self.stopped is not None:
            raise SourceEngineError(self.stopped)
        return "standby 127.0.0.1:15433 replayed 0/10"

    def replica_lag(self, position: str) -> str:
        return f"replayed 0/10, 137 bytes of WAL behind {position}"

    def replica_replay_time_ms(self) -> int | None:
        return self.replay_times.pop(0)


def _watermark(position: str | None, ts: int | None = 10_000) -> Watermark:
    return Watermark(
        table="s.a.t", topic="s.a.t", offsets={0: 5}, ts_source_ms=ts, source_position=position,
        created_at=dt.datetime.now(dt.UTC), replica_position_reached=False, partitions=(),
    )


def test_position_wait_is_preferred() -> None:
    replica = FakeReplica()

    how = wait_for_replica("s.a.t", replica, _watermark("0/50"), ReplicaWait(60, 30), replica.clock)

    assert replica.waited == [("0/50", 30)]
    assert "replayed 0/99, past the watermark position 0/50" in how


def test_a_replica_that_does_not_catch_up_says_how_far_behind() -> None:
    replica = FakeReplica(reached=False)

    with pytest.raises(BootstrapError) as raised:
        wait_for_replica(
            "s.a.t", replica, _watermark("0/50"), ReplicaWait(60, 30), replica.clock, replica.sleep
        )

    message = str(raised.value)
    assert message.startswith("table s.a.t: the read replica did not replay past 0/50 within 30s")
    assert "137 bytes of WAL behind 0/50" in message


def test_time_rule_waits_for_ts_plus_delta() -> None:
    replica = FakeReplica(replay_times=[None, 11_000, 12_500])
    sleeps: list[float] = []

    how = wait_for_replica("s.a.t", replica, _watermark(""), ReplicaWait(2, 30), lambda: 0.0, sleeps.append)

    assert len(sleeps) == 2
    assert "12500 ms, past Tₛ + Δ = 12000 ms" in how


def test_time_rule_times_out_with_the_delay() -> None:
    replica = FakeReplica(replay_times=[11_000, 11_000])
    ticks = iter([0.0, 0.0, 31.0])

    late = r"past Tₛ \+ Δ within 30s \(bootstrap.replica_wait_timeout_seconds; behind by 1.0s\)"
    with pytest.raises(BootstrapError, match=late):
        wait_for_replica("s.a.t", replica, _watermark(None), ReplicaWait(2, 30), lambda: next(ticks), print)


PAUSED = "source s: replica 127.0.0.1:15433 has WAL replay paused"


def test_a_replica_that_stops_replicating_ends_the_position_wait_within_a_minute() -> None:
    replica = FakeReplica(reached=False, stopped=PAUSED)

    with pytest.raises(BootstrapError) as raised:
        wait_for_replica(
            "s.a.t", replica, _watermark("0/50"), ReplicaWait(60, 1800), replica.clock, replica.sleep
        )

    message = str(raised.value)
    assert replica.now <= 60
    assert message.startswith("table s.a.t: the read replica stopped replicating before it replayed 0/50: ")
    assert PAUSED in message and "docs/runbooks/replica-lagging.md" in message


def test_a_replica_that_stops_replicating_ends_the_time_rule_wait_within_a_minute() -> None:
    replica = FakeReplica(replay_times=[11_000] * 1000, stopped=PAUSED)

    with pytest.raises(BootstrapError, match="stopped replicating before it replayed past Tₛ"):
        wait_for_replica(
            "s.a.t", replica, _watermark(None), ReplicaWait(2, 1800), replica.clock, replica.sleep
        )

    assert replica.now <= 60
