"""Planning a bootstrap's partitions: key ranges cut at quantiles of a key sample taken on the replica.

Every partition is a WHERE predicate over the record key, and consecutive partitions meet at one
boundary value: ``key < b1``, ``b1 <= key < b2``, ..., ``key >= bn``.  Since a key value compares with
each boundary one way only, every row is in exactly one partition, however the table changes between
the reads (a row whose key changes is a delete of the old key and an insert of the new one, both
replayed from the watermark).  Boundaries are real key values from the sample, written as SQL literals
of the source engine and compared by the source itself, so numeric, date, text, uuid and composite
keys are all split the same way and by the same collation as the sample was sorted.  Quantiles follow
the data: a skewed key gets narrow ranges where it is dense, unlike equal-width strides.

Composite keys compare as rows: ``(a, b) >= (x, y)`` where the engine's optimizer uses the index for
it (Postgres), otherwise spelled out as ``a > x OR (a = x AND b >= y)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cdc_lake.state.records import BootstrapPartition

ROWS_PER_PARTITION = 250_000
"""A partition holds about this many rows (more partitions: finer resume and shorter replica
transactions, but each costs a query, a task and a file)."""
BYTES_PER_PARTITION = 256 * 2**20
"""...and about this many bytes of table data, for wide rows."""
SINGLE_PARTITION_ROWS = 50_000
"""Tables this small are read in one partition."""
SAMPLE_ROWS_PER_PARTITION = 200
MIN_SAMPLE_ROWS = 10_000

WHOLE_TABLE = "1 = 1"
"""The predicate of a plan with a single partition."""


def partition_count(estimated_rows: int, estimated_bytes: int, executors: int, max_partitions: int) -> int:
    """How many partitions to read a table in: by its size, at least one per executor slot, capped."""
    if estimated_rows <= SINGLE_PARTITION_ROWS:
        return 1
    by_size = max(
        math.ceil(estimated_rows / ROWS_PER_PARTITION), math.ceil(estimated_bytes / BYTES_PER_PARTITION)
    )
    return max(1, min(max_partitions, max(by_size, executors)))


def sample_size(partitions: int, estimated_rows: int) -> int:
    """How many keys to sample to place the boundaries of ``partitions`` partitions."""
    return min(max(estimated_rows, 1), max(MIN_SAMPLE_ROWS, partitions * SAMPLE_ROWS_PER_PARTITION))


def boundaries(sample: Sequence[tuple[str, ...]], partitions: int) -> list[tuple[str, ...]]:
    """The ``partitions - 1`` quantile cut points of a key sample sorted by key (fewer if it is small)."""
    if partitions <= 1 or not sample:
        return []
    cuts: list[tuple[str, ...]] = []
    for i in range(1, partitions):
        point = sample[min(len(sample) - 1, round(i * len(sample) / partitions))]
        if not cuts or point != cuts[-1]:
            cuts.append(point)
    # The smallest sampled key as a boundary would leave an (almost) empty first partition.
    if cuts and cuts[0] == sample[0]:
        cuts = cuts[1:]
    return cuts


def _compare(columns: Sequence[str], values: Sequence[str], last: str, row_comparisons: bool) -> str:
    """``columns`` compared with ``values`` lexicographically; ``last`` is the operator on the last column."""
    if len(columns) == 1:
        return f"{columns[0]} {last} {values[0]}"
    if row_comparisons:
        return f"({', '.join(columns)}) {last} ({', '.join(values)})"
    strict = "<" if last.startswith("<") else ">"
    rest = _compare(columns[1:], values[1:], last, row_comparisons)
    return f"({columns[0]} {strict} {values[0]} OR ({columns[0]} = {values[0]} AND {rest}))"


def range_predicates(
    key_columns: Sequence[str], cuts: Sequence[tuple[str, ...]], row_comparisons: bool
) -> list[str]:
    """One predicate per range between consecutive ``cuts`` (quoted key columns, SQL literal cuts)."""
    if not cuts:
        return [WHOLE_TABLE]
    below = [_compare(key_columns, cut, "<", row_comparisons) for cut in cuts]
    at_or_above = [_compare(key_columns, cut, ">=", row_comparisons) for cut in cuts]
    middle = [f"{at_or_above[i]} AND {below[i + 1]}" for i in range(len(cuts) - 1)]
    return [below[0], *middle, at_or_above[-1]]


@dataclass(frozen=True)
class PlanInputs:
    """What a plan is made from: the key, its sample, and the table's size."""

    key_columns: tuple[str, ...]
    sample: list[tuple[str, ...]]
    partitions: int
    row_comparisons: bool


def plan_partitions(inputs: PlanInputs) -> list[BootstrapPartition]:
    """The partition plan: predicates numbered from 0, none done."""
    cuts = boundaries(inputs.sample, inputs.partitions)
    predicates = range_predicates(inputs.key_columns, cuts, inputs.row_comparisons)
    return [BootstrapPartition(index=i, predicate=p) for i, p in enumerate(predicates)]
