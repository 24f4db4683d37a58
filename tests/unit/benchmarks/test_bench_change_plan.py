"""The benchmarks' change mix (``benchmarks/change_plan.py``): the growth batch must touch the whole key
range of every table size with the same shape, or the index-growth curve measures the lowest keys only
(the batch of the first curve never went above key 1,005,000 at 5M rows)."""

from __future__ import annotations

from collections import Counter

from change_plan import DELETE, INSERT, UPDATE, change_plan, last_per_key

CHANGES = 50_000


def test_updates_and_deletes_spread_over_the_whole_key_range_of_each_size() -> None:
    for size in (1_000_000, 5_000_000):
        keys = [c.key for c in change_plan(size, CHANGES, 24) if c.op != INSERT]
        tenths = Counter(key * 10 // size for key in keys)
        assert sorted(tenths) == list(range(10))
        for count in tenths.values():
            assert abs(count / len(keys) - 0.1) < 0.01, (size, tenths)
        assert max(keys) > 0.99 * size


def test_the_mix_is_80_10_10_with_inserts_above_the_largest_key() -> None:
    plan = list(change_plan(2_500_000, CHANGES, 24))
    kinds = Counter(c.op for c in plan)
    assert abs(kinds[UPDATE] / CHANGES - 0.8) < 0.01
    assert abs(kinds[INSERT] / CHANGES - 0.1) < 0.01
    assert abs(kinds[DELETE] / CHANGES - 0.1) < 0.01
    inserted = [c.key for c in plan if c.op == INSERT]
    assert inserted == list(range(2_500_000, 2_500_000 + len(inserted)))
    assert [c.seq for c in plan] == list(range(CHANGES))


def test_a_deleted_key_is_never_drawn_again() -> None:
    deleted: set[int] = set()
    for change in change_plan(1_000, 5_000, 3):
        assert change.key not in deleted
        if change.op == DELETE:
            deleted.add(change.key)


def test_the_plan_is_fixed_by_its_seed() -> None:
    first = list(change_plan(1_000_000, 1_000, 24))
    assert first == list(change_plan(1_000_000, 1_000, 24))
    assert first != list(change_plan(1_000_000, 1_000, 25))


def test_last_per_key_keeps_the_last_change_of_each_key() -> None:
    plan = list(change_plan(1_000, 5_000, 7))
    latest = last_per_key(iter(plan))
    assert [c.key for c in latest] == sorted({c.key for c in plan})
    for change in latest:
        assert change.seq == max(c.seq for c in plan if c.key == change.key)
