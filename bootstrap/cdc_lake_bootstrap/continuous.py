"""Continuous validation inside ``cdc-lake run``: a rotating sample of key ranges compared with the replica.

**The rotation.**  Every ``validation.sample_seconds`` (300 s by default) the validator thread takes the
next slices of the rotation.  A table whose first key column is integral is cut into equal-width ranges of
that column between its lowest and highest key on the replica, the first open below and the last open
above, so every key, one inserted since too, is in exactly one slice of the table's cycle
(:func:`slice_ranges`); a table keyed otherwise is one slice, compared whole.  A table has as many slices
as whole sample budgets its estimated rows (the catalog's statistic) hold, so a slice holds at least the
budget, ``total rows * sample_seconds / (cycle_hours * 3600)`` (at least :data:`MIN_BUDGET_ROWS`): one
slice of a table spends a sample (a share just below the budget took a second slice of the same table,
each slice reading the lake).  A sample takes slices table after table until it has spent the
budget: a cycle covers every LIVE table ``run`` applies
in about ``cycle_hours`` whatever their sizes (:class:`Rotation`).  A table's key bounds are read when
the rotation reaches it.  Each slice's result is recorded as a ``validate-sample`` run holding where the
rotation stands, so a restarted ``run`` goes on from the next slice.

**Two looks.**  A busy table differs from its replica at any instant (changes the lake has not applied
yet, or applied after the replica's read), so the first look, ``validate``'s comparison of the slice at a
common point (:func:`cdc_lake_bootstrap.validate.validate_table`), only names candidates.  The lake's
rows of the candidates are taken from the rows the comparison read (kept, not read again: a slice holds
about a budget's worth; a table compared whole is read again for them); then a second look reads the
candidates' source rows (their keys alone, :func:`~cdc_lake_bootstrap.validate.source_frame`), takes the
replica's position S once read, waits until Debezium streamed past S and the lake applied the topic up to
there (``run``'s own batches get it there), and reads the candidates' lake rows again.  A key is
**confirmed** diverged when the sides differ at the second look and the lake's row is the one the first
look saw: the same ordering value, or no row both times (:func:`confirmed_keys`).

Why that is sound: the lake row the first look saw was committed before S was taken, so the source
transaction that wrote it (or the bootstrap's or a repair's read) came before S.  Any later change of the
key committed by S is in the lake at the second look, which applied everything up to S, with a greater
ordering value (a row's changes are ordered by its lock, and so are their LSNs and Kafka offsets); an
unchanged ordering value therefore means no change of the key between that row's and S, and the source at
S must hold the lake's row.  A difference is the lake's.  The one case the ordering cannot settle is a
key the lake holds no row for at either look, on a table whose lake forgets deletes (hard deletes): it is
confirmed only if the source held it at both looks, and a false confirmation needs the key deleted after
each look's source read but before that look's lake read (the lake may be past the look's position by
then), and inserted again in between: under churn of deletes and re-inserts of the same keys it happens
(``tests/integration/test_repair.py`` saw 2 and 3 such keys in a cycle, 2026-12-04), marking the table and,
with ``auto_repair``, repairing a key that did not differ (the repair writes the source's state, so no row
goes wrong).  Reading the lake's rows as of the commit that reached the look's position would close it.
A candidate the source or the lake changed between the looks is left to the next cycle.

**What a confirmed key does.**  The table is marked possibly diverged (``status``, the
``cdc_lake_table_possibly_diverged`` series and the ``CdcLakePossiblyDiverged`` alert, runbook
``possibly-diverged``), the count goes to ``cdc_lake_validation_keys_differing``, and with
``validation.auto_repair`` the confirmed keys are repaired as ``cdc-lake repair --keys`` repairs them
(:func:`cdc_lake_bootstrap.repair.repair_table`, through ``run``'s applier and the table's apply lock); a
repair whose keys a later clean sample of the slice proves equal clears nothing by itself: ``cdc-lake
validate`` clears the mark, as for every other cause.  More than ``validation.max_keys`` candidates are not
judged one by one: the sample marks the table and names ``rebootstrap``.

Costs: the first look reads one slice of the source (one JDBC query on the replica, never the primary:
the primary is asked its position only) and the lake's files whose key statistics overlap it; the second
look reads the candidates' source rows alone and the slice of the lake again.  A bucket-index table's
file groups each hold keys of the whole range (the bucket is the key's hash), so each of its two lake
reads merges every file group: a sample costs two reads of the table whatever its slice, three for a
table compared whole (issue 35: six before one slice spent a sample and the first look read its rows
again).  The samples' Spark jobs run in the fair scheduler's ``validation`` pool, so the applier's jobs
get the next free core.
``benchmarks/continuous_validation_bench.py`` measures the CPU against the applier's.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from cdc_lake import applier_metrics
from cdc_lake.config import Config
from cdc_lake.spark.errors import describe_failure
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import RunOutcome
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.validate import KeyRange

_LOG = logging.getLogger(__name__)

SAMPLE_RUN: Final = "validate-sample"
"""The run each slice's comparison is recorded as (its detail: the slice, the counts, the rotation)."""

STOP_WAIT_SECONDS: Final = 30.0
"""How long ``run``'s stop waits for the slice under way."""

MIN_BUDGET_ROWS: Final = 10_000
"""A sample compares at least this many (estimated) rows: below it, a slice costs its queries and jobs
more than its rows."""


def slice_ranges(count: int, bounds: tuple[int, int] | None) -> list[KeyRange]:
    """``count`` equal-width ranges over ``bounds`` (lowest, highest key), the first open below and the last
    open above: every integer is in exactly one.  One open range without bounds or with ``count`` 1."""
    if bounds is None or count <= 1:
        return [KeyRange()]
    lo, hi = bounds
    width = max(1, math.ceil((hi - lo + 1) / count))
    cuts = sorted({lo + i * width for i in range(1, count) if lo + i * width <= hi})
    edges: list[int | None] = [None, *cuts, None]
    return [KeyRange(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def budget_rows(total_rows: int, sample_seconds: float, cycle_seconds: float) -> int:
    """The rows one sample compares so that the samples of a cycle cover ``total_rows``."""
    samples = max(1.0, cycle_seconds / sample_seconds)
    return max(MIN_BUDGET_ROWS, math.ceil(total_rows / samples))


@dataclass(frozen=True)
class TableFacts:
    """What the rotation needs of a table: its estimated rows and its integral first key's bounds."""

    rows: int
    bounds: tuple[int, int] | None
    """Lowest and highest value of the integral first key column; None: not integral (one slice), or
    empty."""


@dataclass(frozen=True)
class Slice:
    """One part of a table a sample compares: the ``index``-th of ``count`` key ranges."""

    table: str
    index: int
    count: int
    key_range: KeyRange
    rows: int
    """Its share of the table's estimated rows."""


@dataclass
class Rotation:
    """Where the validation cycle stands: the table being sliced, its slices, and what was covered.

    ``next_slices`` hands out the slices of one sample; ``facts`` is asked once per table per cycle, when
    the rotation reaches it (its bounds fix the table's slices until its last one).
    """

    tables: Sequence[str]
    budget: int
    table_index: int = 0
    slices: list[KeyRange] = field(default_factory=list)
    slice_index: int = 0
    table_rows: int = 0
    cycle: int = 0
    covered_tables: int = 0

    def next_slices(self, facts: Callable[[str], TableFacts | None]) -> list[Slice]:
        """The slices of the next sample: at least one, then more while the budget lasts, never past the
        cycle's end (none if there are no tables, or none whose facts could be read this round)."""
        chosen: list[Slice] = []
        spent = 0
        looked = 0
        cycle = self.cycle
        while self.tables and spent < self.budget and looked <= len(self.tables) and self.cycle == cycle:
            if not self.slices:
                name = self.tables[self.table_index % len(self.tables)]
                found = facts(name)
                looked += 1
                if found is None:
                    self._next_table()
                    continue
                # At most rows // budget slices: each holds at least the budget, so one spends a sample.
                count = max(1, found.rows // self.budget) if found.bounds is not None else 1
                self.slices = slice_ranges(count, found.bounds)
                self.slice_index = 0
                self.table_rows = found.rows
            name = self.tables[self.table_index % len(self.tables)]
            share = max(1, self.table_rows // len(self.slices))
            key_range = self.slices[self.slice_index]
            chosen.append(Slice(name, self.slice_index, len(self.slices), key_range, share))
            spent += share
            self.slice_index += 1
            if self.slice_index >= len(self.slices):
                self._next_table()
        return chosen

    def _next_table(self) -> None:
        self.slices, self.slice_index = [], 0
        self.table_index += 1
        self.covered_tables += 1
        if self.table_index >= len(self.tables):
            self.table_index, self.cycle, self.covered_tables = 0, self.cycle + 1, 0

    @property
    def progress(self) -> float:
        """The share of the cycle's tables done, the current one counted by its slices."""
        if not self.tables:
            return 0.0
        current = self.slice_index / len(self.slices) if self.slices else 0.0
        return min(1.0, (self.covered_tables + current) / len(self.tables))

    def state(self) -> dict[str, Any]:
        """Where it stands, JSON-ready (saved with each sample; :meth:`resume` reads it back)."""
        return {
            "table": self.tables[self.table_index % len(self.tables)] if self.tables else None,
            "slice_index": self.slice_index,
            "slices": [[r.lo, r.hi] for r in self.slices],
            "table_rows": self.table_rows,
            "cycle": self.cycle,
            "covered_tables": self.covered_tables,
        }

    def resume(self, saved: Mapping[str, Any]) -> None:
        """Go on from ``saved`` (a :meth:`state`) if its table is still rotated; else start afresh."""
        table = saved.get("table")
        if not isinstance(table, str) or table not in self.tables:
            return
        self.table_index = list(self.tables).index(table)
        self.slices = [KeyRange(lo, hi) for lo, hi in saved.get("slices") or []]
        self.slice_index = int(saved.get("slice_index") or 0)
        if self.slice_index >= len(self.slices):
            self.slices, self.slice_index = [], 0
        self.table_rows = int(saved.get("table_rows") or 0)
        self.cycle = int(saved.get("cycle") or 0)
        self.covered_tables = min(int(saved.get("covered_tables") or 0), self.table_index)


@dataclass(frozen=True)
class LakeLook:
    """A candidate key's lake row at one look: its ordering value, whether it is live (not soft-deleted),
    and its values' hash (None where the look did not hash them)."""

    ordering: str
    live: bool
    values: int | None = None


def confirmed_keys(
    candidates: Iterable[Hashable],
    first: Mapping[Hashable, LakeLook],
    second: Mapping[Hashable, LakeLook],
    held_first: Collection[Hashable],
    source_second: Mapping[Hashable, int],
    lake_keeps_deletes: bool,
) -> dict[Hashable, str]:
    """The candidates the two looks prove diverged, each with its kind (missing, extra, different).

    ``first`` and ``second``: the lake's rows of the candidates (by key identity) at the first and the
    second look, soft-deleted rows included (not live); ``held_first``: the candidates the source held at
    the first look; ``source_second``: the source rows' hashes at the second look.
    ``lake_keeps_deletes``: the lake keeps a deleted row (soft deletes), whose ordering value tells of a
    delete too.  The module docstring says why each rule is sound.
    """
    found: dict[Hashable, str] = {}
    for key in candidates:
        before, after = first.get(key), second.get(key)
        if (before is None) != (after is None):
            continue  # the lake wrote the key between the looks
        if before is not None and after is not None and before.ordering != after.ordering:
            continue
        source = source_second.get(key)
        live = after is not None and after.live
        if source is None:
            if live:
                found[key] = "extra"
        elif not live:
            if after is not None or lake_keeps_deletes or key in held_first:
                found[key] = "missing"
        elif after is not None and after.values != source:
            found[key] = "different"
    return found


class ValidationSteps(Protocol):
    """What a sample asks of the world: the tables to rotate over, their facts, and one slice's two looks
    (:class:`cdc_lake_bootstrap.continuous_looks.SparkLooks`; a test gives its own)."""

    def tables(self) -> list[str]:
        """The tables to rotate over, in a stable order."""

    def rows(self, table: str) -> int | None:
        """The table's estimated rows (a catalog statistic, for the budget), or None if unreadable."""

    def facts(self, table: str) -> TableFacts | None:
        """The table's facts, or None to pass it by this round (not LIVE, or its source unreachable)."""

    def check(self, piece: Slice) -> SliceResult:
        """Compare ``piece`` in two looks and act on what is confirmed."""


@dataclass
class SliceResult:
    """What one slice's comparison found and did."""

    table: str
    index: int
    count: int
    key_range: KeyRange
    candidates: int = 0
    confirmed: dict[str, int] = field(default_factory=dict)
    """Confirmed keys by kind (duplicates included: a key held twice is always the lake's fault)."""
    too_many: bool = False
    repaired: int = 0
    caught_up: bool = True
    seconds: float = 0.0
    error: str | None = None

    @property
    def differing(self) -> int:
        """Keys confirmed diverged."""
        return sum(self.confirmed.values())

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (a ``validate-sample`` run's detail)."""
        return {
            "slice": self.index,
            "slices": self.count,
            "key_range": [self.key_range.lo, self.key_range.hi],
            "candidates": self.candidates,
            "confirmed": dict(self.confirmed),
            "too_many": self.too_many,
            "repaired": self.repaired,
            "caught_up": self.caught_up,
            "seconds": round(self.seconds, 3),
            **({"error": self.error} if self.error else {}),
        }


class ContinuousValidation:
    """``run``'s validator thread: a sample every ``sample_seconds`` until stopped (module docstring)."""

    def __init__(
        self,
        config: Config,
        store: StateStore,
        steps: ValidationSteps,
        on_result: Callable[[SliceResult, float], None] = lambda result, progress: None,
    ) -> None:
        self.config = config
        self.store = store
        self.steps = steps
        self.on_result = on_result
        self.sample_seconds = config.validation.sample_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rotation: Rotation | None = None

    @property
    def description(self) -> str:
        """What it does, for ``run``'s start note."""
        settings = self.config.validation
        repair = "; repairing what it confirms" if settings.auto_repair else ""
        return (
            f"continuous validation: a sample every {settings.sample_seconds:g} s, every table in "
            f"{settings.cycle_hours:g} h{repair}"
        )

    def start(self) -> bool:
        """Start the thread; False (and no thread) when ``validation.continuous`` is off."""
        if not self.config.validation.continuous:
            return False
        self._thread = threading.Thread(target=self._loop, name="continuous-validation", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Ask the thread to stop after the slice under way, and wait for it at most
        :data:`STOP_WAIT_SECONDS` (a slice waiting for the lake to catch up is abandoned: it wrote nothing,
        and a repair cut short is finished by ``cdc-lake repair TABLE --resume``, as its FAILED state
        says)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_SECONDS)
            if self._thread.is_alive():
                _LOG.warning("continuous validation: the slice under way is abandoned at the stop")

    def _loop(self) -> None:
        while not self._stop.wait(self.sample_seconds):
            try:
                self.sample()
            except Exception as exc:  # the thread outlives any failure; the next sample tries again
                _LOG.warning("continuous validation: sample failed: %s", describe_failure(exc))

    def _rotation(self) -> Rotation:
        """The rotation, begun from the last recorded sample's state on first use and at each new cycle."""
        tables = self.steps.tables()
        if self.rotation is not None and list(self.rotation.tables) == tables:
            return self.rotation
        total = sum(self.steps.rows(name) or 0 for name in tables)
        cycle_seconds = self.config.validation.cycle_hours * 3600
        rotation = Rotation(tables, budget_rows(total, self.sample_seconds, cycle_seconds))
        for run in self.store.list_runs(limit=1, command=SAMPLE_RUN):
            if isinstance(run.detail.get("rotation"), dict):
                rotation.resume(run.detail["rotation"])
        self.rotation = rotation
        return rotation

    def sample(self) -> list[SliceResult]:
        """Compare the next slices of the rotation; each is recorded as a ``validate-sample`` run."""
        rotation = self._rotation()
        cycle = rotation.cycle
        results = []
        for piece in rotation.next_slices(self.steps.facts):
            if self._stop.is_set():
                break
            began = time.monotonic()
            try:
                result = self.steps.check(piece)
            except Exception as exc:  # a JVM error too: recorded, counted, and the next slice goes on
                error = describe_failure(exc)
                result = SliceResult(piece.table, piece.index, piece.count, piece.key_range, error=error)
                _LOG.warning("table %s: continuous validation of slice %d/%d failed: %s", piece.table,
                             piece.index + 1, piece.count, error)
            result.seconds = time.monotonic() - began
            outcome = RunOutcome.FAILED if result.error else RunOutcome.OK
            run_id = self.store.start_run(SAMPLE_RUN, piece.table, {})
            self.store.finish_run(run_id, outcome, {**result.to_json(), "rotation": rotation.state()})
            tier = self.store.require_table(piece.table).tier
            applier_metrics.record_validation(
                piece.table, tier, confirmed=result.differing, failed=outcome is RunOutcome.FAILED,
                progress=rotation.progress,
            )
            self.on_result(result, rotation.progress)
            results.append(result)
        if rotation.cycle != cycle:
            _LOG.info("continuous validation: cycle %d covered %d tables", cycle, len(rotation.tables))
            self.rotation = None  # the next sample re-reads the tables and their sizes
        return results


def live_tables(store: StateStore, names: Iterable[str]) -> list[str]:
    """Those of ``names`` that are LIVE now, sorted."""
    wanted = set(names)
    return sorted(t.qualified_name for t in store.list_tables() if t.qualified_name in wanted
                  and t.state is TableState.LIVE)
