"""Partition planning: counts from size and executors, quantile cuts, and predicates covering every key once.

The coverage tests run the generated predicates in SQLite over random keys (single and composite, with
and without row comparisons): every row must match exactly one partition.
"""

from __future__ import annotations

import random
import sqlite3

import pytest

from cdc_lake_bootstrap.partitions import (
    WHOLE_TABLE,
    PlanInputs,
    boundaries,
    partition_count,
    plan_partitions,
    range_predicates,
    sample_size,
)


def test_small_tables_are_one_partition() -> None:
    assert partition_count(10_000, 10**9, executors=8, max_partitions=64) == 1


def test_count_follows_rows_bytes_and_executors_and_is_capped() -> None:
    assert partition_count(1_000_000, 0, executors=2, max_partitions=64) == 4
    assert partition_count(200_000, 0, executors=8, max_partitions=64) == 8
    assert partition_count(200_000, 10 * 256 * 2**20, executors=2, max_partitions=64) == 10
    assert partition_count(10**9, 0, executors=2, max_partitions=64) == 64


def test_sample_size_is_bounded_by_the_table() -> None:
    assert sample_size(10, 1_000_000) == 10_000
    assert sample_size(64, 10**9) == 12_800
    assert sample_size(4, 3_000) == 3_000


def test_boundaries_follow_the_data_not_the_range() -> None:
    # 90% of the keys are below 1000, the rest spread to a million: strides would put nearly
    # everything in the first partition.
    keys = sorted([*range(1, 901), *range(1000, 1_000_000, 10_000)])
    cuts = boundaries([(str(k),) for k in keys], 4)

    assert [int(c[0]) for c in cuts] == [keys[250], keys[500], keys[750]]
    assert all(int(c[0]) < 1000 for c in cuts)


def test_boundaries_skip_duplicates_and_the_smallest_key() -> None:
    sample = [("1",), ("1",), ("1",), ("2",), ("2",), ("3",)]

    assert boundaries(sample, 6) == [("2",), ("3",)]
    assert boundaries([], 4) == []
    assert boundaries(sample, 1) == []


def test_one_partition_reads_the_whole_table() -> None:
    assert range_predicates(['"id"'], [], row_comparisons=True) == [WHOLE_TABLE]


def test_predicates_are_half_open_ranges() -> None:
    predicates = range_predicates(['"id"'], [("10",), ("20",)], row_comparisons=True)

    assert predicates == ['"id" < 10', '"id" >= 10 AND "id" < 20', '"id" >= 20']


def test_composite_keys_compare_as_rows_or_spelled_out() -> None:
    rows = range_predicates(["a", "b"], [("1", "'x'")], row_comparisons=True)
    spelled = range_predicates(["a", "b"], [("1", "'x'")], row_comparisons=False)

    assert rows == ["(a, b) < (1, 'x')", "(a, b) >= (1, 'x')"]
    assert spelled == ["(a < 1 OR (a = 1 AND b < 'x'))", "(a > 1 OR (a = 1 AND b >= 'x'))"]


def _literal(value: int | str) -> str:
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"


def _key(rng: random.Random, width: int) -> tuple[int | str, ...]:
    """Leading integer columns with few values (many ties), then a text column with quotes."""
    text = rng.choice(["a", "b'c", "zz", "m"]) + str(rng.randint(0, 999))
    return (*(rng.randint(0, 5) for _ in range(width - 1)), text)


@pytest.mark.parametrize("row_comparisons", [True, False])
@pytest.mark.parametrize("width", [1, 2, 3])
def test_every_row_is_in_exactly_one_partition(width: int, row_comparisons: bool) -> None:
    rng = random.Random(width * 10 + row_comparisons)
    columns = ["k0", "k1", "k2"][:width]
    keys = {_key(rng, width) for _ in range(3000)}
    # Python orders these ints and strings as SQLite does (BINARY collation).
    sample = [tuple(_literal(v) for v in key) for key in sorted(rng.sample(sorted(keys), 300))]
    plan = plan_partitions(PlanInputs(tuple(columns), sample, 7, row_comparisons))
    db = sqlite3.connect(":memory:")
    db.execute(f"create table t ({', '.join(columns)}, primary key ({', '.join(columns)}))")
    db.executemany(f"insert into t values ({', '.join('?' * width)})", sorted(keys))

    counts = {key: 0 for key in keys}
    for partition in plan:
        for row in db.execute(f"select {', '.join(columns)} from t where {partition.predicate}"):
            counts[tuple(row)] += 1

    assert len(plan) > 3
    assert set(counts.values()) == {1}
    assert [p.index for p in plan] == list(range(len(plan)))
    assert not any(p.done for p in plan)
