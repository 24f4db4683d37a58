"""Postgres preflight checks judged on recorded catalog values.

``HEALTHY`` (``tests/support/postgres_facts.py``) is what the local stack's primary and replica
reported for a fresh database with a tier-0 and a shared table; each test changes the one fact a
check is about.  Settings that a
shared server cannot change during a test run (``wal_level``, ``max_replication_slots``,
``max_wal_senders``, ``max_slot_wal_keep_size``, paused replay) are only tested here; the
integration tests provoke the rest on the real stack.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.postgres_facts import HEALTHY, ORDERS

from cdc_lake.config import Source, Table
from cdc_lake.sources.base import Capture, PreflightOptions
from cdc_lake.sources.checks import CheckResult, Outcome
from cdc_lake.sources.postgres.checks import (
    PgPublicationFacts,
    PgReplicaFacts,
    PgRewriteLogFacts,
    PgSlotFacts,
    PostgresFacts,
    check_tls,
    evaluate,
)
from cdc_lake.sources.postgres.engine import PostgresEngine
from cdc_lake.sources.postgres.settings import PostgresCaptureIds

TIER0 = Capture(
    connector="cdc-lake.pg.tier0.shop.customers",
    tables=(Table(name="shop.customers", tier=0),),
    ids=PostgresCaptureIds(
        "cdc_lake_pg_t0_shop_customers_1a2b3c4d", "cdc_lake_pg_t0_shop_customers_1a2b3c4d"
    ),
)
SHARED = Capture(
    connector="cdc-lake.pg",
    tables=(Table(name="shop.orders"),),
    ids=PostgresCaptureIds("cdc_lake_pg", "cdc_lake_pg"),
)
CAPTURES = [TIER0, SHARED]


def check(
    name: str,
    facts: PostgresFacts = HEALTHY,
    captures: list[Capture] = CAPTURES,
    options: PreflightOptions | None = None,
) -> CheckResult:
    results = {result.name: result for result in evaluate(facts, captures, options or PreflightOptions())}
    return results[name]


def with_table(facts: PostgresFacts, **changes: object) -> PostgresFacts:
    return replace(facts, tables={**facts.tables, "shop.orders": replace(ORDERS, **changes)})  # type: ignore[arg-type]


def test_healthy_source_passes_every_check_but_warns_about_toast() -> None:
    results = evaluate(HEALTHY, CAPTURES, PreflightOptions())

    assert [r.name for r in results if r.outcome is not Outcome.PASS] == ["replica identity"]
    assert check("replica identity").outcome is Outcome.WARN
    assert "shop.orders (amount)" in check("replica identity").detail


def test_wal_level_replica_fails_with_the_fix() -> None:
    facts = replace(HEALTHY, settings={**HEALTHY.settings, "wal_level": "replica"})

    result = check("wal_level", facts)

    assert result.failed
    assert result.detail == "is replica, logical decoding needs logical"
    assert "wal_level = logical" in (result.fix or "")


def test_no_free_replication_slot_for_the_new_connectors() -> None:
    facts = replace(HEALTHY, slots_used=19)

    result = check("replication slots", facts)

    assert result.failed
    assert result.detail == "19 of 20 used, 2 needed"
    assert "at least 21" in (result.fix or "")


def test_existing_slots_need_no_room() -> None:
    slot = PgSlotFacts(
        name="cdc_lake_pg", slot_type="logical", plugin="pgoutput", database="app", active=False
    )
    facts = replace(HEALTHY, slots_used=19, slots={"cdc_lake_pg": slot})

    assert not check("replication slots", facts).failed


def test_no_free_wal_sender() -> None:
    facts = replace(HEALTHY, wal_senders_used=20)

    result = check("wal senders", facts)

    assert result.failed
    assert result.detail == "20 of 20 used, 2 needed"


def test_a_streaming_registered_connector_needs_no_new_wal_sender() -> None:
    slot = PgSlotFacts(
        name="cdc_lake_pg", slot_type="logical", plugin="pgoutput", database="app", active=True
    )
    facts = replace(HEALTHY, wal_senders_used=19, slots={"cdc_lake_pg": slot})

    result = check("wal senders", facts, options=PreflightOptions(registered=frozenset({"cdc-lake.pg"})))

    assert not result.failed
    assert result.detail == "19 of 20 used, 1 needed"


def test_unbounded_slot_wal_fails() -> None:
    facts = replace(HEALTHY, settings={**HEALTHY.settings, "max_slot_wal_keep_size": "-1"})

    result = check("max_slot_wal_keep_size", facts)

    assert result.failed
    assert "fill the primary's disk" in result.detail


def test_user_without_replication_fails_and_superuser_passes() -> None:
    denied = check("replication privilege", replace(HEALTHY, replication_role=False))
    superuser = check("replication privilege", replace(HEALTHY, replication_role=False, superuser=True))

    assert denied.failed
    assert denied.detail == "cdc lacks REPLICATION"
    assert 'ALTER ROLE "cdc" WITH REPLICATION' in (denied.fix or "")
    assert not superuser.failed


@pytest.mark.parametrize(
    ("kind", "detail"),
    [
        (None, "not found in database app: shop.orders"),
        ("p", "partitioned tables are not supported: shop.orders"),
        ("v", "not tables (views or other relations): shop.orders"),
    ],
)
def test_tables_must_exist_as_ordinary_tables(kind: str | None, detail: str) -> None:
    result = check("tables", with_table(HEALTHY, kind=kind))

    assert result.failed
    assert result.detail == detail


def test_select_privilege_names_the_table() -> None:
    result = check("select privilege", with_table(HEALTHY, can_select=False))

    assert result.failed
    assert result.detail == "cdc may not SELECT shop.orders"


def test_table_without_primary_key_fails() -> None:
    result = check("primary keys", with_table(HEALTHY, primary_key=()))

    assert result.failed
    assert result.detail == "no primary key and no configured key: shop.orders"


def test_configured_key_stands_in_for_a_primary_key_if_its_columns_exist() -> None:
    facts = with_table(HEALTHY, primary_key=(), unique_keys=(("id",),))
    keyed = [TIER0, replace(SHARED, tables=(Table(name="shop.orders", key=["id"]),))]
    bad = [TIER0, replace(SHARED, tables=(Table(name="shop.orders", key=["order_id"]),))]

    assert not check("primary keys", facts, keyed).failed
    assert (
        check("primary keys", facts, bad).detail
        == "configured key columns not in the table: shop.orders (order_id)"
    )


def test_a_configured_key_no_unique_index_covers_is_refused_naming_table_and_columns() -> None:
    """Issue 34 review 7: the bootstrap's bulk insert stores every row, so rows sharing a configured key
    would be duplicate record keys in the lake.  The key must hold the primary key or a unique index
    over NOT NULL columns (the reader leaves out partial, expression and nullable indexes)."""
    facts = with_table(HEALTHY, columns=("id", "code", "amount"))

    refused = check("primary keys", facts, _keyed_by("code", "amount"))

    assert refused.failed
    assert refused.detail == (
        "configured key not unique in the source (it holds neither the primary key nor a unique index "
        "over NOT NULL columns): shop.orders (code, amount)"
    )
    assert refused.fix is not None and "CREATE UNIQUE INDEX" in refused.fix
    unique = with_table(HEALTHY, columns=("id", "code", "amount"), unique_keys=(("code",),))
    assert check("primary keys", unique, _keyed_by("code", "amount")).outcome is Outcome.PASS
    assert check("primary keys", unique, _keyed_by("amount")).failed
    assert check("primary keys", facts, _keyed_by("amount", "id")).outcome is Outcome.PASS


def test_keyless_table_with_default_identity_fails_unless_full_is_set() -> None:
    facts = with_table(HEALTHY, primary_key=())
    keyed = [TIER0, replace(SHARED, tables=(Table(name="shop.orders", key=["id"]),))]

    refused = check("replica identity", facts, keyed)
    fixed = check("replica identity", facts, keyed, PreflightOptions(replica_identity_full=True))

    assert refused.failed
    assert refused.detail == "updates and deletes would have no old key: shop.orders (DEFAULT)"
    assert fixed.outcome is Outcome.PASS
    assert fixed.detail == "will set FULL on shop.orders"


def test_replica_identity_nothing_fails() -> None:
    result = check("replica identity", with_table(HEALTHY, replica_identity="n"))

    assert result.failed
    assert "shop.orders (NOTHING)" in result.detail


def test_setting_full_needs_ownership() -> None:
    result = check(
        "replica identity",
        with_table(HEALTHY, owned=False),
        options=PreflightOptions(replica_identity_full=True),
    )

    assert result.failed
    assert "does not own: shop.orders" in result.detail


@pytest.mark.parametrize("identity", ["f", "i"])
def test_full_or_index_identity_passes(identity: str) -> None:
    assert check("replica identity", with_table(HEALTHY, replica_identity=identity)).outcome is Outcome.PASS


@pytest.mark.parametrize(
    ("publication", "detail"),
    [
        (
            PgPublicationFacts("cdc_lake_pg", True, ("insert", "update", "delete"), frozenset(), True),
            "cdc_lake_pg exists FOR ALL TABLES",
        ),
        (
            PgPublicationFacts("cdc_lake_pg", False, ("insert", "update", "delete"), frozenset(), False),
            "cdc_lake_pg exists and is owned by another role",
        ),
        (
            PgPublicationFacts("cdc_lake_pg", False, ("insert",), frozenset(), True),
            "cdc_lake_pg publishes only insert",
        ),
    ],
)
def test_existing_publication_we_cannot_use(publication: PgPublicationFacts, detail: str) -> None:
    result = check("publication", replace(HEALTHY, publications={"cdc_lake_pg": publication}))

    assert result.failed
    assert result.detail == detail


def test_publication_needs_create_on_the_database_and_owned_tables() -> None:
    no_create = check("publication", replace(HEALTHY, can_create_in_database=False))
    not_owner = check("publication", with_table(HEALTHY, owned=False))

    assert no_create.failed
    assert "cdc lacks CREATE on database app" in no_create.detail
    assert not_owner.failed
    assert "cdc does not own shop.orders" in not_owner.detail


def test_existing_publication_with_our_tables_passes() -> None:
    publication = PgPublicationFacts(
        "cdc_lake_pg", False, ("insert", "update", "delete"), frozenset({"shop.orders"}), True
    )

    result = check("publication", replace(HEALTHY, publications={"cdc_lake_pg": publication}))

    assert not result.failed
    assert "cdc_lake_pg exists" in result.detail


def test_heartbeat_table_must_be_writable_or_creatable() -> None:
    unwritable = replace(HEALTHY.heartbeat, exists=True, schema_exists=True, can_write=False)
    uncreatable = replace(HEALTHY.heartbeat, schema_exists=True, can_create_in_schema=False)

    assert check("heartbeat table", replace(HEALTHY, heartbeat=unwritable)).failed
    assert check("heartbeat table", replace(HEALTHY, heartbeat=uncreatable)).failed
    assert check("heartbeat table").detail == "cdc_lake.heartbeat will be created"


def test_an_unlogged_table_fails_the_tables_check_naming_it() -> None:
    found = check("tables", with_table(HEALTHY, unlogged=True))

    assert found.failed
    assert "UNLOGGED tables are not logically decoded" in found.detail and "shop.orders" in found.detail
    assert found.fix is not None and "SET LOGGED" in found.fix


def test_table_rewrites_are_logged_or_a_superuser_will_log_them_else_a_warning() -> None:
    missing = PgRewriteLogFacts(table_exists=False, trigger_enabled=False, can_read=False)
    disabled = replace(HEALTHY.rewrite_log, trigger_enabled=False)
    unreadable = replace(HEALTHY.rewrite_log, can_read=False)
    assert check("table rewrite log").outcome is Outcome.PASS
    assert check("table rewrite log").detail == "cdc_lake.table_rewrites and its event trigger exist"
    created = check("table rewrite log", replace(HEALTHY, rewrite_log=missing, superuser=True))
    assert created.outcome is Outcome.PASS and "will be created" in created.detail
    for gap in (missing, disabled):
        warned = check("table rewrite log", replace(HEALTHY, rewrite_log=gap))
        assert warned.outcome is Outcome.WARN, gap
        assert "USING" in warned.detail and "cdc" in warned.detail
        assert warned.fix is not None and "docs/schema-changes.md" in warned.fix
    refused = check("table rewrite log", replace(HEALTHY, rewrite_log=unreadable))
    assert refused.failed
    grants = 'GRANT USAGE ON SCHEMA cdc_lake TO "cdc"; GRANT SELECT ON cdc_lake.table_rewrites TO "cdc"'
    assert refused.fix == grants


@pytest.mark.parametrize(
    ("slot", "problem"),
    [
        (PgSlotFacts("cdc_lake_pg", "physical", None, None, False), "cdc_lake_pg is a physical slot"),
        (
            PgSlotFacts("cdc_lake_pg", "logical", "test_decoding", "app", False),
            "cdc_lake_pg exists with plugin test_decoding",
        ),
        (
            PgSlotFacts("cdc_lake_pg", "logical", "pgoutput", "other", False),
            "cdc_lake_pg exists on database other",
        ),
        (
            PgSlotFacts("cdc_lake_pg", "logical", "pgoutput", "app", True),
            "cdc_lake_pg is in use by another client",
        ),
    ],
)
def test_slot_belonging_to_someone_else_fails(slot: PgSlotFacts, problem: str) -> None:
    result = check("replication slot", replace(HEALTHY, slots={"cdc_lake_pg": slot}))

    assert result.failed
    assert result.detail == f"belongs to someone else: {problem}"


def test_our_own_slot_is_resumed() -> None:
    slot = PgSlotFacts("cdc_lake_pg", "logical", "pgoutput", "app", True)
    facts = replace(HEALTHY, slots={"cdc_lake_pg": slot})

    result = check("replication slot", facts, options=PreflightOptions(registered=frozenset({"cdc-lake.pg"})))

    assert not result.failed
    assert "resumes from cdc_lake_pg" in result.detail


@pytest.mark.parametrize(
    ("replica", "required", "failed", "detail"),
    [
        (
            PgReplicaFacts(configured=False),
            True,
            True,
            "no replica configured: bootstrap reads from a replica",
        ),
        (
            PgReplicaFacts(configured=False),
            False,
            False,
            "none configured; bootstrap.allow_primary_reads is on",
        ),
        (
            PgReplicaFacts(configured=True, address="h:1", error="connection refused"),
            True,
            True,
            "h:1 unreachable: connection refused",
        ),
        (
            PgReplicaFacts(configured=True, address="h:1", in_recovery=False),
            True,
            True,
            "h:1 is not a standby (pg_is_in_recovery() is false)",
        ),
        (
            PgReplicaFacts(configured=True, address="h:1", in_recovery=True, receive_lsn=None),
            True,
            True,
            "h:1 receives no WAL from a primary",
        ),
        (
            PgReplicaFacts(
                configured=True, address="h:1", in_recovery=True, receive_lsn="0/1", replay_paused=True
            ),
            True,
            True,
            "h:1 has WAL replay paused",
        ),
        (
            PgReplicaFacts(
                configured=True, address="h:1", in_recovery=True, receive_lsn="0/1", lag_bytes=512
            ),
            True,
            False,
            "h:1 replaying, 512 bytes behind",
        ),
    ],
)
def test_replica_reachable_and_replaying(
    replica: PgReplicaFacts, required: bool, failed: bool, detail: str
) -> None:
    result = check(
        "replica", replace(HEALTHY, replica=replica), options=PreflightOptions(replica_required=required)
    )

    assert result.failed is failed
    assert result.detail == detail


def _keyed_by(*key: str) -> list[Capture]:
    return [TIER0, replace(SHARED, tables=(Table(name="shop.orders", key=list(key)),))]


def test_key_not_primary_key_with_default_identity_is_refused_by_name() -> None:
    facts = with_table(HEALTHY, columns=("id", "code", "amount"), toastable=())

    refused = check("replica identity", facts, _keyed_by("code"))
    fixed = check("replica identity", facts, _keyed_by("code"), PreflightOptions(replica_identity_full=True))

    assert refused.failed
    assert refused.detail == (
        "configured key is not the replica identity, so key changes and deletes would not carry the old "
        "key: shop.orders (key code; identity DEFAULT = primary key id)"
    )
    assert refused.fix is not None and "REPLICA IDENTITY FULL" in refused.fix
    assert "--replica-identity-full" in refused.fix
    assert fixed.outcome is Outcome.PASS
    assert fixed.detail == "will set FULL on shop.orders"


def test_key_not_primary_key_passes_with_full_or_an_index_over_exactly_the_key() -> None:
    full = with_table(HEALTHY, replica_identity="f")
    on_key = with_table(HEALTHY, replica_identity="i", identity_index=("code",), toastable=())
    on_other = with_table(HEALTHY, replica_identity="i", identity_index=("code", "id"), toastable=())

    assert check("replica identity", full, _keyed_by("code")).outcome is Outcome.PASS
    assert check("replica identity", on_key, _keyed_by("code")).outcome is Outcome.PASS
    refused = check("replica identity", on_other, _keyed_by("code"))
    assert refused.failed
    assert "shop.orders (key code; identity USING INDEX on code, id)" in refused.detail


def test_key_equal_to_the_primary_key_in_another_order_needs_nothing() -> None:
    facts = with_table(HEALTHY, primary_key=("id", "code"), toastable=())

    assert check("replica identity", facts, _keyed_by("code", "id")).outcome is Outcome.PASS


def pg_source(primary: str | None, replica: str | bool | None = False) -> Source:
    """A Postgres source whose primary (and replica, unless ``replica`` is False) use these sslmodes."""
    server = {"user": "cdc", "database": "app"}
    servers: dict[str, object] = {"primary": {**server, "port": 5432, "sslmode": primary}}
    if replica is not False:
        servers["replica"] = {**server, "port": 5433, "sslmode": replica}
    return Source.model_validate({"name": "pg", "engine": "postgres", **servers})


@pytest.mark.parametrize("mode", [None, "disable", "allow", "prefer", "require"])
def test_unverified_tls_to_the_primary_is_a_warning_naming_the_setting(mode: str | None) -> None:
    result = check_tls(pg_source(mode, "verify-full"))

    assert result.outcome is Outcome.WARN
    assert result.detail.startswith(f"source pg: primary sslmode {mode or 'unset'} (")
    assert "replica" not in result.detail
    assert result.fix == (
        "set sslmode: verify-full and sslrootcert (the servers' CA file) on sources.pg.primary"
    )


def test_unverified_tls_names_every_server_and_verified_tls_passes() -> None:
    both = check_tls(pg_source(None, "require"))
    assert both.outcome is Outcome.WARN
    assert "primary sslmode unset" in both.detail and "replica sslmode require" in both.detail
    assert both.fix is not None and both.fix.endswith("on sources.pg.primary and sources.pg.replica")

    assert check_tls(pg_source("verify-full", "verify-ca")).outcome is Outcome.PASS
    assert check_tls(pg_source("verify-full")).outcome is Outcome.PASS


def test_the_onboarding_preflight_reports_the_tls_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = PostgresEngine(pg_source("require"))
    monkeypatch.setattr(engine, "read_facts", lambda captures: HEALTHY)

    results = {result.name: result for result in engine.preflight(CAPTURES, PreflightOptions())}

    assert results["source tls"].outcome is Outcome.WARN
    assert "primary sslmode require" in results["source tls"].detail


def test_toastable_arrays_debezium_cannot_send_unchanged_are_refused_by_name() -> None:
    """Issue 34 review 2: an unchanged TOASTed smallint[] (and the other measured arrays) stops the
    connector under REPLICA IDENTITY DEFAULT; uuid[], int[] and text[] have placeholders."""
    arrays = (
        ("a_s", "int2"),
        ("a_uuid", "uuid"),
        ("a_int", "int4"),
        ("a_tstz", "timestamptz"),
        ("a_t", "text"),
    )
    facts = with_table(HEALTHY, toastable_arrays=arrays)

    refused = check("TOASTed arrays", facts)

    assert refused.failed
    assert refused.detail.endswith("shop.orders (a_s (int2[]), a_tstz (timestamptz[]))")
    assert (
        refused.fix is not None
        and "--replica-identity-full" in refused.fix
        and "STORAGE PLAIN" in refused.fix
    )
    full = with_table(HEALTHY, toastable_arrays=arrays, replica_identity="f")
    assert check("TOASTed arrays", full).outcome is Outcome.PASS
    set_full = PreflightOptions(replica_identity_full=True)
    assert check("TOASTed arrays", facts, options=set_full).outcome is Outcome.PASS
    index = with_table(HEALTHY, toastable_arrays=arrays, replica_identity="i", identity_index=("id",))
    assert check("TOASTed arrays", index).failed
    # A column left out of the table's columns list is not captured.
    listed = [TIER0, replace(SHARED, tables=(Table(name="shop.orders", columns=["id", "a_uuid"]),))]
    assert check("TOASTed arrays", facts, listed).outcome is Outcome.PASS
