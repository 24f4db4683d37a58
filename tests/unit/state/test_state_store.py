"""The state store on SQLite: migrations, idempotent upserts, watermarks, offsets, runs and freshness."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from cdc_lake import redaction as secrets
from cdc_lake.exceptions import StateStoreError, UnknownTableError
from cdc_lake.state import BootstrapPartition, RunOutcome, StateStore, TableState
from cdc_lake.state.migrate import HEAD_REVISION, alembic_config, stored_revision
from cdc_lake.state.models import Base
from cdc_lake.state.status import table_statuses

TABLE = "pg.public.orders"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/nested/dir/state.db"


@pytest.fixture
def store(url: str) -> Iterator[StateStore]:
    with StateStore.open(url) as opened:
        opened.upsert_source("pg", "postgres", ["cdc-lake-pg"])
        opened.upsert_table(TABLE, "pg", 1, "/lake/pg/public/orders")
        yield opened


def test_open_creates_the_schema_at_head(url: str) -> None:
    StateStore.open(url).close()

    engine = create_engine(url)
    with engine.connect() as connection:
        assert stored_revision(connection) == HEAD_REVISION
        tables = set(inspect(connection).get_table_names())
    assert {"sources", "tables", "bootstrap_watermarks", "applied_offsets", "runs", "freshness"} <= tables


def test_migrations_match_the_models(url: str) -> None:
    StateStore.open(url).close()

    with create_engine(url).connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)

    assert differences == []


def test_reopening_keeps_data_and_does_not_migrate_again(url: str) -> None:
    with StateStore.open(url) as first:
        first.upsert_source("pg", "postgres")
    with StateStore.open(url) as second:
        source = second.get_source("pg")

    assert source is not None
    assert source.engine == "postgres"


def test_in_memory_sqlite_keeps_one_database() -> None:
    with StateStore.open("sqlite://") as store:
        store.upsert_source("pg", "postgres")
        assert store.get_source("pg") is not None


def test_unparseable_url_is_a_state_store_error() -> None:
    with pytest.raises(StateStoreError, match="not a SQLAlchemy database URL"):
        StateStore.open("not a url")


def test_unreachable_database_error_hides_the_password() -> None:
    with pytest.raises(StateStoreError) as caught:
        StateStore.open("postgresql+psycopg://cdc:hunter2-secret@127.0.0.1:1/state?connect_timeout=2")

    message = str(caught.value)
    assert message.startswith("state store postgresql+psycopg://cdc:***@127.0.0.1:1/state")
    assert "hunter2-secret" not in message
    assert "\n" not in message


def test_upsert_source_is_idempotent(url: str) -> None:
    with StateStore.open(url) as store:
        first = store.upsert_source("pg", "postgres", ["a"])
        again = store.upsert_source("pg", "postgres", ["a"])
        changed = store.upsert_source("pg", "postgres", ["a", "b"])

    assert again == first
    assert changed.connector_names == ("a", "b")
    assert changed.onboarded_at == first.onboarded_at


def test_upsert_table_starts_pending_and_rerunning_changes_nothing(store: StateStore) -> None:
    table = store.get_table(TABLE)
    assert table is not None
    assert table.state is TableState.PENDING_BOOTSTRAP
    assert table.updated_at.tzinfo is not None

    again = store.upsert_table(TABLE, "pg", 1, "/lake/pg/public/orders")

    assert again == table


def test_upsert_table_updates_settings_but_never_the_state(store: StateStore) -> None:
    store.transition(TABLE, TableState.BOOTSTRAPPING)

    updated = store.upsert_table(TABLE, "pg", 0, "/lake2/pg/public/orders")

    assert (updated.tier, updated.lake_base_path, updated.state) == (
        0,
        "/lake2/pg/public/orders",
        TableState.BOOTSTRAPPING,
    )


def test_upsert_table_needs_its_source(store: StateStore) -> None:
    with pytest.raises(StateStoreError, match="source maria is not onboarded"):
        store.upsert_table("maria.app.items", "maria", 1, "/lake")
    with pytest.raises(StateStoreError, match="belongs to source pg, not maria"):
        store.upsert_source("maria", "mariadb")
        store.upsert_table(TABLE, "maria", 1, "/lake")


def test_list_tables_by_source(store: StateStore) -> None:
    store.upsert_source("maria", "mariadb")
    store.upsert_table("maria.app.items", "maria", 2, "/lake/maria/app/items")
    store.upsert_table("pg.public.accounts", "pg", 1, "/lake/pg/public/accounts")

    assert [t.qualified_name for t in store.list_tables()] == ["maria.app.items", "pg.public.accounts", TABLE]
    assert [t.qualified_name for t in store.list_tables(source="pg")] == ["pg.public.accounts", TABLE]


def test_full_lifecycle(store: StateStore) -> None:
    for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE, TableState.PAUSED):
        assert store.transition(TABLE, state).state is state
    assert store.transition(TABLE, TableState.LIVE).state is TableState.LIVE
    assert store.transition(TABLE, TableState.OFFBOARDED).state is TableState.OFFBOARDED


def test_illegal_transition_names_table_and_states(store: StateStore) -> None:
    with pytest.raises(StateStoreError, match=f"table {TABLE}: cannot go from PENDING_BOOTSTRAP to LIVE"):
        store.transition(TABLE, TableState.LIVE)

    table = store.get_table(TABLE)
    assert table is not None
    assert table.state is TableState.PENDING_BOOTSTRAP


def test_failed_needs_an_error_and_a_later_transition_clears_it(store: StateStore) -> None:
    store.transition(TABLE, TableState.BOOTSTRAPPING)
    with pytest.raises(StateStoreError, match="needs an error message"):
        store.transition(TABLE, TableState.FAILED)

    failed = store.transition(TABLE, TableState.FAILED, error="replica wait timed out\nafter 1800 s")
    assert failed.last_error == "replica wait timed out"
    assert store.transition(TABLE, TableState.FAILED, error="still broken").last_error == "still broken"

    assert store.transition(TABLE, TableState.PENDING_BOOTSTRAP).last_error is None


def test_transition_of_unknown_table(store: StateStore) -> None:
    with pytest.raises(UnknownTableError, match=re.escape("pg.public.nope is not onboarded")):
        store.transition("pg.public.nope", TableState.BOOTSTRAPPING)
    with pytest.raises(UnknownTableError, match=re.escape("pg.public.nope is not onboarded")):
        store.require_table("pg.public.nope")


def test_watermark_round_trip_and_progress(store: StateStore) -> None:
    plan = [BootstrapPartition(0, '"id" < 100'), BootstrapPartition(1, '"id" >= 100')]
    saved = store.save_watermark(
        TABLE, topic="pg.public.orders", offsets={0: 42, 2: 7}, ts_source_ms=1_700_000_000_000,
        source_position="0/16B3748", partitions=plan,
    )  # fmt: skip

    assert store.get_watermark(TABLE) == saved
    assert saved.offsets == {0: 42, 2: 7}
    assert saved.replica_position_reached is False
    assert saved.pending_partitions == tuple(plan)

    assert store.mark_replica_position_reached(TABLE).replica_position_reached is True
    done = store.mark_partition_done(TABLE, 1)
    assert [p.index for p in done.pending_partitions] == [0]
    with pytest.raises(StateStoreError, match="no partition 5"):
        store.mark_partition_done(TABLE, 5)

    replanned = store.set_partition_plan(TABLE, [BootstrapPartition(0, "true")])
    assert replanned.partitions == (BootstrapPartition(0, "true"),)


def test_a_watermark_records_the_id_of_the_topic_its_offsets_belong_to(store: StateStore) -> None:
    """Issue 34 review 7: a topic deleted and created again under its name between the watermark and the
    hand-off has other offsets; the id (migration 0009) tells the two apart (None: a broker without ids)."""
    saved = store.save_watermark(
        TABLE, topic="t", offsets={0: 4}, ts_source_ms=None, source_position=None, topic_id="AAAAAAdbzRU"
    )

    assert saved.topic_id == "AAAAAAdbzRU"
    assert store.get_watermark(TABLE) == saved
    assert store.mark_replica_position_reached(TABLE).topic_id == "AAAAAAdbzRU"


def test_a_watermark_saved_before_topic_ids_were_recorded_reads_without_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    config = alembic_config()
    with create_engine(url).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0008")
        connection.execute(text(
            "insert into sources (name, engine, onboarded_at, connector_names) "
            "values ('pg', 'postgres', '2025-01-01 00:00:00', '[]')"
        ))
        connection.execute(text(
            "insert into tables (qualified_name, source, tier, state, lake_base_path, updated_at) "
            f"values ('{TABLE}', 'pg', 1, 'BOOTSTRAPPING', '/lake', '2025-01-01 00:00:00')"
        ))
        connection.execute(text(
            "insert into bootstrap_watermarks (table_name, topic, kafka_offsets, created_at, "
            f"replica_position_reached, partition_plan) values ('{TABLE}', 't', '{{\"0\": 4}}', "
            "'2025-01-01 00:00:00', 1, '[]')"
        ))

    with StateStore.open(url) as store:
        watermark = store.get_watermark(TABLE)

    assert watermark is not None and (watermark.offsets, watermark.topic_id) == ({0: 4}, None)


def test_a_new_watermark_replaces_the_old_one(store: StateStore) -> None:
    store.save_watermark(TABLE, topic="t", offsets={0: 1}, ts_source_ms=None, source_position=None)
    store.mark_replica_position_reached(TABLE)

    second = store.save_watermark(TABLE, topic="t", offsets={0: 9}, ts_source_ms=5, source_position="p")

    assert store.get_watermark(TABLE) == second
    assert second.replica_position_reached is False


def test_watermark_needs_a_known_table_and_updates_need_a_watermark(store: StateStore) -> None:
    assert store.get_watermark(TABLE) is None
    with pytest.raises(StateStoreError, match=f"table {TABLE}: no bootstrap watermark saved"):
        store.mark_replica_position_reached(TABLE)
    with pytest.raises(UnknownTableError):
        store.save_watermark("pg.x.y", topic="t", offsets={}, ts_source_ms=None, source_position=None)


def test_applied_offsets(store: StateStore) -> None:
    assert store.get_applied_offsets(TABLE) == {}
    assert store.last_commit_instant(TABLE) is None

    store.record_applied_offsets(TABLE, {0: 10, 1: 20}, "20250101120000000")
    store.record_applied_offsets(TABLE, {1: 25}, "20250101120500000")

    assert store.get_applied_offsets(TABLE) == {0: 10, 1: 25}
    assert store.last_commit_instant(TABLE) == "20250101120500000"
    with pytest.raises(UnknownTableError):
        store.record_applied_offsets("pg.x.y", {0: 1}, "20250101120000000")


def test_reset_progress_forgets_watermark_offsets_and_freshness(store: StateStore) -> None:
    store.save_watermark(TABLE, topic="t", offsets={0: 1}, ts_source_ms=None, source_position=None)
    store.record_applied_offsets(TABLE, {0: 10}, "20250101120000000")
    store.record_freshness(TABLE, 1_000, 0)

    store.reset_progress(TABLE)

    assert store.get_watermark(TABLE) is None
    assert store.get_applied_offsets(TABLE) == {}
    assert store.get_freshness(TABLE) is None
    assert store.get_table(TABLE) is not None


def test_run_context_records_ok_with_detail(store: StateStore) -> None:
    with store.run("apply", TABLE) as run:
        run.detail["events"] = 12

    (recorded,) = store.list_runs()
    assert (recorded.command, recorded.table, recorded.outcome) == ("apply", TABLE, RunOutcome.OK)
    assert recorded.detail == {"events": 12}
    assert recorded.finished_at is not None
    assert recorded.finished_at >= recorded.started_at


def test_run_context_records_failure_and_reraises(store: StateStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_registered", {"pw-in-error"})

    with pytest.raises(ValueError, match="boom"), store.run("bootstrap", TABLE) as run:
        run.detail["partitions"] = 4
        raise ValueError("boom with pw-in-error\nsecond line")

    (recorded,) = store.list_runs(table=TABLE)
    assert recorded.outcome is RunOutcome.FAILED
    assert recorded.detail == {"partitions": 4, "error": "ValueError: boom with ***"}


def test_run_context_records_abort(store: StateStore) -> None:
    with pytest.raises(KeyboardInterrupt), store.run("run"):
        raise KeyboardInterrupt

    (recorded,) = store.list_runs()
    assert (recorded.outcome, recorded.table, recorded.detail) == (
        RunOutcome.ABORTED,
        None,
        {"error": "KeyboardInterrupt"},
    )


def test_start_and_finish_run(store: StateStore) -> None:
    first = store.start_run("validate", TABLE, {"rows": 1})
    second = store.start_run("status")
    store.finish_run(first, RunOutcome.FAILED)

    runs = store.list_runs()
    assert [r.id for r in runs] == [second, first]
    assert runs[0].outcome is None
    assert (runs[1].outcome, runs[1].detail) == (RunOutcome.FAILED, {"rows": 1})
    with pytest.raises(StateStoreError, match="run 999 does not exist"):
        store.finish_run(999, RunOutcome.OK)


def test_freshness(store: StateStore) -> None:
    measured = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    newest_ms = int((measured - timedelta(seconds=30)).timestamp() * 1000)

    store.record_freshness(TABLE, newest_ms, 5, measured_at=measured)
    freshness = store.get_freshness(TABLE)

    assert freshness is not None
    assert freshness.measured_at == measured
    assert freshness.age_seconds(measured + timedelta(seconds=10)) == pytest.approx(40.0)


def test_freshness_of_a_caught_up_table_counts_from_the_measurement(store: StateStore) -> None:
    measured = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

    store.record_freshness(TABLE, 0, 0, measured_at=measured)
    freshness = store.get_freshness(TABLE)

    assert freshness is not None
    assert freshness.age_seconds(measured + timedelta(seconds=3)) == pytest.approx(3.0)


def test_naive_datetimes_are_refused(store: StateStore) -> None:
    with pytest.raises(StateStoreError, match="naive datetime"):
        store.record_freshness(TABLE, 0, 0, measured_at=datetime(2025, 1, 1))


def test_table_statuses(store: StateStore) -> None:
    measured = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    store.transition(TABLE, TableState.BOOTSTRAPPING)
    store.record_applied_offsets(TABLE, {1: 25, 0: 10}, "20250101120500000")
    store.record_freshness(TABLE, int(measured.timestamp() * 1000) - 2_000, 3, measured_at=measured)

    (status,) = table_statuses(store, now=measured)

    assert status.to_json() == {
        "name": TABLE,
        "source": "pg",
        "state": "BOOTSTRAPPING",
        "tier": 1,
        "lake_base_path": "/lake/pg/public/orders",
        "last_commit": "20250101120500000",
        "applied_offsets": {"0": 10, "1": 25},
        "freshness_seconds": pytest.approx(2.0),
        "lag_messages": 3,
        "last_error": None,
        "updated_at": status.updated_at.isoformat(),
        "possibly_diverged": None,
    }
