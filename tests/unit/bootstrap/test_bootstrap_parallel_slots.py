"""``bootstrap --parallel N``: N tables work at once, and a table waiting for its hand-off lends its slot."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import pytest

from cdc_lake.state.lifecycle import TableState
from cdc_lake_bootstrap import parallel
from cdc_lake_bootstrap.run import TableResult


class _Runner:
    """A table whose ``run`` does ``work`` in its slot and ``handoff`` inside ``aside`` (as the hand-off)."""

    def __init__(
        self, name: str, work: Callable[[], None], handoff: Callable[[], None] = lambda: None
    ) -> None:
        self.name = name
        self.started = 0.0
        self.aside: Callable[[], AbstractContextManager[object]] = nullcontext
        self._work = work
        self._handoff = handoff

    def run(self, lock: object) -> TableResult:
        self._work()
        with self.aside():
            self._handoff()
        return TableResult(self.name, TableState.CATCHING_UP)


@pytest.fixture(autouse=True)
def _no_state_store_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    @contextmanager
    def locked(config: Any, runner: Any) -> Iterator[object]:
        yield object()

    monkeypatch.setattr(parallel, "_locked", locked)


def _pool(runners: list[_Runner], slots: int) -> list[TableResult]:
    return parallel._run_pool(None, runners, slots)  # type: ignore[arg-type]


def test_a_table_waiting_for_its_hand_off_lends_its_slot_to_the_next() -> None:
    second_ran = threading.Event()

    def wait_for_the_second() -> None:
        assert second_ran.wait(10), "the second table never started while the first waited for its hand-off"

    first = _Runner("s.a", lambda: None, wait_for_the_second)
    second = _Runner("s.b", second_ran.set)
    results = _pool([first, second], 1)
    assert [r.table for r in results] == ["s.a", "s.b"]


def test_no_more_than_n_tables_work_at_once_while_more_wait_for_their_hand_off() -> None:
    lock = threading.Lock()
    working = [0, 0]  # now, most
    waiting = [0, 0]

    def count(counter: list[int], step: int) -> None:
        with lock:
            counter[0] += step
            counter[1] = max(counter[1], counter[0])

    def work() -> None:
        count(working, 1)
        time.sleep(0.02)
        count(working, -1)

    def handoff() -> None:
        count(waiting, 1)
        time.sleep(0.1)
        count(waiting, -1)

    runners = [_Runner(f"s.t{n}", work, handoff) for n in range(12)]
    assert len(_pool(runners, 2)) == 12
    assert working[1] <= 2
    assert waiting[1] > 2


def test_after_a_failure_tables_not_yet_in_a_slot_do_not_start() -> None:
    ran: list[str] = []

    def fail() -> None:
        ran.append("s.bad")
        raise RuntimeError("copy failed")

    others = [_Runner(f"s.t{n}", lambda n=n: ran.append(f"s.t{n}")) for n in range(5)]
    runners = [_Runner("s.bad", fail), *others]
    with pytest.raises(RuntimeError, match="copy failed"):
        _pool(runners, 1)
    assert ran == ["s.bad"]
