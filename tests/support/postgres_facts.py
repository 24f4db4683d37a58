"""What the local stack's Postgres primary and replica reported to the preflight checks.

``HEALTHY`` holds the facts of a fresh database with a tier-0 table (``CUSTOMERS``) and a shared one
(``ORDERS``); a test changes the one fact it is about (``dataclasses.replace``).
"""

from __future__ import annotations

from cdc_lake.sources.postgres.checks import (
    PgHeartbeatFacts,
    PgReplicaFacts,
    PgRewriteLogFacts,
    PgTableFacts,
    PostgresFacts,
)

CUSTOMERS = PgTableFacts(
    name="shop.customers",
    kind="r",
    columns=("id", "name"),
    primary_key=("id",),
    replica_identity="d",
    toastable=(),
    can_select=True,
    owned=True,
)
ORDERS = PgTableFacts(
    name="shop.orders",
    kind="r",
    columns=("id", "amount"),
    primary_key=("id",),
    replica_identity="d",
    toastable=("amount",),
    can_select=True,
    owned=True,
)
HEALTHY = PostgresFacts(
    database="app",
    user="cdc",
    settings={
        "wal_level": "logical",
        "max_replication_slots": "20",
        "max_wal_senders": "20",
        "max_slot_wal_keep_size": "4096",
    },
    slots_used=1,
    wal_senders_used=1,
    superuser=False,
    replication_role=True,
    can_create_in_database=True,
    heartbeat=PgHeartbeatFacts(
        name="cdc_lake.heartbeat",
        exists=False,
        can_write=False,
        schema_exists=False,
        can_create_in_schema=False,
    ),
    rewrite_log=PgRewriteLogFacts(table_exists=True, trigger_enabled=True, can_read=True),
    tables={"shop.customers": CUSTOMERS, "shop.orders": ORDERS},
    replica=PgReplicaFacts(
        configured=True,
        address="127.0.0.1:15433",
        in_recovery=True,
        receive_lsn="0/3000148",
        replay_lsn="0/3000148",
        replay_paused=False,
        lag_bytes=0,
    ),
)
