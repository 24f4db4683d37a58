"""How ``validate`` judges one level from each key range's counts and checksums on the driver.

Issue 36 item 7: a level's ranges were judged in Spark (two aggregates, a full outer join kept in
memory, then two more jobs); a level of at most 4,096 ranges (the first level has at most ``--buckets``)
now comes to the driver in one job, and :func:`level_of` decides it as the join did: a side without a
row in a range has NULL count and sum there, and a range differs unless both are equal.
"""

from __future__ import annotations

from decimal import Decimal

from cdc_lake_bootstrap.validate import _MAX_DIFFERING_RANGES, level_of


def test_equal_ranges_differ_nowhere() -> None:
    level = level_of([(0, 3, Decimal(7), 3, Decimal(7)), (1, 2, Decimal(-5), 2, Decimal(-5))])
    assert (level.source_rows, level.lake_rows, level.ranges) == (5, 5, 2)
    assert (level.differing_count, level.differing_rows, level.differing) == (0, 0, [])


def test_a_range_on_one_side_only_or_with_another_count_or_sum_differs() -> None:
    level = level_of(
        [
            (4, 3, Decimal(7), 3, Decimal(8)),  # a changed row: same count, another sum
            (2, None, None, 2, Decimal(1)),  # rows only in the lake
            (0, 5, Decimal(9), None, None),  # rows only in the source
            (3, 1, Decimal(1), 2, Decimal(1)),  # a row twice in the lake, summing to the same
            (1, 6, Decimal(0), 6, Decimal(0)),
        ]
    )
    assert (level.source_rows, level.lake_rows, level.ranges) == (15, 13, 5)
    # The rows of a differing range: the larger side's.
    assert (level.differing_count, level.differing_rows, level.differing) == (4, 3 + 2 + 5 + 2, [0, 2, 3, 4])


def test_too_many_differing_ranges_are_counted_not_listed() -> None:
    ranges = [(n, 1, Decimal(n), 1, Decimal(n + 1)) for n in range(_MAX_DIFFERING_RANGES + 1)]
    level = level_of(ranges)
    assert (level.differing_count, level.differing) == (_MAX_DIFFERING_RANGES + 1, [])
