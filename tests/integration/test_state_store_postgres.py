"""The state store on the local stack's Postgres: migrations, row locks and JSON columns."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from cdc_lake.config import Config
from cdc_lake.exceptions import StateStoreError
from cdc_lake.stack.service import HOST, StackCredentials
from cdc_lake.state import BootstrapPartition, StateStore, TableState
from cdc_lake.state.locks import LockPurpose, table_lock

pytestmark = pytest.mark.integration


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh database on the stack's Postgres primary, dropped afterwards."""
    creds = StackCredentials()
    port = Config.default().stack.ports.postgres_primary
    name = f"cdc_lake_state_{uuid.uuid4().hex[:8]}"
    admin = dict(host=HOST, port=port, user=creds.db_user, password=creds.db_password, dbname="postgres")
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"postgresql+psycopg://{creds.db_user}:{creds.db_password}@{HOST}:{port}/{name}"
    finally:
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_state_store_on_postgres(postgres_url: str) -> None:
    StateStore.open(postgres_url).close()
    with StateStore.open(postgres_url) as store:
        store.upsert_source("pg", "postgres", ["cdc-lake-pg"])
        store.upsert_table("pg.public.orders", "pg", 1, "s3a://lake/pg/public/orders")
        store.transition("pg.public.orders", TableState.BOOTSTRAPPING)
        store.save_watermark(
            "pg.public.orders",
            topic="pg.public.orders",
            offsets={0: 5, 1: 9},
            ts_source_ms=1_700_000_000_000,
            source_position="0/16B3748",
            partitions=[BootstrapPartition(0, '"id" < 10'), BootstrapPartition(1, '"id" >= 10')],
        )
        watermark = store.mark_partition_done("pg.public.orders", 0)
        store.record_applied_offsets("pg.public.orders", {0: 5, 1: 9}, "20250101120000000")
        with store.run("bootstrap", "pg.public.orders") as run:
            run.detail["rows"] = 10

        assert [p.index for p in watermark.pending_partitions] == [1]
        assert store.get_applied_offsets("pg.public.orders") == {0: 5, 1: 9}
        assert store.list_runs()[0].detail == {"rows": 10}
        table = store.get_table("pg.public.orders")
        assert table is not None
        assert table.state is TableState.BOOTSTRAPPING
        assert table.updated_at.tzinfo is not None


def test_an_apply_lock_lost_with_its_connection_is_caught_before_a_commit(postgres_url: str) -> None:
    # Issue 20, finding 6: a session lock dies with its connection (a state database restart, a pooler);
    # the holder runs on, and another writer can take it.  verify() is what the runner calls right
    # before the Hudi commit.
    creds = StackCredentials()
    database = postgres_url.rsplit("/", 1)[1]
    port = Config.default().stack.ports.postgres_primary
    admin = dict(host=HOST, port=port, user=creds.db_user, password=creds.db_password, dbname=database)
    with table_lock(postgres_url, LockPurpose.APPLY, "pg.s.t") as lock:
        assert lock
        lock.verify()
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(
                "select pg_terminate_backend(pid) from pg_locks "
                "where locktype = 'advisory' and pid <> pg_backend_pid()"
            )
        with table_lock(postgres_url, LockPurpose.APPLY, "pg.s.t") as second:
            assert second, "the lost lock is free for another writer"
            second.verify()
            with pytest.raises(StateStoreError, match=r"the apply lock of pg\.s\.t was lost"):
                lock.verify()
