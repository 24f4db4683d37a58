"""The MySQL and MariaDB engines: row-based binlog capture, positions as GTID sets.

The connector needs nothing created on the source; onboarding only checks it.  MariaDB is the
MySQL family with its own connector template, GTIDs that are always on, its own position
variables and ``MASTER_GTID_WAIT``; MySQL waits with ``WAIT_FOR_EXECUTED_GTID_SET``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pymysql
from pymysql.cursors import DictCursor

from cdc_lake.config import Connection
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.onboard.preflight import CheckResult
from cdc_lake.sources.base import Capture, Change, ConnectorEndpoints, PreflightOptions, SourceEngine
from cdc_lake.sources.mysql_checks import MyReplicaFacts, MySqlFacts, MyTableFacts, evaluate
from connectors.render import ConnectorParams

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
)
_CONNECT_TIMEOUT = 5
_ACCESS_DENIED = (1142, 1143)  # table / column access denied
_NO_SUCH_TABLE = 1146


def quote(identifier: str) -> str:
    """A MySQL identifier in backticks, embedded backticks doubled."""
    return "`" + identifier.replace("`", "``") + "`"


def quote_table(qualified: str) -> str:
    """``database.table`` as a quoted MySQL table reference."""
    database, _, table = qualified.partition(".")
    return f"{quote(database)}.{quote(table)}"


def _first_line(exc: BaseException) -> str:
    # pymysql errors carry (code, message); the message is the useful part.
    args: tuple[Any, ...] = exc.args
    text = str(args[1]) if len(args) >= 2 else str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


class MySqlEngine(SourceEngine):
    """A MySQL source: binlog from the primary, bootstrap from a replica."""

    engine = "mysql"
    flavor = "mysql"
    replica_status_query = "SHOW REPLICA STATUS"
    replica_hosts_query = "SHOW REPLICAS"
    position_query = "SELECT @@GLOBAL.gtid_executed"
    replica_position_query = "SELECT @@GLOBAL.gtid_executed"

    # Connections

    @contextmanager
    def _connect(self, role: str = "primary") -> Iterator[pymysql.connections.Connection[Any]]:
        connection: Connection | None = self.source.primary if role == "primary" else self.source.replica
        if connection is None:
            raise SourceEngineError(f"source {self.source.name}: no {role} configured")
        where = f"source {self.source.name}: {role} {connection.host}:{connection.port}"
        password = connection.password.get_secret_value() if connection.password is not None else ""
        try:
            conn = pymysql.connect(
                host=connection.host,
                port=connection.port,
                user=connection.user,
                password=password,
                connect_timeout=_CONNECT_TIMEOUT,
                autocommit=True,
                program_name="cdc-lake",
            )
        except pymysql.MySQLError as exc:
            raise SourceEngineError(
                f"{where}: cannot connect as {connection.user}: {_first_line(exc)}"
            ) from None
        try:
            with conn:
                yield conn
        except pymysql.MySQLError as exc:
            raise SourceEngineError(f"{where}: {_first_line(exc)}") from None

    # Preflight

    def preflight(self, captures: Sequence[Capture], options: PreflightOptions) -> list[CheckResult]:
        """Connect to the primary (a failure is the only result) and judge the facts read there."""
        try:
            facts = self.read_facts(captures)
        except SourceEngineError as exc:
            found = str(exc).removeprefix(f"source {self.source.name}: ")
            return [
                CheckResult.fail(
                    "primary connection", found, "check host, port, user and the password variable"
                )
            ]
        address = f"{self.source.primary.host}:{self.source.primary.port}"
        connected = CheckResult.ok("primary connection", f"{address} as {facts.user}")
        return [connected, *evaluate(facts, captures, options)]

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
            in_use.update(_replica_hosts(cur, self.replica_hosts_query))
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
        )

    def _replica_facts(self) -> tuple[MyReplicaFacts, int | None]:
        """The replica's replication status and its server id (None when unreachable)."""
        replica = self.source.replica
        if replica is None:
            return MyReplicaFacts(configured=False), None
        address = f"{replica.host}:{replica.port}"
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
        behind = _field(status, "Seconds_Behind_Source", "Seconds_Behind_Master")
        errors = [_field(status, key) for key in ("Last_SQL_Error", "Last_IO_Error", "Last_Error")]
        facts = MyReplicaFacts(
            configured=True,
            address=address,
            is_replica=True,
            io_running=str(_field(status, "Replica_IO_Running", "Slave_IO_Running")),
            sql_running=str(_field(status, "Replica_SQL_Running", "Slave_SQL_Running")),
            last_error=next((str(error) for error in errors if error), ""),
            seconds_behind=None if behind in (None, "") else int(str(behind)),
            primary=f"{_field(status, 'Source_Host', 'Master_Host')}:"
            f"{_field(status, 'Source_Port', 'Master_Port')}",
        )
        return facts, server_id

    # Database objects: the binlog connector needs none.

    def planned_changes(self, capture: Capture, options: PreflightOptions) -> list[str]:
        """Nothing: a binlog connector needs no objects on the source."""
        return []

    def prepare(self, capture: Capture, options: PreflightOptions) -> list[Change]:
        """Nothing to create."""
        return []

    def publish(self, capture: Capture) -> list[Change]:
        """Nothing to align: the include list alone selects the tables."""
        return []

    def release(
        self, slot_name: str | None, publication_name: str | None, drop_slot: bool
    ) -> tuple[list[str], list[str]]:
        """Nothing to drop on the source (the schema history topic stays in Kafka)."""
        return [], []

    def slot_exists(self, slot_name: str) -> bool:
        """Binlog connectors have no slots."""
        return False

    def connector_params(self, capture: Capture, endpoints: ConnectorEndpoints) -> ConnectorParams:
        """Template parameters of the binlog connector for ``capture``."""
        primary = self.source.primary
        return ConnectorParams(
            host=primary.host,
            port=primary.port,
            user=primary.user,
            password_env=endpoints.password_env,
            topic_prefix=self.source.topic_prefix or self.source.name,
            tables=list(capture.table_names),
            registry_url=endpoints.registry_url,
            columns={t.name: t.columns for t in capture.tables if t.columns},
            server_id=capture.server_id,
            kafka_bootstrap=endpoints.kafka_bootstrap,
        )

    # Positions

    def _scalar(self, role: str, query: str, args: tuple[Any, ...] = ()) -> Any:
        with self._connect(role) as conn, conn.cursor() as cur:
            cur.execute(query, args)
            row = cur.fetchone()
        return None if row is None else row[0]

    def current_position(self) -> str:
        """The primary's executed GTID set."""
        return _gtid_set(self._scalar("primary", self.position_query))

    def replica_position(self) -> str:
        """The GTID set the replica has applied."""
        return _gtid_set(self._scalar("replica", self.replica_position_query))

    def wait_replica_past(self, position: str, timeout: float) -> str:
        """Block on the replica until it has applied ``position`` (``WAIT_FOR_EXECUTED_GTID_SET``)."""
        result = self._scalar(
            "replica", "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)", (position, math.ceil(timeout))
        )
        if result is None or int(result) != 0:
            self._timed_out(position, timeout)
        return self.replica_position()

    def _timed_out(self, position: str, timeout: float) -> None:
        raise SourceEngineError(
            f"source {self.source.name}: replica applied {self.replica_position() or 'nothing'}, "
            f"not {position}, after {timeout:.0f}s"
        )


class MariaDbEngine(MySqlEngine):
    """A MariaDB source: GTIDs are always on; positions are ``gtid_binlog_pos`` / ``gtid_slave_pos``."""

    engine = "mariadb"
    flavor = "mariadb"
    replica_status_query = "SHOW SLAVE STATUS"
    replica_hosts_query = "SHOW SLAVE HOSTS"
    position_query = "SELECT @@GLOBAL.gtid_binlog_pos"
    replica_position_query = "SELECT @@GLOBAL.gtid_slave_pos"

    def wait_replica_past(self, position: str, timeout: float) -> str:
        """Block on the replica until it has applied ``position`` (``MASTER_GTID_WAIT``)."""
        result = self._scalar("replica", "SELECT MASTER_GTID_WAIT(%s, %s)", (position, timeout))
        if result is None or int(result) != 0:
            self._timed_out(position, timeout)
        return self.replica_position()


def _gtid_set(value: Any) -> str:
    # MySQL prints long GTID sets over several lines.
    return "".join(str(value or "").split())


def _field(row: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in row:
            return row[name]
    return None


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
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
            (database, table),
        )
        primary_key = tuple(str(row[0]) for row in cur.fetchall())
        facts[name] = MyTableFacts(
            name=name,
            exists=True,
            columns=tuple(str(row[0]) for row in columns),
            primary_key=primary_key,
            can_select=_can_select(cur, name),
        )
    return facts


def _can_select(cur: Any, qualified: str) -> bool:
    try:
        cur.execute(f"SELECT 1 FROM {quote_table(qualified)} LIMIT 0")
    except pymysql.MySQLError as exc:
        if exc.args and exc.args[0] in (*_ACCESS_DENIED, _NO_SUCH_TABLE):
            return False
        raise
    return True


def _replica_hosts(cur: Any, query: str) -> dict[int, str]:
    """Server ids of replicas registered with the primary (empty when the user may not list them)."""
    try:
        cur.execute(query)
    except pymysql.MySQLError:
        return {}
    return {int(row[0]): f"the replica {row[1]}:{row[2]}" for row in cur.fetchall()}
