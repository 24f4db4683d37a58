"""Continuous validation's rules, against models (issue 38 item 3): slices, the rotation, the two looks.

* Slices: every integer key falls in exactly one slice of a table, whatever the bounds and the count.
* The rotation: a cycle hands out every slice of every table exactly once, in samples of about the budget,
  and a rotation resumed from a recorded state goes on where the recorded one stopped.
* The two looks, against a model of one table: the source commits changes in order; the lake applies them
  in order under event-time ordering, except that it may lose some and a stray writer may edit it behind
  the pipeline's back; the looks happen at random points.  Invariant: a key the looks confirm is diverged
  (the lake's row differs from the source's at the point the lake had applied at the second look, or the
  lake lost a change of it or was edited behind the pipeline, which a later change may hide), except
  the one documented case, a key of a hard-delete table deleted right after the second look's source
  read; and a diverged key nothing touched between the first look and the second is confirmed.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from cdc_lake.applier_metrics import CONFIRMED_KEYS, table_labels
from cdc_lake.config import Config
from cdc_lake.state.records import RunOutcome
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.continuous import (
    SAMPLE_RUN,
    ContinuousValidation,
    LakeLook,
    Rotation,
    Slice,
    SliceResult,
    TableFacts,
    budget_rows,
    confirmed_keys,
    slice_ranges,
)


@given(
    lo=st.integers(-(2**40), 2**40),
    span=st.integers(0, 10_000),
    count=st.integers(1, 60),
    probes=st.lists(st.integers(-20_000, 20_000), max_size=40),
)
def test_every_key_is_in_exactly_one_slice(lo: int, span: int, count: int, probes: list[int]) -> None:
    ranges = slice_ranges(count, (lo, lo + span))
    assert 1 <= len(ranges) <= count
    assert ranges[0].lo is None and ranges[-1].hi is None
    for probe in [lo - 1, lo, lo + span, lo + span + 1, *(lo + p for p in probes)]:
        holding = [r for r in ranges if (r.lo is None or probe >= r.lo) and (r.hi is None or probe < r.hi)]
        assert len(holding) == 1, (probe, ranges)


def test_a_table_without_bounds_is_one_open_slice() -> None:
    [whole] = slice_ranges(8, None)
    assert (whole.lo, whole.hi) == (None, None)
    assert whole.sql('"id"') == "1 = 1"


def test_the_budget_covers_the_rows_in_a_cycle_and_has_a_floor() -> None:
    assert budget_rows(10_000_000, 300, 86_400) == 34_723  # 288 samples a day
    assert budget_rows(10_000_000, 300, 86_400) * 288 >= 10_000_000
    assert budget_rows(1_000_000, 300, 86_400) == 10_000  # at least MIN_BUDGET_ROWS


TABLES = st.dictionaries(
    st.sampled_from([f"s.public.t{i}" for i in range(8)]),
    st.tuples(st.integers(0, 200_000), st.booleans()),
    min_size=1,
)


@given(tables=TABLES, budget=st.integers(1_000, 50_000), cut=st.integers(0, 40))
@settings(max_examples=60)
def test_a_cycle_hands_out_every_slice_once_and_resumes_where_it_stopped(
    tables: dict[str, tuple[int, bool]], budget: int, cut: int
) -> None:
    names = sorted(tables)

    def facts(name: str) -> TableFacts:
        rows, integral = tables[name]
        return TableFacts(rows, (1, rows) if integral and rows else None)

    rotation = Rotation(names, budget)
    seen: list[tuple[str, int, int]] = []
    samples = 0
    while rotation.cycle == 0:
        if samples == cut:  # a restart: a new rotation from the recorded state
            saved = rotation.state()
            rotation = Rotation(names, budget)
            rotation.resume(saved)
        pieces = rotation.next_slices(facts)
        assert pieces, "a sample takes at least one slice"
        assert sum(p.rows for p in pieces[:-1]) < budget, "a sample stops once its budget is spent"
        first_rows, first_integral = tables[pieces[0].table]
        if first_integral and first_rows >= budget:
            # Every slice of a table of at least the budget holds the budget: one spends the sample
            # (a share just below it took a second slice of the same table: twice the lake reads).
            assert len(pieces) == 1, pieces
        seen += [(p.table, p.index, p.count) for p in pieces]
        samples += 1
        assert 0.0 <= rotation.progress <= 1.0
    expected = []
    for name in names:
        rows, integral = tables[name]
        count = len(slice_ranges(max(1, rows // budget), (1, rows))) if integral and rows else 1
        expected += [(name, i, count) for i in range(count)]
    assert sorted(set(seen)) == sorted(expected)
    assert len(seen) == len(expected), "no slice twice in a cycle"


# The two looks against a model of one table.

KEYS = range(6)


@dataclass(frozen=True)
class Change:
    key: int
    value: int | None  # None: a delete


@dataclass(frozen=True)
class Stray:
    """A writer other than the pipeline: sets the lake's row of ``key`` (None removes it), keeping its
    ordering value (a new row gets ordering 0)."""

    key: int
    value: int | None


Row = tuple[int, bool, int | None]  # ordering, live, value


def _apply(lake: dict[int, Row], position: int, change: Change, soft: bool) -> None:
    held = lake.get(change.key)
    if held is not None and held[0] >= position:
        return  # event-time ordering: the lake's row is newer
    if change.value is None and not soft:
        lake.pop(change.key, None)
    else:
        lake[change.key] = (position, change.value is not None, change.value)


def _source_at(changes: list[Change], position: int) -> dict[int, int]:
    state: dict[int, int] = {}
    for change in changes[:position]:
        if change.value is None:
            state.pop(change.key, None)
        else:
            state[change.key] = change.value
    return state


@st.composite
def histories(draw: st.DrawFn) -> dict[str, Any]:
    changes = draw(st.lists(st.builds(Change, st.sampled_from(KEYS), st.none() | st.integers(0, 3)),
                            min_size=1, max_size=30))
    n = len(changes)
    # Points are positions in the change list: "at p" means changes[:p] are committed.
    s1 = draw(st.integers(0, n))
    a1 = draw(st.integers(0, n))
    s2 = draw(st.integers(max(s1, a1), n))
    a2 = draw(st.integers(s2, n))
    lost = draw(st.sets(st.integers(0, n - 1), max_size=3))
    strays = draw(st.lists(st.tuples(st.integers(0, n), st.builds(Stray, st.sampled_from(KEYS),
                                                                   st.none() | st.integers(0, 3))),
                           max_size=3))
    soft = draw(st.booleans())
    return {"changes": changes, "s1": s1, "a1": a1, "s2": s2, "a2": a2, "lost": lost, "strays": strays,
            "soft": soft}


def _lake_at(h: dict[str, Any], point: int) -> dict[int, Row]:
    """The lake once it applied changes[:point] (but the lost ones), with the strays made by then."""
    lake: dict[int, Row] = {}
    for position in range(point + 1):
        for at, stray in h["strays"]:
            if at == position:
                held = lake.get(stray.key)
                if stray.value is None:
                    lake.pop(stray.key, None)
                else:
                    lake[stray.key] = (held[0] if held else 0, True, stray.value)
        if position < point and position not in h["lost"]:
            _apply(lake, position + 1, h["changes"][position], h["soft"])
    return lake


def _looks(lake: dict[int, Row]) -> dict[Hashable, LakeLook]:
    return {k: LakeLook(str(o).zfill(4), live, v) for k, (o, live, v) in lake.items()}


@given(h=histories())
@settings(max_examples=400)
def test_a_confirmed_key_is_diverged_and_an_untouched_diverged_key_is_confirmed(h: dict[str, Any]) -> None:
    changes: list[Change] = h["changes"]
    first = _looks(_lake_at(h, h["a1"]))
    lake2 = _lake_at(h, h["a2"])
    source1, source2 = _source_at(changes, h["s1"]), _source_at(changes, h["s2"])
    truth = _source_at(changes, h["a2"])
    second: dict[Hashable, int] = dict(source2.items())
    found = {
        int(str(k)): kind
        for k, kind in confirmed_keys(KEYS, first, _looks(lake2), set(source1), second, h["soft"]).items()
    }

    def lake_value(key: int) -> int | None:
        row = lake2.get(key)
        return row[2] if row is not None and row[1] else None

    def wronged(key: int) -> bool:
        """The pipeline lost a change of ``key`` or a stray writer edited it, by the second look."""
        return any(changes[i].key == key for i in h["lost"] if i < h["a2"]) or any(
            stray.key == key and at <= h["a2"] for at, stray in h["strays"]
        )

    for key, kind in found.items():
        if lake_value(key) != truth.get(key) or wronged(key):
            continue
        # The documented exception: a hard-delete table's key deleted after the second look's source read.
        assert kind == "missing" and not h["soft"], (key, kind, h)
        assert any(c.key == key and c.value is None for c in changes[h["s2"]:h["a2"]]), (key, h)
    for key in KEYS:
        touched = any(c.key == key for c in changes[min(h["a1"], h["s1"]):h["a2"]]) or any(
            stray.key == key and min(h["a1"], h["s1"]) < at <= h["a2"] for at, stray in h["strays"]
        )
        if not touched and lake_value(key) != truth.get(key):
            assert key in found, (key, h)


class _Steps:
    """Two tables, one sliced in 3; every check finds nothing except on the second slice."""

    def __init__(self) -> None:
        self.checked: list[tuple[str, int]] = []

    def tables(self) -> list[str]:
        return ["s.public.a", "s.public.b"]

    def rows(self, table: str) -> int | None:
        return 30_000 if table == "s.public.a" else 0

    def facts(self, table: str) -> TableFacts | None:
        return TableFacts(30_000, (1, 30_000)) if table == "s.public.a" else TableFacts(0, None)

    def check(self, piece: Slice) -> SliceResult:
        self.checked.append((piece.table, piece.index))
        confirmed = {"different": 1} if (piece.table, piece.index) == ("s.public.a", 1) else {}
        return SliceResult(piece.table, piece.index, piece.count, piece.key_range, confirmed=confirmed)


def _onboard(store: StateStore, steps: _Steps, tmp_path: Any) -> None:
    store.upsert_source("s", "postgres", [])
    for name in steps.tables():
        store.upsert_table(name, "s", 0, str(tmp_path / name))


def test_samples_are_recorded_and_a_new_validator_goes_on_from_the_last(tmp_path: Any) -> None:
    config = Config.model_validate({"validation": {"sample_seconds": 300, "cycle_hours": 0.25}})
    steps = _Steps()
    with StateStore.open(f"sqlite:///{tmp_path}/state.db") as store:
        _onboard(store, steps, tmp_path)
        validator = ContinuousValidation(config, store, steps)
        first = validator.sample()  # budget 30,000 rows / 3 samples: one slice of a
        second = ContinuousValidation(config, store, steps).sample()
        runs = [r for r in store.list_runs() if r.command == SAMPLE_RUN]
    assert [(r.table, r.index) for r in first + second] == [("s.public.a", 0), ("s.public.a", 1)]
    assert second[0].differing == 1
    assert [r.outcome for r in runs] == [RunOutcome.OK, RunOutcome.OK]
    assert runs[0].detail["confirmed"] == {"different": 1} and runs[0].detail["key_range"] == [10001, 20001]
    assert CONFIRMED_KEYS.labels(**table_labels("s.public.a", 0))._value.get() >= 1


class _Failing(_Steps):
    """The first slice's check fails as Spark does (not a cdc-lake error)."""

    def check(self, piece: Slice) -> SliceResult:
        if piece.index == 0:
            raise RuntimeError("Py4JJavaError: executor lost")
        return super().check(piece)


def test_a_failed_slice_is_recorded_and_the_next_goes_on(tmp_path: Any) -> None:
    config = Config.model_validate({"validation": {"sample_seconds": 300, "cycle_hours": 0.25}})
    steps = _Failing()
    with StateStore.open(f"sqlite:///{tmp_path}/state.db") as store:
        _onboard(store, steps, tmp_path)
        validator = ContinuousValidation(config, store, steps)
        results = validator.sample() + validator.sample()  # a slice a sample
        runs = store.list_runs(command=SAMPLE_RUN)
    assert [(r.table, r.index, r.error is None) for r in results] == [
        ("s.public.a", 0, False), ("s.public.a", 1, True)
    ]
    assert "RuntimeError: Py4JJavaError: executor lost" in (results[0].error or "")
    assert [r.outcome for r in runs] == [RunOutcome.OK, RunOutcome.FAILED]


def test_a_table_whose_facts_cannot_be_read_is_passed_by_for_the_round() -> None:
    rotation = Rotation(["s.public.a", "s.public.b", "s.public.c"], 10_000)

    def facts(name: str) -> TableFacts | None:
        return None if name == "s.public.b" else TableFacts(100, (1, 100))

    seen = []
    while rotation.cycle == 0:
        seen += [p.table for p in rotation.next_slices(facts)]
    assert seen == ["s.public.a", "s.public.c"]
