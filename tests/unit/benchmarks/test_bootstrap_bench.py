"""When ``benchmarks/bootstrap_bench.py`` stops the ``run`` service of its overlapped Debezium arm: once the
snapshot's events are all applied (the last row is in the lake), or at the first failed batch."""

from __future__ import annotations

from bootstrap_bench import UntilApplied

from cdc_lake.apply.runner import TableOutcome


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class _Stops:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def test_the_service_runs_on_until_every_snapshot_event_is_applied() -> None:
    stops = _Stops()
    progress = UntilApplied(1_000, stops, _Clock())
    for offsets in (400, 0, 599):
        progress(TableOutcome("s.public.items", offsets=offsets))
    assert (stops.calls, progress.applied) == (0, 999)
    progress(TableOutcome("s.public.items", offsets=1))
    assert (stops.calls, progress.applied, progress.error) == (1, 1_000, None)
    assert progress.batches == [(400, 1.0), (599, 2.0), (1, 3.0)]


def test_a_failed_batch_stops_the_service_with_its_error() -> None:
    stops = _Stops()
    progress = UntilApplied(1_000, stops, _Clock())
    progress(TableOutcome("s.public.items", offsets=10))
    progress(TableOutcome("s.public.items", error="decode failed"))
    assert (stops.calls, progress.applied, progress.error) == (1, 10, "decode failed")
