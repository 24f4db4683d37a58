"""Checkpoints in Hudi commit metadata: what a commit stores and how a resume reads it back."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.lake.checkpoint import Checkpoint, Origin, checkpoint_from_commit, resume_checkpoint
from cdc_lake.lake.format import CommitInfo
from cdc_lake.state import StateStore, TableState


def _commit(metadata: dict[str, str]) -> CommitInfo:
    return CommitInfo("20250101000000000", "commit", "20250101000001000", "UPSERT", metadata)


def test_offsets_time_positions_and_topic_id_round_trip_through_commit_metadata() -> None:
    stored = Checkpoint(
        "pg.public.t", {0: 17, 1: 4}, 1_700_000_000_000, Origin.COMMIT, positions={0: "pg:1"}, topic_id="x1"
    )

    loaded = checkpoint_from_commit(_commit(stored.metadata().to_dict()), "pg.public.t", "here")

    assert loaded == Checkpoint(
        "pg.public.t", {0: 17, 1: 4}, 1_700_000_000_000, Origin.COMMIT, "20250101000000000", {0: "pg:1"}, "x1"
    )


def test_a_commit_of_an_earlier_version_has_no_topic_id() -> None:
    loaded = checkpoint_from_commit(
        _commit({"kafka.topic": "pg.public.t", "kafka.offsets": '{"0": 3}'}), "pg.public.t", "here"
    )

    assert loaded is not None and (loaded.offsets, loaded.topic_id) == ({0: 3}, None)
    assert "kafka.topic_id" not in Checkpoint("pg.public.t", {0: 3}, None, Origin.COMMIT).metadata().to_dict()


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
    with pytest.raises(LakeWriteError, match=message):
        checkpoint_from_commit(_commit(metadata), "pg.public.t", "table x")


def _bootstrapped(tmp_path: Path, state: TableState) -> StateStore:
    store = StateStore.open(f"sqlite:///{tmp_path}/state.db")
    store.upsert_source("pg", "postgres", ["pg"])
    store.upsert_table("pg.acc.d", "pg", 0, f"{tmp_path}/lake/d")
    store.transition("pg.acc.d", TableState.BOOTSTRAPPING)
    store.save_watermark("pg.acc.d", topic="pg.acc.d", offsets={0: 7}, ts_source_ms=1, source_position=None)
    if state is not TableState.BOOTSTRAPPING:
        store.transition("pg.acc.d", TableState.CATCHING_UP)
    if state is TableState.LIVE:
        store.transition("pg.acc.d", TableState.LIVE)
    return store


@pytest.mark.parametrize("state", [TableState.CATCHING_UP, TableState.LIVE])
def test_a_bootstrapped_table_without_a_commit_is_refused_not_rebuilt_from_later_changes(
    tmp_path: Path, state: TableState
) -> None:
    # Issue 20, finding 1: the copy was removed (rebootstrap --abort killed after the removal); resuming
    # from the watermark would build a table holding only the changes after it, silently.
    with _bootstrapped(tmp_path, state) as store, pytest.raises(LakeWriteError) as caught:
        resume_checkpoint(f"{tmp_path}/lake/d", "pg.acc.d", "pg.acc.d", store, None)

    message = str(caught.value)
    assert "holds no lake commit" in message and "cdc-lake rebootstrap pg.acc.d" in message
    assert "\n" not in message


def test_a_bootstrap_that_has_not_written_yet_resumes_from_its_watermark(tmp_path: Path) -> None:
    with _bootstrapped(tmp_path, TableState.BOOTSTRAPPING) as store:
        checkpoint = resume_checkpoint(f"{tmp_path}/lake/d", "pg.acc.d", "pg.acc.d", store, None)

    assert checkpoint.origin is Origin.WATERMARK and checkpoint.offsets == {0: 7}
