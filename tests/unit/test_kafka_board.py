"""The offset board: many topics' end offsets in one read, reused while fresh; the service refreshes it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

import pytest
from test_apply_schedule import _Runner, _target

from cdc_lake.apply.service import ApplyService
from cdc_lake.kafka import board as board_module
from cdc_lake.kafka.board import OffsetBoard
from cdc_lake.kafka.offsets import topic_watermarks
from cdc_lake.kafka.reader import KafkaReadSettings


class _Reads:
    """Stands in for the batched Kafka read: records which topics each read asked for."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(
        self, servers: str, topics: Iterable[str], timeout: float = 10.0, extra: object = None
    ) -> dict[str, dict[int, tuple[int, int]]]:
        wanted = list(topics)
        with self.lock:
            self.calls.append(wanted)
        return {topic: {0: (0, len(self.calls))} for topic in wanted}


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> _Reads:
    recorded = _Reads()
    monkeypatch.setattr(board_module, "topic_watermarks", recorded)
    return recorded


def test_one_read_for_many_topics_reused_while_fresh(reads: _Reads) -> None:
    now = [100.0]
    board = OffsetBoard(KafkaReadSettings("k:9092"), max_age_seconds=1.0, clock=lambda: now[0])

    board.refresh(["a", "b", "c", "a"])
    assert reads.calls == [["a", "b", "c"]]
    assert board.marks("b") == {0: (0, 1)}
    assert len(reads.calls) == 1 and board.requests == 1 and board.served == 1

    now[0] += 0.5
    board.refresh(["a", "d"])  # only the missing one is read
    assert reads.calls[-1] == ["d"]

    now[0] += 0.8  # a, b, c are now 1.3 s old; d 0.8 s
    assert board.marks("a") == {0: (0, 3)}
    assert reads.calls[-1] == ["a"]
    board.refresh(["b", "c", "d"])
    assert reads.calls[-1] == ["b", "c"]
    assert board.requests == 4


def test_plans_reuse_offsets_longer_than_the_service_refreshes_them(reads: _Reads) -> None:
    now = [0.0]
    board = OffsetBoard(KafkaReadSettings("k:9092"), 1.0, reuse_seconds=5.0, clock=lambda: now[0])
    board.refresh(["a"])
    now[0] = 3.0
    assert board.marks("a") == {0: (0, 1)} and board.served == 1
    board.refresh(["a"])  # older than max_age: the service reads it again
    assert board.requests == 2
    now[0] = 9.0
    board.marks("a")
    assert board.requests == 3 and board.served == 1


def test_no_topics_reads_nothing() -> None:
    assert topic_watermarks("unreachable.invalid:1", []) == {}


def test_service_refreshes_due_tables_in_batches(reads: _Reads) -> None:
    runner = _Runner()
    board = OffsetBoard(KafkaReadSettings("k:9092"), max_age_seconds=0.2)
    targets = [_target(f"t{n}", n % 3) for n in range(60)]
    service = ApplyService(runner, targets, lambda tier: 0.0, workers=4, poll_seconds=0.05, board=board)  # type: ignore[arg-type]
    thread = threading.Thread(target=service.run)
    thread.start()
    time.sleep(1.0)
    service.stop()
    thread.join(10)

    steps = sum(runner.steps.values())
    assert set(runner.steps) == {t.qualified_name for t in targets}
    assert max(len(call) for call in reads.calls) >= 50, "the first read covers every due table"
    assert len(reads.calls) * 4 < steps, f"{len(reads.calls)} reads for {steps} steps"
