"""The commit metadata record: the exact strings every existing lake table stores, and reading them back."""

from __future__ import annotations

import json

import pytest

from cdc_lake.lake.commit_metadata import CommitMetadata, MalformedCommitMetadata
from cdc_lake.lake.layout import IndexType, TableLayout, TableType

APPLY_COMMIT = {
    "kafka.topic": "pg.public.t",
    "kafka.offsets": '{"0": 17, "1": 4}',
    "source.newest_ts_ms": "1700000000000",
    "kafka.stream_positions": '{"0": "pg:1"}',
    "kafka.topic_id": "x1",
    "quarantined": '{"0": [3, 9], "1": [2]}',
    "schema.compared_columns": '["amount", "id"]',
    "schema.char_lengths": '{"name": 200, "note": 10}',
    "lake.layout": '{"table_type": "MERGE_ON_READ", "index": "BUCKET"}',
}
"""An applier's commit, every key present (earlier versions wrote the same without ``lake.layout``)."""
BOOTSTRAP_COMMIT = {
    "kafka.topic": "pg.public.t",
    "kafka.offsets": '{"0": 5}',
    "bootstrap.attempt": "2026-01-01T00:00:00+00:00",
    "bootstrap.partitions": "0,2,10",
}
"""A bootstrap group's commit as earlier versions wrote it."""


@pytest.mark.parametrize("stored", [APPLY_COMMIT, BOOTSTRAP_COMMIT, {}], ids=["apply", "bootstrap", "none"])
def test_stored_metadata_reads_back_and_writes_the_same_strings(stored: dict[str, str]) -> None:
    written = CommitMetadata.from_dict(stored).to_dict()

    assert written == stored and list(written) == list(stored)


def test_the_record_holds_typed_values() -> None:
    apply = CommitMetadata.from_dict(APPLY_COMMIT)
    bootstrap = CommitMetadata.from_dict(BOOTSTRAP_COMMIT)

    assert (apply.offsets, apply.positions, apply.quarantined) == (
        {0: 17, 1: 4},
        {0: "pg:1"},
        {0: (3, 9), 1: (2,)},
    )
    assert (apply.compared_columns, apply.char_lengths) == (
        frozenset({"id", "amount"}),
        {"name": 200, "note": 10},
    )
    assert (bootstrap.bootstrap_partitions, bootstrap.newest_source_ts_ms) == (frozenset({0, 2, 10}), None)
    assert apply.layout == TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET)
    assert bootstrap.layout is None  # a commit of an earlier version: the table's layout is not known


def test_a_bucket_tables_count_is_recorded_and_read_back() -> None:
    """A bucket-index table's count is sized per table (``lake.rows_per_bucket``) and kept by its commits;
    a layout recorded without one (before 2026-12-05) reads as None: the table was written with 4."""
    layout = TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET, 40)
    stored = CommitMetadata(layout=layout).to_dict()
    expected = {"table_type": "MERGE_ON_READ", "index": "BUCKET", "buckets": 40}
    assert json.loads(stored["lake.layout"]) == expected
    assert CommitMetadata.from_dict(stored).layout == layout
    earlier = CommitMetadata.from_dict(APPLY_COMMIT).layout
    assert earlier == TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET)


def test_a_bootstrap_commit_of_no_partition_still_names_its_attempt() -> None:
    assert CommitMetadata(bootstrap_attempt="a").to_dict() == {
        "bootstrap.attempt": "a",
        "bootstrap.partitions": "",
    }


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        ({"kafka.offsets": "[1, 2"}, "malformed offsets '\\[1, 2'"),
        ({"kafka.offsets": "{}", "kafka.stream_positions": "[]"}, "malformed offsets '{}'"),
        ({"schema.char_lengths": '{"a": "x"}'}, "malformed schema.char_lengths"),
        ({"lake.layout": '{"table_type": "MERGE_ON_READ"}'}, "malformed lake.layout"),
        ({"lake.layout": '{"table_type": "X", "index": "BUCKET"}'}, "malformed lake.layout"),
        ({"lake.layout": '{"table_type": "MERGE_ON_READ", "index": "BUCKET", "buckets": 0}'}, "buckets"),
        ({"lake.layout": '{"table_type": "MERGE_ON_READ", "index": "BUCKET", "buckets": "8"}'}, "buckets"),
    ],
)
def test_a_value_that_cannot_be_read_is_named(stored: dict[str, str], message: str) -> None:
    with pytest.raises(MalformedCommitMetadata, match=message):
        CommitMetadata.from_dict(stored)
