"""Checkpoints in Hudi commit metadata: what a commit stores and how a resume reads it back."""

from __future__ import annotations

import pytest

from cdc_lake.exceptions import HudiWriteError
from cdc_lake.hudi.timeline import CommitInfo
from cdc_lake.lake.checkpoint import Checkpoint, Origin, checkpoint_from_commit


def _commit(metadata: dict[str, str]) -> CommitInfo:
    return CommitInfo("20250101000000000", "commit", "20250101000001000", "UPSERT", metadata)


def test_offsets_time_positions_and_topic_id_round_trip_through_commit_metadata() -> None:
    stored = Checkpoint(
        "pg.public.t", {0: 17, 1: 4}, 1_700_000_000_000, Origin.COMMIT, positions={0: "pg:1"}, topic_id="x1"
    )

    loaded = checkpoint_from_commit(_commit(stored.commit_metadata()), "pg.public.t", "here")

    assert loaded == Checkpoint(
        "pg.public.t", {0: 17, 1: 4}, 1_700_000_000_000, Origin.COMMIT, "20250101000000000", {0: "pg:1"}, "x1"
    )


def test_a_commit_of_an_earlier_version_has_no_topic_id() -> None:
    loaded = checkpoint_from_commit(
        _commit({"kafka.topic": "pg.public.t", "kafka.offsets": '{"0": 3}'}), "pg.public.t", "here"
    )

    assert loaded is not None and (loaded.offsets, loaded.topic_id) == ({0: 3}, None)
    assert "kafka.topic_id" not in Checkpoint("pg.public.t", {0: 3}, None, Origin.COMMIT).commit_metadata()


def test_a_commit_without_offsets_is_not_a_checkpoint() -> None:
    assert checkpoint_from_commit(_commit({}), "pg.public.t", "here") is None


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"kafka.topic": "other", "kafka.offsets": "{}"}, "holds offsets of topic 'other'"),
        ({"kafka.offsets": "[1, 2"}, "malformed offsets"),
    ],
)
def test_foreign_or_malformed_offsets_are_errors(metadata: dict[str, str], message: str) -> None:
    with pytest.raises(HudiWriteError, match=message):
        checkpoint_from_commit(_commit(metadata), "pg.public.t", "table x")
