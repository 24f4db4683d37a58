"""``run``'s background Spark work takes turns: one of its table services' executions and continuous
validation's looks at a time, beside the applier.

``run`` drives three kinds of Spark jobs in one application: the applier's batches, the table-service
thread's compactions and continuous validation's samples.  The fair scheduler's pools
(:data:`cdc_lake.spark.session.SCHEDULER_DEFAULTS`) give the applier's next job the next core a task
frees, but a running task is not stopped, and a compaction task (one file group of a bucket-index table:
about 35 s at 10M rows) beside a sample's reads (a bucket-index table's every file group, merged with its
logs: every file group holds keys of the whole range) held both cores of a two-core machine at once: in
a sample's minute the applier shared them with both, and its commits came late (issue 35 goal 1,
docs/benchmarks.md "Goal 1: background work takes turns").

:class:`BackgroundSlot` is the turn: whoever holds it runs its Spark jobs, the other waits.  It is first
come, first served (a waiting thread is never overtaken, so neither kind starves the other), and it is
held per step, not per sample: a compaction waits at most for one of a sample's two looks, a look for one
execution of the pending plans.  The applier never takes it.  There is one per Spark application
(:func:`background_slot`), since the cores are the application's.

In-process (``local[N]``) the turn's holder also runs at most ``N - 1`` tasks at once
(:func:`background_tasks`; a compaction plan of one file group is one task already, a sample's lake read
is coalesced to that many), so the applier's next job finds a core free rather than waiting for a
running task to end.  On a cluster the executors' cores are many and shared by every job, and nothing
is bounded.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

_LOG = logging.getLogger(__name__)

LOGGED_WAIT_SECONDS = 1.0
"""A wait for the turn at least this long is logged (INFO), naming who waited and who held it."""


class BackgroundSlot:
    """A first-come, first-served turn between background threads of one Spark application."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._changed = threading.Condition()
        self._waiting: deque[object] = deque()
        self._holder: str | None = None
        self.taken: Counter[str] = Counter()
        """How many turns each ``what`` has taken."""

    @property
    def holder(self) -> str | None:
        """What holds the turn now (the ``what`` given to :meth:`turn`), None when free."""
        with self._changed:
            return self._holder

    @contextmanager
    def turn(self, what: str) -> Iterator[float]:
        """Hold the turn for ``what`` (named in logs and :attr:`holder`) while the block runs; yields the
        seconds it waited for it (logged from :data:`LOGGED_WAIT_SECONDS` on).  Not re-entrant."""
        ticket = object()
        began = self._clock()
        held_by = None
        with self._changed:
            self._waiting.append(ticket)
            while self._holder is not None or self._waiting[0] is not ticket:
                held_by = self._holder or held_by
                self._changed.wait()
            self._waiting.popleft()
            self._holder = what
            self.taken[what] += 1
        waited = self._clock() - began
        if waited >= LOGGED_WAIT_SECONDS:
            _LOG.info("%s waited %.1f s for its turn (after %s)", what, waited, held_by)
        try:
            yield waited
        finally:
            with self._changed:
                self._holder = None
                self._changed.notify_all()


_SLOTS: weakref.WeakKeyDictionary[SparkContext, BackgroundSlot] = weakref.WeakKeyDictionary()
_SLOTS_LOCK = threading.Lock()


def background_slot(spark: SparkSession) -> BackgroundSlot:
    """The turn of ``spark``'s application (one per SparkContext, made on first use)."""
    context = spark.sparkContext
    with _SLOTS_LOCK:
        slot = _SLOTS.get(context)
        if slot is None:
            slot = _SLOTS[context] = BackgroundSlot()
        return slot


_LOCAL_MASTER = re.compile(r"local(?:\[(?P<cores>\d+|\*)(?:,\s*\d+)?\])?")


def background_tasks(spark: SparkSession) -> int | None:
    """How many tasks at once a background step of ``spark``'s application may run: in-process
    (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``) every core but one, at least one; None (no
    bound) on a cluster."""
    found = _LOCAL_MASTER.fullmatch(spark.sparkContext.master or "")
    if found is None:
        return None
    cores = found.group("cores")
    count = 1 if cores is None else (os.cpu_count() or 1) if cores == "*" else int(cores)
    return max(1, count - 1)
