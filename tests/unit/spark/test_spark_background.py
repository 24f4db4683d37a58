"""The background turn of ``run``'s Spark application: one holder at a time, first come first served,
the wait measured, one turn per application."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest

from cdc_lake.spark.background import BackgroundSlot, background_slot, background_tasks


def _hold_in_thread(
    slot: BackgroundSlot, what: str, log: list[str], release: threading.Event
) -> threading.Thread:
    def hold() -> None:
        with slot.turn(what):
            log.append(what)
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    return thread


def _until(condition: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_one_holder_at_a_time_and_the_wait_is_measured() -> None:
    slot = BackgroundSlot()
    log: list[str] = []
    release = threading.Event()
    holder = _hold_in_thread(slot, "table services of pg.s.t", log, release)
    _until(lambda: slot.holder == "table services of pg.s.t")
    waited: list[float] = []

    def look() -> None:
        with slot.turn("continuous validation of pg.s.t") as seconds:
            waited.append(seconds)
            log.append("look")

    looker = threading.Thread(target=look)
    looker.start()
    time.sleep(0.2)
    assert log == ["table services of pg.s.t"], "the look ran while the compaction held the turn"
    release.set()
    holder.join(5)
    looker.join(5)
    assert log == ["table services of pg.s.t", "look"]
    assert slot.taken == {"table services of pg.s.t": 1, "continuous validation of pg.s.t": 1}
    assert waited and waited[0] >= 0.15
    assert slot.holder is None


def test_a_waiting_thread_is_never_overtaken_by_the_holder_coming_back() -> None:
    """A table-service thread executing plan after plan releases and asks again at once; the look that
    waited meanwhile goes first (a plain lock lets the releasing thread win, and the look starves)."""
    slot = BackgroundSlot()
    order: list[str] = []
    first_done = threading.Event()
    look_waiting = threading.Event()

    def services() -> None:
        with slot.turn("services"):
            order.append("plan 1")
            look_waiting.wait(5)
            time.sleep(0.1)  # the look is queued by now
        with slot.turn("services"):
            order.append("plan 2")
        first_done.set()

    def look() -> None:
        look_waiting.set()
        with slot.turn("look"):
            order.append("look")

    compactor = threading.Thread(target=services)
    compactor.start()
    _until(lambda: order == ["plan 1"])
    looker = threading.Thread(target=look)
    looker.start()
    compactor.join(5)
    looker.join(5)
    assert first_done.is_set()
    assert order == ["plan 1", "look", "plan 2"]


def test_a_turn_is_released_when_its_work_raises() -> None:
    slot = BackgroundSlot()
    try:
        with slot.turn("look"):
            raise RuntimeError("a JVM error")
    except RuntimeError:
        pass
    assert slot.holder is None
    with slot.turn("services") as waited:
        assert waited < 1.0


class _Context:
    """A SparkContext's stand-in: hashable by identity, weakly referable."""


def test_one_turn_per_spark_application() -> None:
    first = SimpleNamespace(sparkContext=_Context())
    same_context = SimpleNamespace(sparkContext=first.sparkContext)
    other = SimpleNamespace(sparkContext=_Context())
    assert background_slot(first) is background_slot(same_context)  # type: ignore[arg-type]
    assert background_slot(first) is not background_slot(other)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("master", "tasks"),
    [
        ("local[2]", 1),
        ("local[8]", 7),
        ("local", 1),
        ("local[1]", 1),
        ("local[4,3]", 3),
        ("local[*]", max(1, (os.cpu_count() or 1) - 1)),
        ("spark://127.0.0.1:7077", None),
        ("yarn", None),
    ],
)
def test_in_process_a_background_step_leaves_the_applier_a_core(master: str, tasks: int | None) -> None:
    spark = SimpleNamespace(sparkContext=SimpleNamespace(master=master))
    assert background_tasks(spark) == tasks  # type: ignore[arg-type]
