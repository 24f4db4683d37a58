"""``cdc-lake run``: the long-running applier for every table, each tier on its own cadence.

Tier-0 tables apply continuously: a batch starts as soon as the previous one ends, and an idle table is
polled every ``poll_seconds`` (a poll reads end offsets on the driver; no Spark job).  Other tiers apply
every ``apply.default_interval_seconds[tier]`` (default 15 minutes for tier 1), and sooner while a capped
batch left a backlog.  A failed table is retried with a growing delay while the others keep going.
Up to ``workers`` tables apply at once, all in one Spark application.

With an :class:`~cdc_lake.kafka.board.OffsetBoard` (the one the runner's batch plans read), every loop
first refreshes the end offsets of all due tables' topics (and their connectors' schema histories, for
the swap check of :mod:`cdc_lake.apply.swaps`) in one batched Kafka read, so 200 mostly idle
tables cost a few Kafka round trips per poll rather than one consumer each; an idle table's step then
reads no Kafka and starts no Spark job.

A stop request (SIGTERM/SIGINT through :meth:`ApplyService.stop`) lets running batches finish and
starts no new one; a batch interrupted anyway (SIGKILL) is rolled back by Hudi on the next write and
re-applied from the last completed commit's offsets.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from cdc_lake.apply.runner import ApplyRunner, TableOutcome
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.kafka.board import OffsetBoard
from cdc_lake.lake.target import TableTarget

_LOG = logging.getLogger(__name__)

RETRY_MIN_SECONDS = 30.0
RETRY_MAX_SECONDS = 900.0


@dataclass
class _Schedule:
    """When a table is next due and how many times in a row it failed."""

    due: float
    failures: int = 0


class ApplyService:
    """Schedules tables by tier until stopped."""

    def __init__(
        self,
        runner: ApplyRunner,
        targets: Sequence[TableTarget],
        interval_for: Callable[[int], float],
        workers: int = 4,
        poll_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        board: OffsetBoard | None = None,
    ) -> None:
        self.runner = runner
        self.board = board
        self.targets = list(targets)
        self.interval_for = interval_for
        self.workers = max(1, workers)
        self.poll_seconds = poll_seconds
        self.clock = clock
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask the service to finish its running batches and return (safe from a signal handler)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once a stop was requested."""
        return self._stop.is_set()

    def next_due(self, target: TableTarget, outcome: TableOutcome, schedule: _Schedule, now: float) -> float:
        """When ``target`` should run again after ``outcome``."""
        interval = self.interval_for(target.tier)
        if outcome.failed:
            schedule.failures += 1
            delay: float = max(RETRY_MIN_SECONDS, interval) * 2.0 ** (schedule.failures - 1)
            return now + min(RETRY_MAX_SECONDS, delay)
        schedule.failures = 0
        if outcome.skipped:
            return now + max(self.poll_seconds, interval)
        if outcome.lag_messages:
            return now
        if interval <= 0:
            return now if outcome.offsets else now + self.poll_seconds
        return now + interval

    def run(self, on_outcome: Callable[[TableOutcome], None] | None = None) -> None:
        """Apply tables on their schedules until :meth:`stop` is called; returns when running batches end."""
        start = self.clock()
        schedules = {t.qualified_name: _Schedule(due=start) for t in self.targets}
        running: dict[Future[TableOutcome], TableTarget] = {}
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="run") as pool:
            while not self._stop.is_set():
                now = self.clock()
                busy = {t.qualified_name for t in running.values()}
                if self.board is not None and len(running) < self.workers:
                    self._refresh_due(schedules, busy, now)
                for target in sorted(self.targets, key=lambda t: (schedules[t.qualified_name].due, t.tier)):
                    if len(running) >= self.workers:
                        break
                    if target.qualified_name not in busy and schedules[target.qualified_name].due <= now:
                        running[pool.submit(self.runner.step, target)] = target
                wait_for = self._seconds_to_next(schedules, running, now)
                done, _ = wait(list(running), timeout=wait_for, return_when=FIRST_COMPLETED)
                if not running:
                    self._stop.wait(wait_for)
                for future in done:
                    target = running.pop(future)
                    outcome = future.result()
                    schedule = schedules[target.qualified_name]
                    schedule.due = self.next_due(target, outcome, schedule, self.clock())
                    if on_outcome is not None:
                        on_outcome(outcome)
            _LOG.info("stopping: waiting for %d running batches", len(running))
            for future in list(running):
                outcome = future.result()
                if on_outcome is not None:
                    on_outcome(outcome)

    def _refresh_due(self, schedules: dict[str, _Schedule], busy: set[str], now: float) -> None:
        """One batched end-offset read for every due table's topic and schema history (stale entries only)."""
        assert self.board is not None
        due_targets = [
            t for t in self.targets if t.qualified_name not in busy and schedules[t.qualified_name].due <= now
        ]
        histories = [t.history_topic for t in due_targets if t.history_topic is not None]
        due = [t.topic for t in due_targets] + histories
        try:
            self.board.refresh(due)
        except CdcLakeError as exc:  # each table's step reads its own offsets and records the failure
            _LOG.warning("batched end-offset read of %d topics failed: %s", len(due), exc)

    def _seconds_to_next(
        self, schedules: dict[str, _Schedule], running: dict[Future[TableOutcome], TableTarget], now: float
    ) -> float:
        busy = {t.qualified_name for t in running.values()}
        waiting = [s.due for name, s in schedules.items() if name not in busy]
        until = min(waiting, default=now + self.poll_seconds) - now
        return min(self.poll_seconds, max(0.05, until))
