"""State store: quarantined messages, the possibly-diverged mark, and re-bootstrap records and switch."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_lake.apply.skipped import quarantined_below, skipped_offsets
from cdc_lake.exceptions import StateStoreError
from cdc_lake.lake.commit_metadata import QUARANTINED_KEY, CommitMetadata
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import RebootstrapPhase
from cdc_lake.state.store import StateStore, versioned_path

TABLE = "pg.public.orders"
PATH = "/lake/pg/public/orders"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(f"sqlite:///{tmp_path}/state.db") as opened:
        opened.upsert_source("pg", "postgres", ["cdc-lake-pg"])
        opened.upsert_table(TABLE, "pg", 1, PATH)
        for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
            opened.transition(TABLE, state)
        yield opened


def _quarantine(store: StateStore, offset: int) -> None:
    store.quarantine_message(
        TABLE,
        topic="pg.public.orders",
        partition=0,
        offset=offset,
        reason="bad\nbytes",
        key=b"k",
        value=b"\x00v",
    )


def test_a_quarantined_message_is_kept_once_and_marks_the_table(store: StateStore) -> None:
    _quarantine(store, 7)
    _quarantine(store, 7)

    (kept,) = store.quarantined(TABLE)
    assert (kept.partition, kept.offset, kept.key, kept.value, kept.reason) == (0, 7, b"k", b"\x00v", "bad")
    marked = store.require_table(TABLE).possibly_diverged
    assert marked is not None and "offset 7" in marked
    assert store.clear_possibly_diverged(TABLE).possibly_diverged is None


def test_skipped_offsets_are_those_in_the_batch_range_and_the_commit_lists_them(store: StateStore) -> None:
    for offset in (3, 9, 20):
        _quarantine(store, offset)

    skipped = skipped_offsets(store, TABLE, "pg.public.orders", {0: 5}, {0: 20})
    copy_skips = skipped_offsets(store, f"{TABLE}~v2", "pg.public.orders", {0: 0}, {0: 21})

    assert skipped == {(0, 9)}
    assert copy_skips == {(0, 3), (0, 9), (0, 20)}
    recorded = CommitMetadata(quarantined=quarantined_below(skipped, {0: 20}))
    assert recorded.to_dict() == {QUARANTINED_KEY: '{"0": [9]}'}
    assert CommitMetadata(quarantined=quarantined_below(skipped, {0: 9})).to_dict() == {}
    assert skipped_offsets(None, TABLE, "pg.public.orders", {0: 0}, {0: 21}) == frozenset()


def test_a_rebootstrap_resumes_its_record_and_switches_everything_at_once(store: StateStore) -> None:
    _quarantine(store, 1)
    store.transition(TABLE, TableState.FAILED, "topic 'x' partition 0 offset 1: bad")
    started = store.start_rebootstrap(TABLE, "bad message", lambda v: versioned_path(PATH, v))
    again = store.start_rebootstrap(TABLE, "other", lambda v: versioned_path(PATH, v))
    assert again == started and started.version == 2 and started.new_path == f"{PATH}__v2"
    store.upsert_table(started.copy_name, "pg", 1, started.new_path)
    with pytest.raises(StateStoreError, match="not LIVE"):
        store.switch_rebootstrap(TABLE, 2, dt.timedelta(hours=1))
    for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
        store.transition(started.copy_name, state)
    store.record_applied_offsets(started.copy_name, {0: 42}, "20260101000000000")
    store.record_freshness(started.copy_name, 1000, 0)
    # The copy's snapshot is past the quarantined offset 1: it holds that change, so the mark goes.
    store.save_watermark(started.copy_name, topic="pg.public.orders", offsets={0: 40}, ts_source_ms=None,
                         source_position=None)

    switched = store.switch_rebootstrap(TABLE, 2, dt.timedelta(hours=1))

    info = store.require_table(TABLE)
    assert (info.state, info.lake_base_path, info.last_error, info.possibly_diverged) == (
        TableState.LIVE,
        f"{PATH}__v2",
        None,
        None,
    )
    assert store.get_applied_offsets(TABLE) == {0: 42}
    assert store.get_table(started.copy_name) is None
    assert switched.phase is RebootstrapPhase.SWITCHED and switched.remove_after is not None
    assert store.upsert_table(TABLE, "pg", 1, PATH).lake_base_path == f"{PATH}__v2", "onboard keeps it"
    assert store.start_rebootstrap(TABLE, "next", lambda v: versioned_path(PATH, v)).old_path == f"{PATH}__v2"
    assert store.mark_old_path_removed(TABLE, 2).phase is RebootstrapPhase.REMOVED


def test_an_aborted_rebootstrap_leaves_the_table_untouched(store: StateStore) -> None:
    started = store.start_rebootstrap(TABLE, "", lambda v: versioned_path(PATH, v))
    store.upsert_table(started.copy_name, "pg", 1, started.new_path)

    aborted = store.abort_rebootstrap(TABLE, started.version)

    assert aborted.phase is RebootstrapPhase.ABORTED and aborted.reason == "operator request"
    assert store.get_table(started.copy_name) is None
    assert store.require_table(TABLE).lake_base_path == PATH
    assert store.start_rebootstrap(TABLE, "again", lambda v: versioned_path(PATH, v)).version == 3


def test_a_rebootstrap_records_where_its_copy_is_read(store: StateStore) -> None:
    """``rebootstrap --from-primary`` is recorded with the run (migration 0005): a resumed run must read
    where the first one read, and ``rebootstrap`` refuses the other side (test_rebootstrap_current_copy)."""
    started = store.start_rebootstrap(TABLE, "uuid() default", lambda v: versioned_path(PATH, v), "primary")
    again = store.start_rebootstrap(TABLE, "again", lambda v: versioned_path(PATH, v))

    assert started.read_from == "primary" and again == started
    assert store.rebootstraps(TABLE)[-1].read_from == "primary"
