"""A recaptured table (onboard --after-failover) keeps its possibly-diverged mark until a repair.

A clean ``validate`` cannot clear it: equal values do not show a row the old primary left with an
ordering value above the new primary's changes (:mod:`cdc_lake.state.recaptures`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_lake.state import StateStore, TableState

TABLE = "pg.public.orders"
WHY = "capture restarted on a new primary: run cdc-lake repair pg.public.orders"
FORK = f"{0x3000148:040d}"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(f"sqlite:///{tmp_path}/state.db") as opened:
        opened.upsert_source("pg", "postgres", ["cdc-lake-pg"])
        opened.upsert_table(TABLE, "pg", 0, "/lake/pg/public/orders")
        yield opened


def test_a_recapture_is_recorded_with_its_mark_and_survives_a_clean_validate(store: StateStore) -> None:
    store.start_recapture(TABLE, "pg.public.orders", {0: 41}, FORK, WHY)

    store.clear_possibly_diverged(TABLE)  # what a clean validate does

    recapture = store.recapture(TABLE)
    assert recapture is not None and (recapture.offsets, recapture.fork_ordering) == ({0: 41}, FORK)
    assert store.require_table(TABLE).possibly_diverged == WHY


def test_a_repair_ends_the_recapture_and_a_clean_validate_then_its_mark(store: StateStore) -> None:
    store.start_recapture(TABLE, "pg.public.orders", {0: 41}, FORK, WHY)

    store.finish_recapture(TABLE)
    assert store.recapture(TABLE) is None
    assert "cdc-lake validate pg.public.orders" in (store.require_table(TABLE).possibly_diverged or "")

    store.clear_possibly_diverged(TABLE)
    assert store.require_table(TABLE).possibly_diverged is None


def test_finishing_without_a_recapture_keeps_another_mark(store: StateStore) -> None:
    store.mark_possibly_diverged(TABLE, "commit after a lost lock")

    store.finish_recapture(TABLE)

    assert store.require_table(TABLE).possibly_diverged == "commit after a lost lock"


def test_a_new_copy_ends_the_recapture(store: StateStore) -> None:
    store.start_recapture(TABLE, "pg.public.orders", {0: 41}, FORK, WHY)

    store.save_watermark(
        TABLE, topic="pg.public.orders", offsets={0: 60}, ts_source_ms=None, source_position=None
    )

    assert store.recapture(TABLE) is None


def test_an_offboarded_table_is_recaptured_catching_up(store: StateStore) -> None:
    store.transition(TABLE, TableState.BOOTSTRAPPING)
    store.transition(TABLE, TableState.CATCHING_UP)
    store.transition(TABLE, TableState.LIVE)
    store.transition(TABLE, TableState.OFFBOARDED)

    assert store.transition(TABLE, TableState.CATCHING_UP).state is TableState.CATCHING_UP
