"""Every verb reads a table's *current copy*: right after a re-bootstrap switch, ``status``, ``lag``,
``validate`` and ``rebootstrap --remove-old`` see the new versioned path, its last commit and its offsets.

The switch runs as ``cdc-lake rebootstrap`` runs it (:func:`bootstrap.rebootstrap._switch`), with the
copy's Hudi timeline and the applier faked: the copy was bootstrapped and caught up without a single
change after its watermark, so the applier never committed to it (the case measured on the stack).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.caught_up import CaughtUpApplier

from cdc_lake.config import Config, load_config
from cdc_lake.exceptions import RebootstrapError
from cdc_lake.hudi.format import HudiFormat
from cdc_lake.kafka.offsets import TopicState
from cdc_lake.lake.checkpoint import Checkpoint, Origin
from cdc_lake.lake.format import CommitInfo
from cdc_lake.ops import lag
from cdc_lake.ops.lag import LagReport
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import HeldLock
from cdc_lake.state.records import Rebootstrap
from cdc_lake.state.status import table_statuses
from cdc_lake.state.store import StateStore, versioned_path
from cdc_lake_bootstrap import rebootstrap, validate
from cdc_lake_bootstrap.progress import LineView
from cdc_lake_bootstrap.rebootstrap import copy_target, remove_old_paths
from cdc_lake_bootstrap.validate import ValidateOptions, validate_table

TABLE = "pg.public.orders"
TOPIC = "pg.public.orders"
OLD_COMMIT = "20260101000000000"
COPY_COMMIT = "20260202000000000"
COPY_WATERMARK = {0: 40, 1: 7}
TOPIC_ID = "the-topic-id"


@pytest.fixture
def config(tmp_path: Path) -> Config:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(
        f"state_store:\n  url: sqlite:///{tmp_path}/state.db\nlake:\n  base_path: {tmp_path}/lake\n"
        "sources:\n  pg:\n    engine: postgres\n    primary: {port: 1, database: d, user: u}\n"
        "    tables:\n      - name: public.orders\n"
    )
    return load_config(path)


@pytest.fixture
def store(config: Config) -> Iterator[StateStore]:
    with StateStore.open(config.state_store.url) as opened:
        yield opened


def _bootstrapped(store: StateStore, name: str, path: str, watermark: dict[int, int]) -> None:
    store.upsert_table(name, "pg", 1, path)
    store.transition(name, TableState.BOOTSTRAPPING)
    store.save_watermark(name, topic=TOPIC, offsets=watermark, ts_source_ms=1000, source_position="0/1")
    for state in (TableState.CATCHING_UP, TableState.LIVE):
        store.transition(name, state)


@pytest.fixture
def copying(config: Config, store: StateStore) -> Rebootstrap:
    """A LIVE table with applied offsets and a re-bootstrap copy caught up to its watermark, not switched."""
    store.upsert_source("pg", "postgres", ["cdc-lake-pg"])
    configured = config.lake.table_base_path(TABLE)
    _bootstrapped(store, TABLE, configured, {0: 3, 1: 2})
    store.record_applied_offsets(TABLE, {0: 10, 1: 5}, OLD_COMMIT)
    store.record_freshness(TABLE, 500, 0)
    record = store.start_rebootstrap(TABLE, "test", lambda version: versioned_path(configured, version))
    _bootstrapped(store, record.copy_name, record.new_path, COPY_WATERMARK)
    return record


def _run_switch(
    monkeypatch: pytest.MonkeyPatch, config: Config, store: StateStore, copying: Rebootstrap
) -> None:
    """The switch, the copy's latest commit being its bootstrap commit (the watermark's offsets)."""
    metadata = Checkpoint(TOPIC, dict(COPY_WATERMARK), 1000, Origin.WATERMARK).metadata().to_dict()
    commits = {copying.new_path: CommitInfo(COPY_COMMIT, "commit", None, "BULK_INSERT", metadata)}
    monkeypatch.setattr(HudiFormat, "latest_commit", lambda lake, path, **_: commits[path])
    monkeypatch.setattr(rebootstrap, "topic_state", lambda servers, topic, extra: TopicState(TOPIC_ID, {}))
    target = copy_target(config, TABLE, copying)
    rebootstrap._switch(config, store, None, TABLE, copying, target, CaughtUpApplier)  # type: ignore[arg-type]


@pytest.fixture
def switched(
    monkeypatch: pytest.MonkeyPatch, config: Config, store: StateStore, copying: Rebootstrap
) -> Rebootstrap:
    """The switch, the copy's latest commit being its bootstrap commit (the watermark's offsets)."""
    _run_switch(monkeypatch, config, store, copying)
    return copying


def test_the_switch_keeps_the_quarantined_changes_the_new_copy_lacks_and_their_mark(
    monkeypatch: pytest.MonkeyPatch, config: Config, store: StateStore, copying: Rebootstrap
) -> None:
    for partition, offset, topic_id in ((0, 12, TOPIC_ID), (1, 7, TOPIC_ID), (1, 9, "a-deleted-topic")):
        store.quarantine_message(
            TABLE, topic=TOPIC, partition=partition, offset=offset, reason="bad", key=None, value=b"v",
            topic_id=topic_id, lake_path=config.lake.table_base_path(TABLE),
        )

    _run_switch(monkeypatch, config, store, copying)

    # p0 offset 12 is below the copy's watermark (40): its change is in the snapshot.  p1 offset 7 is at
    # the watermark: the copy skipped it too.  p1 offset 9 was quarantined from a topic since re-created.
    kept = [(q.partition, q.offset, q.lake_path) for q in store.quarantined(TABLE)]
    assert kept == [(1, 7, copying.new_path)]
    marked = store.require_table(TABLE).possibly_diverged
    assert marked is not None and "partition 1 offset 7" in marked


def test_status_right_after_the_switch_shows_the_new_copy_its_commit_and_offsets(
    store: StateStore, switched: Rebootstrap
) -> None:
    (status,) = table_statuses(store)

    assert (status.name, status.state, status.lake_base_path) == (TABLE, TableState.LIVE, switched.new_path)
    assert status.last_commit == COPY_COMMIT
    assert status.applied_offsets == COPY_WATERMARK


def test_the_current_copy_is_the_switched_one_with_its_own_bootstrap_watermark(
    store: StateStore, switched: Rebootstrap
) -> None:
    current = store.current_copy(TABLE)
    watermark = store.get_watermark(TABLE)

    assert (current.path, current.last_commit, current.applied_offsets) == (
        switched.new_path, COPY_COMMIT, COPY_WATERMARK,
    )
    assert watermark is not None and watermark.offsets == COPY_WATERMARK


def test_lag_right_after_the_switch_counts_from_the_new_copy(
    monkeypatch: pytest.MonkeyPatch, config: Config, store: StateStore, switched: Rebootstrap
) -> None:
    monkeypatch.setattr(lag, "end_offsets", lambda servers, topic, extra: {0: 45, 1: 7})
    report = LagReport(measured_at=datetime.now(tz=UTC))

    lag._table_rows(config, store, {TABLE: store.require_table(TABLE)}, report)

    (row,) = report.tables
    assert (row.table, row.kafka_lag_messages, row.last_commit) == (TABLE, 5, COPY_COMMIT)


class _LakeRead(Exception):
    """Raised by the faked lake read: the path validate asked for."""


def test_validate_reads_the_current_copy_not_the_configured_path(
    monkeypatch: pytest.MonkeyPatch, config: Config, store: StateStore, switched: Rebootstrap
) -> None:
    store.transition(TABLE, TableState.PAUSED)  # no wait for the lake: only which copy is read counts here
    monkeypatch.setattr(
        validate, "source_frame", lambda spark, config, table, options: (None, ["id"], ["id"], "0/1", TOPIC)
    )

    def read(lake: Any, path: str) -> None:
        raise _LakeRead(path)

    monkeypatch.setattr(HudiFormat, "read", read)

    with pytest.raises(_LakeRead) as read_path:
        validate_table(None, config, store, TABLE, ValidateOptions())  # type: ignore[arg-type]

    assert read_path.value.args == (switched.new_path,)
    assert read_path.value.args != (config.lake.table_base_path(TABLE),)


def test_remove_old_removes_the_path_before_the_current_copy(
    monkeypatch: pytest.MonkeyPatch, config: Config, store: StateStore, switched: Rebootstrap
) -> None:
    removed: list[str] = []
    monkeypatch.setattr(rebootstrap, "get_spark", lambda spark, lake: None)
    monkeypatch.setattr(HudiFormat, "remove", lambda lake, path: removed.append(path))

    (result,) = remove_old_paths(config, now=True)

    assert removed == [switched.old_path] == [config.lake.table_base_path(TABLE)]
    assert result.action == "removed"
    assert store.current_copy(TABLE).path == switched.new_path


def test_a_switch_keeps_the_copys_own_apply_commits(
    monkeypatch: pytest.MonkeyPatch, config: Config, store: StateStore, copying: Rebootstrap
) -> None:
    store.record_applied_offsets(copying.copy_name, {0: 44, 1: 7}, COPY_COMMIT)
    metadata = Checkpoint(TOPIC, {0: 44, 1: 7}, 2000, Origin.COMMIT).metadata().to_dict()
    commit = CommitInfo(COPY_COMMIT, "commit", None, "UPSERT", metadata)
    monkeypatch.setattr(HudiFormat, "latest_commit", lambda lake, path, **_: commit)
    # A unit test: no Kafka (it read the real broker's topic state when the stack ran, failed otherwise).
    monkeypatch.setattr(rebootstrap, "topic_state", lambda servers, topic, extra: TopicState(TOPIC_ID, {}))

    target = copy_target(config, TABLE, copying)
    rebootstrap._switch(config, store, None, TABLE, copying, target, CaughtUpApplier)  # type: ignore[arg-type]

    current = store.current_copy(TABLE)
    assert (current.last_commit, current.applied_offsets) == (COPY_COMMIT, {0: 44, 1: 7})
    assert store.get_table(copying.copy_name) is None
    assert store.rebootstraps(TABLE)[-1].switched_at is not None


def test_a_resumed_rebootstrap_reads_where_it_started(
    config: Config, store: StateStore, copying: Rebootstrap
) -> None:
    """Partitions copied from the replica and the primary would mix two sources: the side the unfinished
    re-bootstrap started on is recorded, and a run asking for the other one is refused, naming both ways."""
    assert copying.read_from is None

    with pytest.raises(RebootstrapError) as refused:
        rebootstrap._rebootstrap(
            config, store, TABLE, "again", LineView(print), CaughtUpApplier, True,
            HeldLock(True, f"the bootstrap lock of {TABLE}"),
        )

    assert str(refused.value) == (
        f"table {TABLE}: its unfinished re-bootstrap v2 reads where the config says; run it again without "
        f"--from-primary, or roll it back: cdc-lake rebootstrap {TABLE} --abort"
    )


def test_a_bootstrap_whose_hand_off_was_refused_is_rebootstrapped_and_switched(
    monkeypatch: pytest.MonkeyPatch, config: Config, store: StateStore
) -> None:
    """Issue 34 review 7: the hand-off refuses a copy it cannot publish (rows sharing a configured key, a
    topic created again since the watermark) and leaves the table BOOTSTRAPPING; the error names
    `cdc-lake rebootstrap TABLE` as the way out, so it must take a BOOTSTRAPPING table: a fresh copy in
    a new path, switched in once caught up, the refused copy left at the old path for --remove-old."""
    store.upsert_source("pg", "postgres", ["cdc-lake-pg"])
    configured = config.lake.table_base_path(TABLE)
    store.upsert_table(TABLE, "pg", 1, configured)
    with pytest.raises(RebootstrapError, match="is PENDING_BOOTSTRAP: run `cdc-lake bootstrap"):
        rebootstrap.rebootstrap_tables(config, [TABLE], "", LineView(print), CaughtUpApplier)
    store.transition(TABLE, TableState.BOOTSTRAPPING)
    store.save_watermark(TABLE, topic=TOPIC, offsets={0: 3}, ts_source_ms=1000, source_position="0/1")
    copied = _copies_caught_up(monkeypatch, store)

    (result,) = rebootstrap.rebootstrap_tables(
        config, [TABLE], "refused hand-off", LineView(print), CaughtUpApplier
    )

    assert copied == [result.path] == [versioned_path(configured, 2)]
    current = store.current_copy(TABLE)
    assert (store.require_table(TABLE).state, current.path, current.applied_offsets) == (
        TableState.LIVE, result.path, COPY_WATERMARK,
    )
    assert store.rebootstraps(TABLE)[-1].old_path == configured


def test_a_table_onboarded_again_with_its_lake_copy_is_rebootstrapped(
    monkeypatch: pytest.MonkeyPatch, config: Config, store: StateStore
) -> None:
    """The full-copy way out of a lost position (docs/runbooks/position-lost.md): offboard and onboard
    leave the table PENDING_BOOTSTRAP with its lake copy at the configured path, which `bootstrap`
    refuses to write into; `rebootstrap` refused a PENDING_BOOTSTRAP table, naming `bootstrap`: a dead
    end (failover_bench.py's copy path).  A table copied before is rebootstrapped: a new path, switched in
    once caught up, the old copy kept until then."""
    store.upsert_source("pg", "postgres", ["cdc-lake-pg"])
    configured = config.lake.table_base_path(TABLE)
    store.upsert_table(TABLE, "pg", 1, configured)
    store.save_watermark(TABLE, topic=TOPIC, offsets={0: 3}, ts_source_ms=1000, source_position="0/1")
    for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
        store.transition(TABLE, state)
    store.transition(TABLE, TableState.OFFBOARDED)
    store.transition(TABLE, TableState.PENDING_BOOTSTRAP)  # onboarded again
    _copies_caught_up(monkeypatch, store)

    (result,) = rebootstrap.rebootstrap_tables(
        config, [TABLE], "position lost", LineView(print), CaughtUpApplier
    )

    assert result.path == versioned_path(configured, 2)
    current = store.current_copy(TABLE).path
    assert (store.require_table(TABLE).state, current) == (TableState.LIVE, result.path)


def _copies_caught_up(monkeypatch: pytest.MonkeyPatch, store: StateStore) -> list[str]:
    """A re-bootstrap's copy bootstrapped and caught up (LIVE, its commit holding the watermark) without
    Spark; returns the paths copied into, as they are copied."""
    copied: list[str] = []

    def run_copy(copy: Any, lock: HeldLock) -> None:
        copied.append(copy.target.base_path)
        _bootstrapped(store, copy.name, copy.target.base_path, COPY_WATERMARK)

    monkeypatch.setattr(rebootstrap.TableBootstrap, "run", run_copy)
    monkeypatch.setattr(rebootstrap, "get_spark", lambda spark, lake: None)
    metadata = Checkpoint(TOPIC, dict(COPY_WATERMARK), 1000, Origin.WATERMARK).metadata().to_dict()
    commit = CommitInfo(COPY_COMMIT, "commit", None, "BULK_INSERT", metadata)
    monkeypatch.setattr(HudiFormat, "latest_commit", lambda lake, path, **_: commit)
    monkeypatch.setattr(rebootstrap, "topic_state", lambda servers, topic, extra: TopicState(TOPIC_ID, {}))
    return copied
