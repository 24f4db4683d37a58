"""Quarantine rows through a re-bootstrap and a re-created topic (issue 21, finding 3).

A re-bootstrap's copy is read from a replica snapshot at its watermark: a quarantined change *before*
the watermark is in the copy, one at or after it the copy skips too (the operator's decision holds for
the message), so it is still missing.  The switch keeps such rows, bound to the new copy, with the
possibly-diverged mark; it clears the others and the mark with them.  A row is bound to the topic's
Kafka id: a topic deleted and created again never skips unrelated messages at the old offsets, and the
switch to a copy of the new topic drops the old topic's rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_lake.apply.skipped import skipped_offsets
from cdc_lake.exceptions import StateStoreError
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore, versioned_path

TABLE = "pg.public.orders"
TOPIC = "pg.public.orders"
PATH = "/lake/pg/public/orders"
OLD_ID, NEW_ID = "old-topic-id", "new-topic-id"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(f"sqlite:///{tmp_path}/state.db") as opened:
        opened.upsert_source("pg", "postgres", ["cdc-lake-pg"])
        opened.upsert_table(TABLE, "pg", 1, PATH)
        for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
            opened.transition(TABLE, state)
        yield opened


def _quarantine(store: StateStore, partition: int, offset: int, topic_id: str | None = OLD_ID) -> None:
    store.quarantine_message(
        TABLE, topic=TOPIC, partition=partition, offset=offset, reason="bad", key=b"k", value=b"v",
        topic_id=topic_id, lake_path=PATH,
    )


def _copy_live(store: StateStore, watermark: dict[int, int]) -> int:
    started = store.start_rebootstrap(TABLE, "bad message", lambda v: versioned_path(PATH, v))
    store.upsert_table(started.copy_name, "pg", 1, started.new_path)
    store.save_watermark(started.copy_name, topic=TOPIC, offsets=watermark, ts_source_ms=1,
                         source_position="0/1")
    for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
        store.transition(started.copy_name, state)
    return started.version


def test_the_switch_keeps_only_what_the_new_copy_also_lacks(store: StateStore) -> None:
    _quarantine(store, 0, 3)  # before the copy's watermark: in its snapshot
    _quarantine(store, 1, 12)  # at or after it: the copy skipped it too
    version = _copy_live(store, {0: 10, 1: 12})

    store.switch_rebootstrap(TABLE, version, dt.timedelta(hours=1), topic_id=OLD_ID)

    kept = store.quarantined(TABLE)
    assert [(q.partition, q.offset, q.lake_path) for q in kept] == [(1, 12, f"{PATH}__v2")]
    marked = store.require_table(TABLE).possibly_diverged
    assert marked is not None and "partition 1 offset 12" in marked


def test_the_switch_clears_the_mark_when_the_copy_holds_every_quarantined_change(store: StateStore) -> None:
    _quarantine(store, 0, 3)
    _quarantine(store, 0, 9)
    version = _copy_live(store, {0: 10})

    store.switch_rebootstrap(TABLE, version, dt.timedelta(hours=1), topic_id=OLD_ID)

    assert store.quarantined(TABLE) == []
    assert store.require_table(TABLE).possibly_diverged is None


def test_a_switch_to_a_copy_of_a_recreated_topic_drops_the_old_topics_rows(store: StateStore) -> None:
    _quarantine(store, 0, 50)
    version = _copy_live(store, {0: 0})

    store.switch_rebootstrap(TABLE, version, dt.timedelta(hours=1), topic_id=NEW_ID)

    assert store.quarantined(TABLE) == []
    assert store.require_table(TABLE).possibly_diverged is None


def test_a_recreated_topic_never_skips_the_old_topics_offsets(store: StateStore) -> None:
    _quarantine(store, 0, 5)
    _quarantine(store, 0, 6, topic_id=None)  # recorded before topic ids were: kept as before

    assert skipped_offsets(store, TABLE, TOPIC, {0: 0}, {0: 10}, OLD_ID) == {(0, 5), (0, 6)}
    assert skipped_offsets(store, TABLE, TOPIC, {0: 0}, {0: 10}, NEW_ID) == {(0, 6)}
    assert skipped_offsets(store, f"{TABLE}~v2", TOPIC, {0: 0}, {0: 10}, NEW_ID) == {(0, 6)}


def test_releasing_the_last_row_clears_the_mark_and_an_earlier_one_keeps_it(store: StateStore) -> None:
    _quarantine(store, 0, 5)
    _quarantine(store, 0, 8)

    store.release_quarantined(TABLE, 0, 8)
    marked = store.require_table(TABLE).possibly_diverged
    assert marked is not None and "offset 5" in marked
    store.release_quarantined(TABLE, 0, 5)

    assert store.quarantined(TABLE) == [] and store.require_table(TABLE).possibly_diverged is None
    assert store.quarantined() == []


def test_every_tables_rows_are_listed_and_counted(store: StateStore) -> None:
    _quarantine(store, 0, 5)
    _quarantine(store, 1, 5)

    assert [(q.table, q.partition) for q in store.quarantined()] == [(TABLE, 0), (TABLE, 1)]
    assert store.quarantine_counts() == {TABLE: 2}


def test_a_replayed_row_stays_as_history_but_no_longer_marks_counts_or_skips(store: StateStore) -> None:
    _quarantine(store, 0, 5)
    _quarantine(store, 0, 8)

    store.mark_replayed(TABLE, 0, 8, by="ops", commit="20260101000000000")
    marked = store.require_table(TABLE).possibly_diverged
    assert marked is not None and "offset 5" in marked
    store.mark_replayed(TABLE, 0, 5, by="ops", commit=None)

    rows = store.quarantined(TABLE)
    assert [(q.offset, q.replayed_by, q.replay_commit, q.missing) for q in rows] == [
        (5, "ops", None, False), (8, "ops", "20260101000000000", False)
    ]
    assert all(q.replayed_at is not None for q in rows)
    assert store.require_table(TABLE).possibly_diverged is None and store.quarantine_counts() == {}
    assert skipped_offsets(store, TABLE, TOPIC, {0: 0}, {0: 10}, OLD_ID) == frozenset()
    with pytest.raises(StateStoreError, match="offset 5: the quarantined message was already replayed"):
        store.mark_replayed(TABLE, 0, 5, by="ops", commit=None)


def test_a_mark_of_another_cause_outlives_the_quarantine_until_a_clean_validate(store: StateStore) -> None:
    """A commit written after the apply lock was lost marks the table (runner); quarantining a message
    and replaying it (or releasing it) then recomputed the mark from the quarantine alone and cleared
    the lock's.  It stays until a clean validate (or a re-bootstrap's switch) clears it."""
    lock = "commit 20261203091500000 completed after the apply lock was lost during its write (x)"
    store.mark_possibly_diverged(TABLE, lock)
    _quarantine(store, 0, 3)
    _quarantine(store, 0, 4)
    assert store.require_table(TABLE).possibly_diverged == lock
    store.mark_replayed(TABLE, 0, 3, by="ops", commit="c1")
    store.release_quarantined(TABLE, 0, 4)
    assert store.require_table(TABLE).possibly_diverged == lock

    assert store.clear_possibly_diverged(TABLE).possibly_diverged is None
    _quarantine(store, 1, 5)
    assert (store.require_table(TABLE).possibly_diverged or "").startswith("message at topic ")
    store.mark_replayed(TABLE, 1, 5, by="ops", commit="c2")
    assert store.require_table(TABLE).possibly_diverged is None
