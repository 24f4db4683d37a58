"""A Hudi partition folder as the catalogs register it: Hive-style ``field=value`` parts, each value
unescaped (cdc-lake writes with ``hive_style_partitioning`` and ``partitionpath.urlencode``), a null value
kept as Hive's own ``__HIVE_DEFAULT_PARTITION__`` (what Hive, Glue and Trino read as null)."""

from __future__ import annotations

import pytest

from cdc_lake.hudi.timeline import partition_of
from cdc_lake.lake.format import NULL_PARTITION_VALUE, Partition


@pytest.mark.parametrize(
    ("path", "values"),
    [
        ("region=eu", ("eu",)),
        ("region=us%2Fwest", ("us/west",)),  # the folder escapes what a path cannot hold
        ("region=us west", ("us west",)),  # and keeps what it can
        ("region=a%3Db%25", ("a=b%",)),
        ("region=eu/day=2024-01-01", ("eu", "2024-01-01")),
        (f"region={NULL_PARTITION_VALUE}/n=1", (NULL_PARTITION_VALUE, "1")),
    ],
)
def test_a_partition_folder_gives_its_values_unescaped(path: str, values: tuple[str, ...]) -> None:
    assert partition_of(path) == Partition(path, values)
