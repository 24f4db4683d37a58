"""Bootstrap progress: rows read and written, partitions done, rows/s and ETA, for people and for ``status``.

While a bootstrap runs, :class:`TableProgress` is updated after every commit and, between commits, from
Spark's task counts; a :class:`ProgressView` shows it (a rich bar on a terminal, one line per step
otherwise).

What it shows only moves forward.  ``rows_written`` is exact: the rows of the Hudi commits, added as
each commit lands (:meth:`TableProgress.committed`).  Between commits the running one's rows are an
estimate from the share of Spark tasks done, and that share falls each time Hudi adds a stage to the
job, so :meth:`TableProgress.reading` keeps the largest estimate of the commit, and ``rows_read`` (what
the bar, rows/s and the ETA use) is the largest written-plus-estimate seen so far: a commit that wrote
fewer rows than estimated holds the count until the next ones pass it.  Every step has a phase, named
before the step starts, so no step runs unnamed: ``checking the source``, ``starting Spark``, ``saving
the watermark``, ``waiting for the replica``, ``planning``, ``copying``, ``handing off``, ``handed
off`` (then ``catching up`` and ``live`` with ``--apply``).

What must outlive the process goes to the state store as runs of the table: ``bootstrap`` (the whole
run), ``bootstrap.plan`` (estimated rows, partitions, key) and ``bootstrap.commit`` (one per Hudi commit:
its partitions and rows). :func:`bootstrap_status` rebuilds the progress from those and the watermark's
plan for ``cdc-lake status --json``, from any process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.models import utcnow
from cdc_lake.state.records import Run, Watermark
from cdc_lake.state.store import StateStore

RUN = "bootstrap"
PLAN_RUN = "bootstrap.plan"
COMMIT_RUN = "bootstrap.commit"
_RUN_HISTORY = 500


@dataclass
class TableProgress:
    """How far one table's bootstrap is.  Rows written before this run (resumed) do not count in rows/s."""

    table: str
    phase: str = "starting"
    partitions_total: int = 0
    partitions_done: int = 0
    estimated_rows: int = 0
    rows_written: int = 0
    rows_in_flight: int = 0
    rows_before: int = 0
    started: float = field(default_factory=time.monotonic)
    rows_shown: int = 0
    """The largest ``rows_read`` so far: what is shown never decreases."""

    @property
    def rows_read(self) -> int:
        """Rows committed plus the running commit's largest estimate, never less than shown before."""
        return max(self.rows_shown, self.rows_written + self.rows_in_flight)

    def reading(self, rows: int) -> None:
        """The running commit has read about ``rows`` (from task counts): kept if the largest yet."""
        self.rows_in_flight = max(self.rows_in_flight, rows)
        self.rows_shown = self.rows_read

    def committed(self, rows: int, partitions: int) -> None:
        """A commit of ``partitions`` partitions wrote ``rows`` rows: exact, replacing its estimate."""
        self.rows_written += rows
        self.partitions_done += partitions
        self.rows_in_flight = 0
        self.rows_shown = self.rows_read

    def rows_per_second(self, now: float) -> float | None:
        """Rows read per second by this run."""
        elapsed = now - self.started
        done = self.rows_read - self.rows_before
        return done / elapsed if elapsed > 0 and done > 0 else None

    def eta_seconds(self, now: float) -> float | None:
        """Seconds until the estimated row count is read, at this run's rate."""
        rate = self.rows_per_second(now)
        if rate is None or not self.estimated_rows:
            return None
        return max(0, self.estimated_rows - self.rows_read) / rate


class ProgressView(Protocol):
    """Where progress is shown."""

    def show(self, progress: TableProgress) -> None:
        """Show the latest state of one table's bootstrap."""
        ...

    def close(self) -> None:
        """Finish showing (leave the last state visible)."""
        ...


def _eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = int(seconds)
    return f"{whole // 3600}h{whole // 60 % 60:02d}m" if whole >= 3600 else f"{whole // 60}m{whole % 60:02d}s"


class BarView:
    """A rich progress bar per table on stderr."""

    def __init__(self, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[rows]}"),
            TextColumn("{task.fields[parts]}"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("ETA {task.fields[eta]}"),
            console=console or Console(stderr=True),
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}
        self._progress.start()

    def show(self, progress: TableProgress) -> None:
        """Update (or add) the table's bar."""
        now = time.monotonic()
        rate = progress.rows_per_second(now)
        rows = f"{progress.rows_read:,}/{progress.estimated_rows:,} rows"
        parts = f"{progress.partitions_done}/{progress.partitions_total} partitions"
        rate_text = "-" if rate is None else f"{rate:,.0f} rows/s"
        eta = _eta_text(progress.eta_seconds(now))
        description = f"{progress.table} [{progress.phase}]"
        total = max(progress.estimated_rows, progress.rows_read, 1)
        task = self._tasks.get(progress.table)
        if task is None:
            task = self._progress.add_task(description, total=total, rows="", parts="", rate="", eta="")
            self._tasks[progress.table] = task
        self._progress.update(
            task,
            description=description,
            total=total,
            completed=progress.rows_read,
            rows=rows,
            parts=parts,
            rate=rate_text,
            eta=eta,
        )

    def close(self) -> None:
        """Stop refreshing the bars."""
        self._progress.stop()


class LineView:
    """One line per phase change or commit, for logs and non-terminal output."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self._echo = echo
        self._last: dict[str, tuple[str, int]] = {}

    def show(self, progress: TableProgress) -> None:
        """Print a line when the phase or the number of done partitions changed."""
        key = (progress.phase, progress.partitions_done)
        if self._last.get(progress.table) == key:
            return
        self._last[progress.table] = key
        now = time.monotonic()
        rate = progress.rows_per_second(now)
        eta = _eta_text(progress.eta_seconds(now))
        rate_text = "" if rate is None else f", {rate:,.0f} rows/s, ETA {eta}"
        self._echo(
            f"{progress.table}: {progress.phase}: {progress.partitions_done}/{progress.partitions_total} "
            f"partitions, {progress.rows_written:,} rows written{rate_text}"
        )

    def close(self) -> None:
        """Nothing to finish."""


def _phase(state: TableState, watermark: Watermark | None) -> str:
    if state is TableState.LIVE:
        return "done"
    if state is TableState.CATCHING_UP:
        return "handed off, catching up"
    if watermark is None:
        return "starting"
    if not watermark.replica_position_reached:
        return "waiting for the replica"
    if not watermark.partitions:
        return "planning"
    if watermark.pending_partitions:
        return "copying"
    return "handing off"


def _seconds(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds())


def bootstrap_status(
    store: StateStore, table: str, state: TableState, now: datetime | None = None
) -> dict[str, Any] | None:
    """A JSON-ready view of ``table``'s current (or last) bootstrap; None if it was never bootstrapped."""
    watermark = store.get_watermark(table)
    runs = [r for r in store.list_runs(table, limit=_RUN_HISTORY) if r.command.startswith(RUN)]
    if watermark is None and not runs:
        return None
    now = now or utcnow()
    attempt = None if watermark is None else watermark.created_at
    current = [r for r in runs if attempt is None or r.started_at >= attempt]
    plans = [r for r in current if r.command == PLAN_RUN]
    commits = [r for r in current if r.command == COMMIT_RUN]
    whole = next((r for r in runs if r.command == RUN), None)
    rows = sum(int(r.detail.get("rows", 0)) for r in commits)
    estimated = int(plans[0].detail.get("estimated_rows", 0)) if plans else None
    rate, eta = _rate(whole, commits, estimated, rows, now)
    total = None if watermark is None else len(watermark.partitions)
    done = None if watermark is None else len(watermark.partitions) - len(watermark.pending_partitions)
    return {
        "phase": _phase(state, watermark),
        "watermark": None
        if watermark is None
        else {
            "topic": watermark.topic,
            "offsets": {str(p): o for p, o in sorted(watermark.offsets.items())},
            "ts_source_ms": watermark.ts_source_ms,
            "source_position": watermark.source_position,
            "replica_position_reached": watermark.replica_position_reached,
            "created_at": watermark.created_at.isoformat(),
        },
        "partitions_total": total,
        "partitions_done": done,
        "estimated_rows": estimated,
        "rows_written": rows,
        "rows_per_second": rate,
        "eta_seconds": eta,
        "last_run": None if whole is None else _run_json(whole),
    }


def _rate(
    whole: Run | None, commits: list[Run], estimated: int | None, rows: int, now: datetime
) -> tuple[float | None, float | None]:
    """Rows/s of the latest run's commits, and the ETA at that rate while the run is open."""
    if whole is None:
        return None, None
    mine = [r for r in commits if r.started_at >= whole.started_at]
    written = sum(int(r.detail.get("rows", 0)) for r in mine)
    end = whole.finished_at or now
    elapsed = _seconds(whole.started_at, end)
    if not written or not elapsed:
        return None, None
    rate = written / elapsed
    if whole.finished_at is not None or estimated is None:
        return round(rate, 1), None
    return round(rate, 1), round(max(0, estimated - rows) / rate, 1)


def _run_json(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "started_at": run.started_at.isoformat(),
        "finished_at": None if run.finished_at is None else run.finished_at.isoformat(),
        "outcome": None if run.outcome is None else run.outcome.value,
        "error": run.detail.get("error"),
    }
