"""MySQL/MariaDB preflight: facts read from the primary and replica, and the checks judged from them.

Like the Postgres checks, :class:`MySqlFacts` is plain data so every check can be tested on
recorded values, including server settings a shared server cannot change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cdc_lake.sources.base import Capture, PreflightOptions, captured_keys
from cdc_lake.sources.checks import (
    CheckResult,
    check_primary_keys,
    check_replica_configured,
    check_source_tls,
    name_list,
)
from cdc_lake.sources.mysql.settings import MySqlCaptureIds, MySqlConnection
from cdc_lake.sources.settings import Connection, Source, engine_model

MIN_BINLOG_RETENTION_SECONDS = 3 * 86_400
"""Shorter retention risks a purged binlog (and a re-bootstrap) after a weekend-long outage."""

# Each needed global privilege, with the names servers report it under (MariaDB 10.5+
# reports REPLICATION CLIENT as BINLOG MONITOR).
_NEEDED_PRIVILEGES = {
    "REPLICATION SLAVE": ("REPLICATION SLAVE",),
    "REPLICATION CLIENT": ("REPLICATION CLIENT", "BINLOG MONITOR"),
    "RELOAD": ("RELOAD",),
}


@dataclass(frozen=True)
class MyTableFacts:
    """One table on the primary; ``exists`` is False when it is missing or invisible to the user.

    ``unique_keys`` holds the columns of each unique index whose columns are all NOT NULL and none a
    functional key part (the primary key's too).
    """

    name: str
    exists: bool = False
    columns: tuple[str, ...] = ()
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()
    can_select: bool = False


@dataclass(frozen=True)
class MyReplicaFacts:
    """The read replica's replication status; ``error`` is set when it could not be read."""

    configured: bool
    address: str = ""
    error: str | None = None
    is_replica: bool = False
    io_running: str = ""
    sql_running: str = ""
    last_error: str = ""
    seconds_behind: int | None = None
    primary: str = ""


@dataclass(frozen=True)
class MySqlFacts:
    """Everything the MySQL/MariaDB checks judge; ``flavor`` is ``mysql`` or ``mariadb``."""

    flavor: str
    user: str
    variables: Mapping[str, str]
    privileges: frozenset[str]
    tables: Mapping[str, MyTableFacts]
    server_ids_in_use: Mapping[int, str]
    replica: MyReplicaFacts
    replicas_unlisted: str | None = None
    """Why the replicas registered with the primary could not be listed (None: they were)."""


def evaluate(facts: MySqlFacts, captures: Sequence[Capture], options: PreflightOptions) -> list[CheckResult]:
    """Every MySQL/MariaDB check for ``captures``, in the order they are reported."""
    keys = captured_keys(captures)
    in_use = {**facts.server_ids_in_use, **options.server_ids_in_use}
    return [
        check_log_bin(facts),
        check_binlog_format(facts),
        check_binlog_row_image(facts),
        check_gtid(facts),
        check_binlog_retention(facts),
        check_zero_dates(facts),
        check_grants(facts),
        check_server_ids(facts, in_use, captures),
        check_tables(facts, keys),
        check_primary_keys(facts.tables, keys, "add a primary key, or set tables[].key in the config"),
        check_replica(facts.replica, options.replica_required),
    ]


def check_tls(source: Source) -> CheckResult:
    """Every connection requires TLS and verifies the server's certificate (``ssl_ca``), else a warning."""

    def unverified(connection: Connection) -> str | None:
        if engine_model(connection, MySqlConnection).mysql_tls():
            return None
        return "no ssl_ca (TLS neither required nor verified: credentials and rows may cross in plaintext)"

    fix = "ssl_ca (the servers' CA file; ssl_verify_identity: true checks the host name too)"
    return check_source_tls(source, unverified, fix)


def _on(value: str | None) -> bool:
    return (value or "").upper() in ("ON", "1")


def check_log_bin(facts: MySqlFacts) -> CheckResult:
    """The binary log is enabled."""
    if _on(facts.variables.get("log_bin")):
        return CheckResult.ok("log_bin", "ON")
    return CheckResult.fail(
        "log_bin", "is OFF: there is no binlog to capture", "start the server with --log-bin (restart)"
    )


def check_binlog_format(facts: MySqlFacts) -> CheckResult:
    """Rows, not statements, are logged."""
    value = facts.variables.get("binlog_format", "")
    if value.upper() == "ROW":
        return CheckResult.ok("binlog_format", "ROW")
    return CheckResult.fail(
        "binlog_format",
        f"is {value or 'unknown'}, Debezium needs ROW",
        "SET PERSIST binlog_format = 'ROW' (MariaDB: binlog_format=ROW in my.cnf) and restart clients",
    )


def check_binlog_row_image(facts: MySqlFacts) -> CheckResult:
    """Every column of every changed row is logged."""
    value = facts.variables.get("binlog_row_image", "")
    if value.upper() == "FULL":
        return CheckResult.ok("binlog_row_image", "FULL")
    return CheckResult.fail(
        "binlog_row_image",
        f"is {value or 'unknown'}: events would miss unchanged columns",
        "SET GLOBAL binlog_row_image = 'FULL' (and in my.cnf)",
    )


def check_gtid(facts: MySqlFacts) -> CheckResult:
    """GTIDs are on, so the connector can follow a failover and bootstrap can wait by position."""
    if facts.flavor == "mariadb":
        position = facts.variables.get("gtid_binlog_pos", "")
        return CheckResult.ok(
            "gtid mode", f"MariaDB GTIDs are always on (gtid_binlog_pos {position or 'empty'})"
        )
    mode = facts.variables.get("gtid_mode", "")
    consistency = facts.variables.get("enforce_gtid_consistency", "")
    if mode.upper() == "ON" and consistency.upper() == "ON":
        return CheckResult.ok("gtid mode", "gtid_mode=ON, enforce_gtid_consistency=ON")
    return CheckResult.fail(
        "gtid mode",
        f"gtid_mode={mode or 'unknown'}, enforce_gtid_consistency={consistency or 'unknown'}",
        "set enforce_gtid_consistency=ON and gtid_mode=ON (step through OFF_PERMISSIVE, ON_PERMISSIVE)",
    )


def retention_seconds(variables: Mapping[str, str]) -> int:
    """Binlog retention in seconds (0: never purged automatically)."""
    seconds = int(float(variables.get("binlog_expire_logs_seconds", "0") or "0"))
    if seconds:
        return seconds
    return int(float(variables.get("expire_logs_days", "0") or "0") * 86_400)


def check_binlog_retention(facts: MySqlFacts) -> CheckResult:
    """Binlogs are kept longer than a plausible outage of the connector."""
    seconds = retention_seconds(facts.variables)
    if seconds == 0:
        return CheckResult.ok("binlog retention", "never purged automatically (watch the disk)")
    hours = seconds / 3600
    if seconds < MIN_BINLOG_RETENTION_SECONDS:
        days = MIN_BINLOG_RETENTION_SECONDS // 86_400
        return CheckResult.fail(
            "binlog retention",
            f"{hours:g} h: an outage longer than that purges binlogs the connector needs",
            f"SET GLOBAL binlog_expire_logs_seconds = {MIN_BINLOG_RETENTION_SECONDS} (at least {days} days; "
            "on RDS: CALL mysql.rds_set_configuration('binlog retention hours', 72))",
        )
    return CheckResult.ok("binlog retention", f"{hours:g} h")


_ZERO_DATE_MODES = ("NO_ZERO_DATE", "NO_ZERO_IN_DATE")


def check_zero_dates(facts: MySqlFacts) -> CheckResult:
    """The server refuses zero dates (``0000-00-00``, ``2024-00-05``), which cannot be replicated exactly.

    Debezium sends a zero date as NULL, the epoch or the column's default, values the lake cannot tell
    from real ones, and the bootstrap refuses them (docs/type-mapping.md): a warning, since a server
    that allows them may hold none.
    """
    modes = {mode.strip().upper() for mode in facts.variables.get("sql_mode", "").split(",")}
    missing = [mode for mode in _ZERO_DATE_MODES if mode not in modes]
    if not modes & {"STRICT_TRANS_TABLES", "STRICT_ALL_TABLES"}:
        missing.append("STRICT_TRANS_TABLES")  # without a strict mode a zero date is only a warning
    if not missing:
        return CheckResult.ok("zero dates", "sql_mode refuses them (strict, NO_ZERO_DATE, NO_ZERO_IN_DATE)")
    return CheckResult.warn(
        "zero dates",
        f"sql_mode lacks {', '.join(missing)}: a zero date in a DATE, DATETIME or TIMESTAMP column "
        "reaches the lake as NULL, the epoch or the column default (Debezium), and fails the bootstrap",
        f"SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',{','.join(missing)}') (and in my.cnf), "
        "after replacing the zero dates the tables hold",
    )


def check_grants(facts: MySqlFacts) -> CheckResult:
    """The user holds the global privileges the connector needs."""
    missing = [
        needed
        for needed, names in _NEEDED_PRIVILEGES.items()
        if not any(name in facts.privileges for name in names)
    ]
    if missing:
        return CheckResult.fail(
            "grants",
            f"{facts.user} lacks {', '.join(missing)}",
            f"GRANT {', '.join(missing)} ON *.* TO {facts.user}",
        )
    return CheckResult.ok("grants", f"{facts.user} has {', '.join(_NEEDED_PRIVILEGES)}")


_LIST_REPLICAS = {
    "mariadb": ("REPLICATION MASTER ADMIN", "SHOW SLAVE HOSTS"),
    "mysql": ("REPLICATION SLAVE", "SHOW REPLICAS"),
}
"""The privilege that lets the user list the replicas registered with the primary, per flavor."""


def check_server_ids(
    facts: MySqlFacts, in_use: Mapping[int, str], captures: Sequence[Capture]
) -> CheckResult:
    """Each connector's server id differs from every server and binlog client of this source; a warning
    when the primary refused to list its registered replicas (their ids were not compared)."""
    server_ids = [MySqlCaptureIds.of(capture.ids).server_id for capture in captures]
    clashes = [
        f"{server_id} ({in_use[server_id]})" for server_id in server_ids if server_id and server_id in in_use
    ]
    if clashes:
        return CheckResult.fail(
            "server id",
            f"already used by {name_list(clashes)}",
            "set server_id in the source config to an id no server or connector of this source uses",
        )
    ids = ", ".join(str(server_id) for server_id in server_ids)
    if facts.replicas_unlisted is not None:
        privilege, query = _LIST_REPLICAS[facts.flavor]
        return CheckResult.warn(
            "server id",
            f"{ids} unused by the servers and connectors seen; replicas registered with the primary not "
            f"checked: {facts.replicas_unlisted}",
            f"GRANT {privilege} ON *.* TO {facts.user} ({query}), or make sure no other replica of the "
            "primary uses this server id",
        )
    return CheckResult.ok("server id", f"{ids} unused")


def check_tables(facts: MySqlFacts, keys: Mapping[str, tuple[str, ...]]) -> CheckResult:
    """Every table exists and the user may SELECT it."""
    missing = [name for name in keys if not facts.tables[name].exists]
    if missing:
        return CheckResult.fail(
            "tables",
            f"not found, or not visible to {facts.user}: {name_list(missing)}",
            f"create the tables, fix their names in the config, or GRANT SELECT ON them TO {facts.user}",
        )
    denied = [name for name in keys if not facts.tables[name].can_select]
    if denied:
        return CheckResult.fail(
            "tables",
            f"{facts.user} may not SELECT {name_list(denied)}",
            f"GRANT SELECT ON <each table> TO {facts.user}",
        )
    return CheckResult.ok("tables", f"{len(keys)} found and readable")


def check_replica(replica: MyReplicaFacts, required: bool) -> CheckResult:
    """The read replica answers and both its replication threads run."""
    name = "replica"
    unconfigured = check_replica_configured(replica.configured, required)
    if unconfigured is not None:
        return unconfigured
    if replica.error is not None:
        return CheckResult.fail(
            name,
            f"{replica.address}: {replica.error}",
            "start the replica, fix replica: in the config, or grant the user REPLICATION CLIENT there",
        )
    if not replica.is_replica:
        return CheckResult.fail(
            name,
            f"{replica.address} replicates from nowhere (no replication status)",
            "point replica: at a replica of the primary",
        )
    if replica.io_running.upper() != "YES" or replica.sql_running.upper() != "YES":
        error = f": {replica.last_error}" if replica.last_error else ""
        return CheckResult.fail(
            name,
            f"{replica.address} is not applying (IO thread {replica.io_running}, "
            f"SQL thread {replica.sql_running}){error}",
            "fix the replication error and START SLAVE / START REPLICA on the replica",
        )
    behind = "unknown" if replica.seconds_behind is None else f"{replica.seconds_behind}s"
    return CheckResult.ok(name, f"{replica.address} applying from {replica.primary}, {behind} behind")
