"""A bucket-index table's bucket count: sized by a bootstrap for its rows, then kept by every writer.

Hudi keeps no bucket count with a table (apache/hudi#13241): a write with another count hashes a key to
another bucket and the table gains a second row for it.  The count is recorded in every commit's layout
(``lake.layout``) and read back by the applier, the bootstrap's resumed copy and the table services."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc_lake.lake.layout import (
    DEFAULT_BUCKETS,
    MAX_BUCKETS,
    IndexType,
    TableLayout,
    TableSpec,
    TableType,
    kept_layout,
    sized_for_rows,
)

BUCKETED = TableSpec("t", "/lake/t", ("id",), table_type=TableType.MERGE_ON_READ, index=IndexType.BUCKET)


@pytest.mark.parametrize(
    ("rows", "buckets"),
    [(0, 4), (1_000, 4), (1_000_000, 4), (1_000_001, 5), (5_000_000, 20), (10_000_000, 40), (10**12, 1024)],
)
def test_a_bootstrap_sizes_a_bucket_table_for_its_rows(rows: int, buckets: int) -> None:
    assert sized_for_rows(BUCKETED, rows, 250_000).buckets == buckets


@given(rows=st.integers(min_value=0, max_value=10**13), per=st.integers(min_value=1, max_value=10**7))
def test_a_sized_count_holds_every_row_within_the_bounds(rows: int, per: int) -> None:
    buckets = sized_for_rows(BUCKETED, rows, per).buckets
    assert DEFAULT_BUCKETS <= buckets <= MAX_BUCKETS
    assert buckets == MAX_BUCKETS or buckets * per >= rows


def test_only_the_bucket_index_is_sized_or_records_a_count() -> None:
    global_bloom = TableSpec("t", "/lake/t", ("id",))
    assert sized_for_rows(global_bloom, 10_000_000, 250_000) == global_bloom
    assert global_bloom.layout == TableLayout(TableType.COPY_ON_WRITE, IndexType.GLOBAL_BLOOM, None)
    assert BUCKETED.layout == TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET, DEFAULT_BUCKETS)


def test_a_table_is_written_in_the_count_it_records_whatever_the_config_sizes() -> None:
    recorded = TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET, 40)
    assert kept_layout(BUCKETED, recorded).buckets == 40
    assert kept_layout(sized_for_rows(BUCKETED, 100, 1), recorded).buckets == 40
    # Recorded before the count was (2026-12-05): every such table was written with the default.
    earlier = TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET)
    assert kept_layout(sized_for_rows(BUCKETED, 10**9, 1), earlier).buckets == DEFAULT_BUCKETS
    assert kept_layout(BUCKETED, None) == BUCKETED


def test_a_count_is_no_change_of_layout_kind() -> None:
    """The applier warns when a table keeps another table type or index than the config's; a count
    sized per table is no such change."""
    sized = TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET, 40)
    assert sized.same_kind(BUCKETED.layout)
    assert not sized.same_kind(TableLayout(TableType.COPY_ON_WRITE, IndexType.BUCKET, 40))
    assert str(sized) == "MERGE_ON_READ + BUCKET (40 buckets)"
