"""MySQL/MariaDB preflight checks judged on recorded server values.

``MARIADB`` holds what the local stack's MariaDB 10.11 primary and replica reported; the server
settings a shared stack cannot change during a test (``log_bin``, ``binlog_format``,
``binlog_row_image``, GTID mode, binlog retention, a stopped replica thread) are only tested here.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cdc_lake.config import Source, Table
from cdc_lake.sources.base import Capture, PreflightOptions
from cdc_lake.sources.checks import CheckResult, Outcome
from cdc_lake.sources.mysql.checks import (
    MIN_BINLOG_RETENTION_SECONDS,
    MyReplicaFacts,
    MySqlFacts,
    MyTableFacts,
    check_tls,
    evaluate,
    retention_seconds,
)
from cdc_lake.sources.mysql.engine import MariaDbEngine
from cdc_lake.sources.mysql.settings import MySqlCaptureIds

PRODUCTS = MyTableFacts(
    name="app.products", exists=True, columns=("id", "sku"), primary_key=("id",), can_select=True
)
MARIADB = MySqlFacts(
    flavor="mariadb",
    user="cdc@%",
    variables={
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "gtid_binlog_pos": "0-1-16",
        "binlog_expire_logs_seconds": "604800",
        "expire_logs_days": "7.000000",
        "server_id": "1",
        "sql_mode": "STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO",
    },
    privileges=frozenset({"SELECT", "RELOAD", "REPLICATION SLAVE", "BINLOG MONITOR", "SLAVE MONITOR"}),
    tables={"app.products": PRODUCTS},
    server_ids_in_use={1: "the primary", 2: "the replica 127.0.0.1:13307"},
    replica=MyReplicaFacts(
        configured=True,
        address="127.0.0.1:13307",
        is_replica=True,
        io_running="Yes",
        sql_running="Yes",
        seconds_behind=0,
        primary="127.0.0.1:13306",
    ),
)
MYSQL = replace(
    MARIADB,
    flavor="mysql",
    variables={**MARIADB.variables, "gtid_mode": "ON", "enforce_gtid_consistency": "ON"},
    privileges=frozenset({"SELECT", "RELOAD", "REPLICATION SLAVE", "REPLICATION CLIENT"}),
)
CAPTURE = Capture(connector="cdc-lake.maria", tables=(Table(name="app.products"),), ids=MySqlCaptureIds(5401))


def check(
    name: str,
    facts: MySqlFacts = MARIADB,
    capture: Capture = CAPTURE,
    options: PreflightOptions | None = None,
) -> CheckResult:
    results = {result.name: result for result in evaluate(facts, [capture], options or PreflightOptions())}
    return results[name]


def with_variables(facts: MySqlFacts, **values: str) -> MySqlFacts:
    return replace(facts, variables={**facts.variables, **values})


@pytest.mark.parametrize("facts", [MARIADB, MYSQL], ids=["mariadb", "mysql"])
def test_healthy_sources_pass_every_check(facts: MySqlFacts) -> None:
    results = evaluate(facts, [CAPTURE], PreflightOptions())

    assert [r.name for r in results if r.outcome is not Outcome.PASS] == []


def test_binlog_off_fails() -> None:
    result = check("log_bin", with_variables(MARIADB, log_bin="OFF"))

    assert result.failed
    assert "--log-bin" in (result.fix or "")


@pytest.mark.parametrize("value", ["STATEMENT", "MIXED"])
def test_binlog_format_must_be_row(value: str) -> None:
    result = check("binlog_format", with_variables(MARIADB, binlog_format=value))

    assert result.failed
    assert result.detail == f"is {value}, Debezium needs ROW"


def test_minimal_row_image_fails() -> None:
    result = check("binlog_row_image", with_variables(MARIADB, binlog_row_image="MINIMAL"))

    assert result.failed
    assert result.detail == "is MINIMAL: events would miss unchanged columns"


def test_mysql_without_gtids_fails_and_mariadb_always_has_them() -> None:
    off = check("gtid mode", with_variables(MYSQL, gtid_mode="OFF_PERMISSIVE"))
    maria = check("gtid mode", with_variables(MARIADB, gtid_mode="OFF"))

    assert off.failed
    assert off.detail == "gtid_mode=OFF_PERMISSIVE, enforce_gtid_consistency=ON"
    assert not maria.failed
    assert "0-1-16" in maria.detail


def test_retention_reads_seconds_then_days() -> None:
    assert retention_seconds({"binlog_expire_logs_seconds": "7200", "expire_logs_days": "7"}) == 7200
    assert retention_seconds({"binlog_expire_logs_seconds": "0", "expire_logs_days": "2.5"}) == 216_000
    assert retention_seconds({"expire_logs_days": "0"}) == 0


def test_short_binlog_retention_fails_and_none_passes() -> None:
    short = check(
        "binlog retention", with_variables(MARIADB, binlog_expire_logs_seconds="3600", expire_logs_days="0")
    )
    never = check(
        "binlog retention", with_variables(MARIADB, binlog_expire_logs_seconds="0", expire_logs_days="0")
    )
    enough = check(
        "binlog retention",
        with_variables(MARIADB, binlog_expire_logs_seconds=str(MIN_BINLOG_RETENTION_SECONDS)),
    )

    assert short.failed
    assert short.detail == "1 h: an outage longer than that purges binlogs the connector needs"
    assert not never.failed
    assert not enough.failed


def test_missing_grants_are_named() -> None:
    result = check("grants", replace(MARIADB, privileges=frozenset({"SELECT"})))

    assert result.failed
    assert result.detail == "cdc@% lacks REPLICATION SLAVE, REPLICATION CLIENT, RELOAD"
    assert result.fix == "GRANT REPLICATION SLAVE, REPLICATION CLIENT, RELOAD ON *.* TO cdc@%"


def test_server_id_used_by_a_server_or_another_connector_fails() -> None:
    primary = check("server id", capture=replace(CAPTURE, ids=MySqlCaptureIds(1)))
    connector = check("server id", options=PreflightOptions(server_ids_in_use={5401: "connector other"}))

    assert primary.failed
    assert primary.detail == "already used by 1 (the primary)"
    assert connector.failed
    assert connector.detail == "already used by 5401 (connector other)"


def test_server_ids_warn_when_the_primary_refused_to_list_its_replicas() -> None:
    refused = replace(MARIADB, replicas_unlisted="SHOW SLAVE HOSTS refused: (1227, 'Access denied')")

    result = check("server id", refused)

    assert result.outcome is Outcome.WARN
    assert result.detail == (
        "5401 unused by the servers and connectors seen; replicas registered with the primary not "
        "checked: SHOW SLAVE HOSTS refused: (1227, 'Access denied')"
    )
    assert result.fix is not None and "REPLICATION MASTER ADMIN" in result.fix
    assert check("server id", replace(refused, flavor="mysql")).fix == (
        "GRANT REPLICATION SLAVE ON *.* TO cdc@% (SHOW REPLICAS), or make sure no other replica of the "
        "primary uses this server id"
    )
    assert check("server id", replace(refused), capture=replace(CAPTURE, ids=MySqlCaptureIds(1))).failed


def test_missing_or_unreadable_tables_fail() -> None:
    missing = replace(MARIADB, tables={"app.products": MyTableFacts(name="app.products")})
    unreadable = replace(MARIADB, tables={"app.products": replace(PRODUCTS, can_select=False)})

    assert check("tables", missing).detail == "not found, or not visible to cdc@%: app.products"
    assert check("tables", unreadable).detail == "cdc@% may not SELECT app.products"


def test_keyless_table_fails_unless_a_key_is_configured() -> None:
    unique_sku = replace(PRODUCTS, primary_key=(), unique_keys=(("sku",),))
    keyless = replace(MARIADB, tables={"app.products": unique_sku})
    keyed = replace(CAPTURE, tables=(Table(name="app.products", key=["sku"]),))

    assert check("primary keys", keyless).failed
    assert not check("primary keys", keyless, keyed).failed


def test_a_configured_key_no_unique_index_covers_is_refused_naming_table_and_columns() -> None:
    """Issue 34 review 7: rows sharing a configured key would be duplicate record keys in the lake."""
    keyed = replace(CAPTURE, tables=(Table(name="app.products", key=["sku"]),))

    refused = check("primary keys", MARIADB, keyed)

    assert refused.failed
    assert refused.detail.endswith("over NOT NULL columns): app.products (sku)")
    unique = replace(MARIADB, tables={"app.products": replace(PRODUCTS, unique_keys=(("sku",),))})
    assert not check("primary keys", unique, keyed).failed


@pytest.mark.parametrize(
    ("replica", "failed", "detail"),
    [
        (MyReplicaFacts(configured=True, address="h:1", error="Can't connect"), True, "h:1: Can't connect"),
        (
            MyReplicaFacts(configured=True, address="h:1"),
            True,
            "h:1 replicates from nowhere (no replication status)",
        ),
        (
            MyReplicaFacts(
                configured=True,
                address="h:1",
                is_replica=True,
                io_running="Yes",
                sql_running="No",
                last_error="Duplicate entry '1' for key 'PRIMARY'",
            ),
            True,
            "h:1 is not applying (IO thread Yes, SQL thread No): Duplicate entry '1' for key 'PRIMARY'",
        ),
        (
            MyReplicaFacts(
                configured=True,
                address="h:1",
                is_replica=True,
                io_running="Yes",
                sql_running="Yes",
                seconds_behind=3,
                primary="p:2",
            ),
            False,
            "h:1 applying from p:2, 3s behind",
        ),
    ],
)
def test_replica_reachable_and_applying(replica: MyReplicaFacts, failed: bool, detail: str) -> None:
    result = check("replica", replace(MARIADB, replica=replica))

    assert result.failed is failed
    assert result.detail == detail


@pytest.mark.parametrize(
    ("sql_mode", "missing"),
    [
        # MariaDB 10.11's default: zero dates are accepted.
        ("STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION",
         "NO_ZERO_DATE, NO_ZERO_IN_DATE"),
        ("NO_ZERO_DATE,NO_ZERO_IN_DATE", "STRICT_TRANS_TABLES"),
        ("", "NO_ZERO_DATE, NO_ZERO_IN_DATE, STRICT_TRANS_TABLES"),
    ],
)
def test_a_server_accepting_zero_dates_is_warned_about(sql_mode: str, missing: str) -> None:
    result = check("zero dates", with_variables(MARIADB, sql_mode=sql_mode))

    assert result.outcome is Outcome.WARN
    assert f"sql_mode lacks {missing}: a zero date" in result.detail
    assert "NULL, the epoch or the column default" in result.detail
    assert "SET GLOBAL sql_mode" in (result.fix or "")


def test_mysql_8_default_sql_mode_refuses_zero_dates() -> None:
    default = (
        "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
        "NO_ENGINE_SUBSTITUTION"
    )
    assert check("zero dates", with_variables(MYSQL, sql_mode=default)).outcome is Outcome.PASS


def my_source(engine: str, primary_ca: str | None, replica_ca: str | None) -> Source:
    """A MySQL/MariaDB source whose primary and replica verify TLS with these CA files (None: no TLS)."""
    servers = {
        role: {"port": port, "user": "cdc", "ssl_ca": ca}
        for role, port, ca in (("primary", 3306, primary_ca), ("replica", 3307, replica_ca))
    }
    return Source.model_validate({"name": "maria", "engine": engine, "server_id": 5401, **servers})


@pytest.mark.parametrize("engine", ["mysql", "mariadb"])
def test_a_server_without_ssl_ca_is_a_tls_warning_naming_the_setting(engine: str) -> None:
    result = check_tls(my_source(engine, None, "/etc/ssl/ca.pem"))

    assert result.outcome is Outcome.WARN
    assert result.detail.startswith("source maria: primary no ssl_ca (")
    assert "replica" not in result.detail
    assert result.fix is not None
    assert result.fix.startswith("set ssl_ca (the servers' CA file")
    assert result.fix.endswith("on sources.maria.primary")

    both = check_tls(my_source(engine, None, None))
    assert both.fix is not None and both.fix.endswith("on sources.maria.primary and sources.maria.replica")
    assert check_tls(my_source(engine, "/etc/ssl/ca.pem", "/etc/ssl/ca.pem")).outcome is Outcome.PASS


def test_the_onboarding_preflight_reports_the_tls_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = MariaDbEngine(my_source("mariadb", None, None))
    monkeypatch.setattr(engine, "read_facts", lambda captures: MARIADB)

    results = {result.name: result for result in engine.preflight([CAPTURE], PreflightOptions())}

    assert results["source tls"].outcome is Outcome.WARN
    assert "primary no ssl_ca" in results["source tls"].detail
