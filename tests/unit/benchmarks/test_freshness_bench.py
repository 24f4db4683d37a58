"""The per-event freshness arithmetic of ``benchmarks/freshness_bench.py``: events mapped to the commit
that made them visible through the Kafka offsets each commit stores, the table's freshness at a moment,
the time from a kill back to fresh, the lag percentiles shared with ``apply_bench.py``, and the seconds per
batch step read from ``run``'s lines."""

from __future__ import annotations

import datetime as dt

import pytest
from apply_bench import lag_percentiles, per_interval
from freshness_bench import (
    Commit,
    Event,
    Written,
    batch_steps,
    completion_ms,
    event_lags,
    freshness_at,
    instant_ms,
    phase_figures,
    read_optimized_staleness,
    recovery_seconds,
    sample_runs,
)

from cdc_lake.state.records import Run, RunOutcome
from cdc_lake_bootstrap.continuous import SAMPLE_RUN


def test_completion_time_is_read_from_the_instant_file_name_as_utc() -> None:
    assert completion_ms("20261126221503123_20261126221504567.deltacommit") == 1_795_731_304_567


def test_each_event_is_visible_at_the_first_commit_whose_next_offset_passes_it() -> None:
    commits = [Commit(5_000, {0: 3, 1: 1}), Commit(2_000, {0: 1, 1: 0}), Commit(9_000, {0: 3, 1: 4})]
    events = [Event(0, 0, 100), Event(0, 1, 200), Event(0, 2, 300), Event(1, 0, 400), Event(1, 3, 500)]

    shown = [visible for _, visible in event_lags(events, commits)]

    assert shown == [2_000, 5_000, 5_000, 5_000, 9_000]


def test_an_event_no_commit_covers_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="partition 0 offset 3: no commit applied it"):
        event_lags([Event(0, 3, 1)], [Commit(1_000, {0: 3})])


def test_offsets_going_back_between_commits_are_an_error() -> None:
    with pytest.raises(ValueError, match="offsets went back from 5 to 4"):
        event_lags([], [Commit(1_000, {0: 5}), Commit(2_000, {0: 4})])


def test_freshness_is_the_age_of_the_oldest_event_committed_at_the_source_and_not_yet_visible() -> None:
    visible = [(Event(0, 0, 1_000), 4_000), (Event(0, 1, 2_000), 9_000), (Event(0, 2, 8_500), 9_000)]

    assert freshness_at(3_000, visible) == 2.0  # the first is pending
    assert freshness_at(5_000, visible) == 3.0  # the second is oldest pending; the third not yet written
    assert freshness_at(9_000, visible) == 0.0  # nothing pending


def test_recovery_is_the_first_commit_after_the_kill_that_brings_freshness_under_the_limit() -> None:
    # Events every second from 0 s; killed at 10 s; the first commit after it (40 s) applies up to 30 s
    # only, the next (45 s) up to 44 s.
    visible = []
    for second in range(50):
        shown = 9_000 if second < 9 else 40_000 if second < 31 else 45_000 if second < 45 else 50_000
        visible.append((Event(0, second, second * 1_000), shown))

    assert freshness_at(40_000, visible) == 9.0
    assert recovery_seconds(10_000, visible, limit=15) == 30.0
    assert recovery_seconds(10_000, visible, limit=5) == 35.0


def test_no_commit_after_the_kill_is_an_error() -> None:
    visible = [(Event(0, 0, 0), 1_000), (Event(0, 1, 1_000), 6_000)]
    with pytest.raises(ValueError, match="never fell under 15"):
        recovery_seconds(30_000, visible, limit=15)


def test_lag_percentiles_use_the_nearest_rank_below() -> None:
    figures = lag_percentiles([float(lag) for lag in range(100, 0, -1)])

    assert figures == {
        "events": 100,
        "min_seconds": 1.0,
        "p50_seconds": 50.5,
        "p95_seconds": 95.0,
        "p99_seconds": 99.0,
        "max_seconds": 100.0,
    }


def test_a_phase_counts_only_events_whose_source_commit_falls_in_its_window() -> None:
    visible = [(Event(0, n, n * 500), n * 500 + 2_000) for n in range(60)]

    figures = phase_figures(visible, 10_000, 20_000, rate=2)

    assert figures["events"] == 20
    assert figures["changes_per_second"] == 2.0
    assert figures["p99_seconds"] == figures["max_seconds"] == 2.0
    assert figures["timeline"] == per_interval([(n * 0.5, 2.0) for n in range(20, 40)], 10)


def _written(completed_ms: int, *groups: str) -> Written:
    stamp = dt.datetime.fromtimestamp(completed_ms / 1000, dt.UTC).strftime("%Y%m%d%H%M%S%f")[:17]
    return Written(stamp, completed_ms, frozenset(groups))


def _instant(ms: int) -> str:
    return _written(ms).completed


def test_read_optimized_staleness_peaks_before_each_compaction_and_at_the_end() -> None:
    # delta commits completed at 1 s .. 4 s, each with logs in file groups f1 and f2; a compaction of both
    # planned at 2.5 s (after the second) completes at 6 s: until then the oldest waiting delta is 1 s old.
    deltas = {_instant(n * 1_000 - 500): _written(n * 1_000, "f1", "f2") for n in range(1, 5)}
    compactions = {_instant(2_500): _written(6_000, "f1", "f2")}
    # just before 6 s: 4.999 s since the first delta; at the end (10 s) deltas 3 and 4 wait since 3 s
    assert read_optimized_staleness(deltas, compactions, 0, 10_000) == 7.0
    assert read_optimized_staleness(deltas, compactions, 0, 5_000) == 4.0
    assert read_optimized_staleness({}, {}, 0, 10_000) is None
    one = {_instant(500): _written(1_000, "f1")}
    assert read_optimized_staleness(one, {_instant(1_500): _written(2_000, "f1")}, 0, 9_000) == 1.0


def test_read_optimized_staleness_counts_the_file_groups_a_plan_left_out() -> None:
    # A plan bounded to one file group (f1) merges none of f2's logs: the delta commit at 1 s waits on.
    deltas = {_instant(500): _written(1_000, "f1", "f2")}
    bounded = {_instant(1_500): _written(2_000, "f1")}
    assert read_optimized_staleness(deltas, bounded, 0, 9_000) == 8.0
    # a second plan over f2 merges the rest; a delta commit completed after a plan is not its to merge
    both = {**bounded, _instant(3_500): _written(4_000, "f2")}
    assert read_optimized_staleness(deltas, both, 0, 9_000) == 3.0
    late = {_instant(500): _written(2_500, "f1")}
    assert read_optimized_staleness(late, {_instant(1_500): _written(2_000, "f1")}, 0, 9_000) == 6.5
    # a delta commit without log files (a bulk insert's base files) leaves a read-optimized reader nothing
    assert read_optimized_staleness({_instant(500): _written(1_000)}, {}, 0, 9_000) == 0.0



def test_the_samples_run_took_are_listed_oldest_first_with_a_failed_ones_error() -> None:
    judged = dt.datetime(2026, 12, 6, 4, 40, 6, tzinfo=dt.UTC)
    failure = "SparkFileNotFoundException: File f.parquet does not exist"
    runs = [
        Run(7, SAMPLE_RUN, "pg.public.items", judged + dt.timedelta(seconds=300), judged, RunOutcome.OK,
            {"seconds": 31.25, "candidates": 4}),
        Run(3, SAMPLE_RUN, "pg.public.items", judged, judged, RunOutcome.FAILED,
            {"seconds": 26.4, "candidates": 0, "error": failure}),
        Run(5, SAMPLE_RUN, "pg.public.items", judged, None, None, {}),
    ]
    assert sample_runs(runs) == [
        {"ended_utc": "04:40:06", "seconds": 26.4, "candidates": 0, "outcome": "failed", "error": failure},
        {"ended_utc": "04:40:06", "seconds": None, "candidates": None, "outcome": None, "error": None},
        {"ended_utc": "04:45:06", "seconds": 31.25, "candidates": 4, "outcome": "ok", "error": None},
    ]


def test_batch_steps_are_averaged_per_minute_of_the_phase_from_runs_lines() -> None:
    start = instant_ms("20261206110000000")
    lines = [
        "t: 1 changes from 1 messages in 1 commits (last 20261206105959000), lag 0, 3.0 s: write 3.0",
        "t: 900 changes from 990 messages in 1 commits (last 20261206110001000), lag 0, 6.0 s: decode 1.0, "
        "write 5.0",
        "t: 800 changes from 880 messages in 1 commits (last 20261206110031000), lag 0, 4.0 s: decode 0.5, "
        "frame 0.5, write 3.0",
        "2026-12-06 11:00:40,000 WARNING py4j something else",
        "t: up to date",
        "t: 700 changes from 770 messages in 1 commits (last 20261206110101000), lag 3, 2.0 s",
        "t: 1 changes from 1 messages in 1 commits (last 20261206110200000), lag 0, 9.0 s: write 9.0",
    ]
    figures = batch_steps(lines, start, start + 120_000)
    assert figures == [
        {"from_seconds": 0, "commits": 2, "batch_seconds": 5.0,
         "steps": {"decode": 0.75, "write": 4.0, "frame": 0.25}},
        {"from_seconds": 60, "commits": 1, "batch_seconds": 2.0, "steps": {}},
    ]
