"""The MySQL family's preflight: the primary's and replica's facts, read once and judged.

:class:`MySqlPreflight` reads everything :func:`~cdc_lake.sources.mysql.checks.evaluate` judges
(binlog variables, the user's privileges, the captured tables, the server ids in use, the
replica's replication status) and checks the connector's truststore; it changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pymysql
from pymysql.cursors import DictCursor

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.base import Capture, PreflightOptions
from cdc_lake.sources.checks import CheckResult
from cdc_lake.sources.mysql.checks import MyReplicaFacts, MySqlFacts, MyTableFacts, check_tls, evaluate
from cdc_lake.sources.mysql.connection import MySqlBase, quote_table, status_field
from cdc_lake.sources.mysql.tls import truststore_password

_VARIABLES = (
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "gtid_mode",
    "enforce_gtid_consistency",
    "gtid_binlog_pos",
    "binlog_expire_logs_seconds",
    "expire_logs_days",
    "server_id",
    "sql_mode",
)
_ACCESS_DENIED = (1142, 1143)  # table / column access denied
_NO_SUCH_TABLE = 1146


class MySqlPreflight(MySqlBase):
    """The MySQL family's preflight role: read the facts, judge them with the checks."""

    replica_hosts_query = "SHOW REPLICAS"

    def judge_primary(
        self, captures: Sequence[Capture], options: PreflightOptions
    ) -> tuple[str, list[CheckResult]]:
        """The connector's truststore and the MySQL/MariaDB checks, judged on the facts read."""
        facts = self.read_facts(captures)
        connected = f"{self.address(self.source.primary)} as {facts.user}"
        checks = [check_tls(self.source), *self._truststore_check(), *evaluate(facts, captures, options)]
        return connected, checks

    def _truststore_check(self) -> list[CheckResult]:
        """With TLS, the connector's truststore password is in the environment (nothing to check without)."""
        primary = self.settings.primary
        if not primary.mysql_tls():
            return []
        try:
            truststore_password(primary, "primary")
        except SourceEngineError as exc:
            return [
                CheckResult.fail(
                    "connector truststore",
                    str(exc),
                    f"export {primary.ssl_truststore_password_env} here and on the Connect workers",
                )
            ]
        return [CheckResult.ok("connector truststore", primary.truststore_path())]

    def read_facts(self, captures: Sequence[Capture]) -> MySqlFacts:
        """Everything the checks judge, read from the primary and the replica."""
        names = [table.name for capture in captures for table in capture.tables]
        with self._connect() as conn, conn.cursor() as cur:
            placeholders = ", ".join(["%s"] * len(_VARIABLES))
            cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})", _VARIABLES)
            variables = {str(name): str(value) for name, value in cur.fetchall()}
            cur.execute("SELECT CURRENT_USER()")
            user = str(cur.fetchone()[0])
            account, _, host = user.rpartition("@")
            cur.execute(
                "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = %s",
                (f"'{account}'@'{host}'",),
            )
            privileges = frozenset(str(row[0]).upper() for row in cur.fetchall())
            tables = _table_facts(cur, names)
            in_use = {int(variables.get("server_id", "0")): "the primary"}
            hosts, unlisted = _replica_hosts(cur, self.replica_hosts_query)
            in_use.update(hosts)
        replica, replica_server_id = self._replica_facts()
        if replica_server_id is not None:
            in_use[replica_server_id] = f"the replica {replica.address}"
        return MySqlFacts(
            flavor=self.flavor,
            user=user,
            variables=variables,
            privileges=privileges,
            tables=tables,
            server_ids_in_use=in_use,
            replica=replica,
            replicas_unlisted=unlisted,
        )

    def _replica_facts(self) -> tuple[MyReplicaFacts, int | None]:
        """The replica's replication status and its server id (None when unreachable)."""
        replica = self.source.replica
        if replica is None:
            return MyReplicaFacts(configured=False), None
        address = self.address(replica)
        try:
            with self._connect("replica") as conn, conn.cursor(DictCursor) as cur:
                cur.execute("SELECT @@server_id AS id")
                server_id = int(cur.fetchone()["id"])
                cur.execute(self.replica_status_query)
                status = cur.fetchone()
        except SourceEngineError as exc:
            return MyReplicaFacts(configured=True, address=address, error=str(exc).split(": ", 2)[-1]), None
        if not status:
            return MyReplicaFacts(configured=True, address=address), server_id
        behind = status_field(status, "Seconds_Behind_Source", "Seconds_Behind_Master")
        errors = [status_field(status, key) for key in ("Last_SQL_Error", "Last_IO_Error", "Last_Error")]
        facts = MyReplicaFacts(
            configured=True,
            address=address,
            is_replica=True,
            io_running=str(status_field(status, "Replica_IO_Running", "Slave_IO_Running")),
            sql_running=str(status_field(status, "Replica_SQL_Running", "Slave_SQL_Running")),
            last_error=next((str(error) for error in errors if error), ""),
            seconds_behind=None if behind in (None, "") else int(str(behind)),
            primary=f"{status_field(status, 'Source_Host', 'Master_Host')}:"
            f"{status_field(status, 'Source_Port', 'Master_Port')}",
        )
        return facts, server_id


def _table_facts(cur: Any, names: Sequence[str]) -> dict[str, MyTableFacts]:
    facts = {}
    for name in names:
        database, _, table = name.partition(".")
        cur.execute(
            "SELECT COLUMN_NAME, COLUMN_KEY FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (database, table),
        )
        columns = cur.fetchall()
        cur.execute(
            "SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (database, table),
        )
        kind = cur.fetchone()
        if kind is None or kind[0] != "BASE TABLE":
            facts[name] = MyTableFacts(name=name)
            continue
        unique = _unique_indexes(cur, database, table)
        facts[name] = MyTableFacts(
            name=name,
            exists=True,
            columns=tuple(str(row[0]) for row in columns),
            primary_key=tuple(column for column, _ in unique.get("PRIMARY", [])),
            unique_keys=tuple(
                tuple(column for column, _ in parts)
                for parts in unique.values()
                if all(column and not nullable for column, nullable in parts)
            ),
            can_select=_can_select(cur, name),
        )
    return facts


def _unique_indexes(cur: Any, database: str, table: str) -> dict[str, list[tuple[str, bool]]]:
    """Each unique index of the table (``PRIMARY``: the primary key) with its columns in order, each with
    whether it is nullable; a functional key part has no column name."""
    cur.execute(
        "SELECT INDEX_NAME, COLUMN_NAME, NULLABLE FROM information_schema.STATISTICS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        (database, table),
    )
    indexes: dict[str, list[tuple[str, bool]]] = {}
    for index, column, nullable in cur.fetchall():
        indexes.setdefault(str(index), []).append((str(column or ""), str(nullable or "") == "YES"))
    return indexes


def _can_select(cur: Any, qualified: str) -> bool:
    try:
        cur.execute(f"SELECT 1 FROM {quote_table(qualified)} LIMIT 0")
    except pymysql.MySQLError as exc:
        if exc.args and exc.args[0] in (*_ACCESS_DENIED, _NO_SUCH_TABLE):
            return False
        raise
    return True


def _replica_hosts(cur: Any, query: str) -> tuple[dict[int, str], str | None]:
    """Server ids of replicas registered with the primary, and why they could not be listed (None when
    they were: the user may lack the privilege)."""
    try:
        cur.execute(query)
    except pymysql.MySQLError as exc:
        return {}, f"{query} refused: {exc}"
    return {int(row[0]): f"the replica {row[1]}:{row[2]}" for row in cur.fetchall()}, None
