"""The MySQL and MariaDB engines: row-based binlog capture, positions as GTID sets.

The connector needs nothing created on the source; onboarding only checks it.  MariaDB is the
MySQL family with its own connector template, GTIDs that are always on, its own position
variables and ``MASTER_GTID_WAIT``; MySQL waits with ``WAIT_FOR_EXECUTED_GTID_SET``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from decimal import Decimal
from functools import partial
from typing import Any, ClassVar

import pymysql
from pymysql.cursors import DictCursor

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.base import (
    Capture,
    CaptureLag,
    Change,
    ConnectorEndpoints,
    PreflightOptions,
    ReplicaDelay,
    SourceEngine,
)
from cdc_lake.sources.capabilities import TableRewrite
from cdc_lake.sources.checks import CheckResult
from cdc_lake.sources.connector import ConnectorParams
from cdc_lake.sources.mysql import MARIADB, MYSQL
from cdc_lake.sources.mysql.checks import MyReplicaFacts, MySqlFacts, MyTableFacts, check_tls, evaluate
from cdc_lake.sources.mysql.settings import MySqlConnection, MySqlSource
from cdc_lake.sources.mysql.tls import (
    connector_settings,
    ensure_truststore,
    jdbc_properties,
    pymysql_settings,
    truststore_password,
)
from cdc_lake.sources.positions import LogPosition, MariaDbGtidPosition, MySqlGtidSet
from cdc_lake.sources.settings import Connection, Source, engine_model
from cdc_lake.sources.snapshot import JdbcAccess, SourceColumn, TableShape

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
_CONNECT_TIMEOUT = 5
READ_TIMEOUT_SECONDS = 300
"""How long pymysql waits for a server's answer before giving the connection up (a partition, a hung
server).  The longest read cdc-lake issues here is the bootstrap's key sample (a sorted scan of a
table's key); the replica waits get their own wait time on top."""
WRITE_TIMEOUT_SECONDS = 60
"""How long pymysql waits to send a query."""
_WAIT_ANSWER_SECONDS = 30
"""A replica wait's answer may take this long after its own wait time."""
_ACCESS_DENIED = (1142, 1143)  # table / column access denied
_NO_SUCH_TABLE = 1146
BINLOG_SCAN_EVENTS = 1000
"""How many binlog events after a connector's offset :meth:`MariaDbEngine.streamed_through` reads."""
_STANDALONE_GTID = re.compile(r"^GTID (\d+-\d+-\d+)(?:\s|$)")
_FILE_END = ("Rotate", "Stop")  # events that end a binlog file: the group before them is whole
# What a binlog file holds before its first group; any other event first means the listing starts
# inside a group, which then cannot be judged row-free.
_FILE_START = ("Format_desc", "Gtid_list", "Binlog_checkpoint", "Start_encryption")


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


def _open(
    connection: Connection, read_timeout: float = READ_TIMEOUT_SECONDS
) -> pymysql.connections.Connection[Any]:
    password = connection.password.get_secret_value() if connection.password is not None else ""
    return pymysql.connect(
        host=connection.host,
        port=connection.port,
        user=connection.user,
        password=password,
        connect_timeout=_CONNECT_TIMEOUT,
        read_timeout=read_timeout,
        write_timeout=WRITE_TIMEOUT_SECONDS,
        autocommit=True,
        program_name="cdc-lake",
        **pymysql_settings(engine_model(connection, MySqlConnection)),
    )


_REPLICA_OWN_VALUE = re.compile(
    r"\b(uuid|uuid_short|rand|random_bytes|sysdate|user|current_user|session_user|system_user"
    r"|connection_id|version)\s*\(",
    re.IGNORECASE,
)
"""Functions whose value a replica computes itself when it runs a statement (MySQL's list of functions
unsafe for statement-based replication, those allowed in a default expression)."""


class MySqlEngine(SourceEngine):
    """A MySQL source: binlog from the primary, bootstrap from a replica."""

    capabilities = MYSQL
    ca_setting = "ssl_ca"
    primary_tls_settings = "primary.ssl_ca and primary.ssl_verify_identity"
    primary_connection_fix = "check host, port, user and the password variable"
    position_type: ClassVar[type[LogPosition]] = MySqlGtidSet
    flavor = "mysql"
    no_default: ClassVar[frozenset[str]] = frozenset()
    """How ``information_schema.COLUMNS.COLUMN_DEFAULT`` spells "no default" besides SQL NULL."""
    replica_status_query = "SHOW REPLICA STATUS"
    replica_hosts_query = "SHOW REPLICAS"
    position_query = "SELECT @@GLOBAL.gtid_executed"
    replica_position_query = "SELECT @@GLOBAL.gtid_executed"

    def __init__(self, source: Source) -> None:
        super().__init__(source)
        self.settings = engine_model(source, MySqlSource)
        """The source as its engine's model: its server id and TLS settings."""

    # Connections

    def _connect(
        self, role: str = "primary", read_timeout: float = READ_TIMEOUT_SECONDS
    ) -> AbstractContextManager[pymysql.connections.Connection[Any]]:
        return self.opened(role, partial(_open, read_timeout=read_timeout), pymysql.MySQLError, _first_line)

    # Preflight

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
        """Nothing on the source; the connector's truststore when the primary's ``ssl_ca`` is set."""
        primary = self.settings.primary
        if primary.mysql_tls() and ensure_truststore(primary, "primary"):
            return [Change(f"created truststore {primary.truststore_path()} from {primary.ssl_ca}")]
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

    def engine_connector_params(
        self, shared: ConnectorParams, capture: Capture, endpoints: ConnectorEndpoints
    ) -> ConnectorParams:
        """The binlog connector's server id, schema history clients and TLS settings."""
        return replace(
            shared,
            server_id=capture.server_id,
            kafka_bootstrap=endpoints.kafka_bootstrap,
            schema_history_clients=endpoints.kafka_clients,
            database_settings=connector_settings(self.flavor, self.settings.primary),
        )

    # Positions

    def _scalar(
        self, role: str, query: str, args: tuple[Any, ...] = (), read_timeout: float = READ_TIMEOUT_SECONDS
    ) -> Any:
        with self._connect(role, read_timeout) as conn, conn.cursor() as cur:
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
            "replica",
            "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)",
            (position, math.ceil(timeout)),
            read_timeout=_waiting(timeout),
        )
        if result is None or int(result) != 0:
            self._timed_out(position, timeout)
        return self.replica_position()

    def _timed_out(self, position: str, timeout: float) -> None:
        raise SourceEngineError(
            f"source {self.source.name}: replica applied {self.replica_position() or 'nothing'}, "
            f"not {position}, after {timeout:.0f}s"
        )

    # Bootstrap reads (see cdc_lake.sources.snapshot)

    # Row constructors like (a, b) >= (x, y) do not always get an index range here: predicates are
    # spelled out column by column instead.
    row_comparisons = False
    jdbc_scheme = "mysql"
    jdbc_driver = "com.mysql.cj.jdbc.Driver"
    jdbc_url_options = "connectTimeout=10000&tcpKeepAlive=true&useCursorFetch=true"
    read_only_variable = "transaction_read_only"

    def quote_identifier(self, name: str) -> str:
        """``name`` in backticks."""
        return quote(name)

    def quote_table(self, qualified: str) -> str:
        """``database.table`` as a quoted table reference."""
        return quote_table(qualified)

    def jdbc_access(self, role: str) -> JdbcAccess:
        """JDBC access to ``role``: a read-only UTC session where backslashes in literals are plain."""
        connection = self.connection(role)
        url = f"jdbc:{self.jdbc_scheme}://{connection.host}:{connection.port}/?{self.jdbc_url_options}"
        properties = {
            "driver": self.jdbc_driver,
            "user": connection.user,
            **jdbc_properties(self.flavor, engine_model(connection, MySqlConnection), role),
        }
        if connection.password is not None:
            properties["password"] = connection.password.get_secret_value()
        session_init = (
            f"SET SESSION {self.read_only_variable} = 1, SESSION time_zone = '+00:00', "
            "SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'NO_BACKSLASH_ESCAPES')"
        )
        return JdbcAccess(url, properties, session_init)

    def table_shape(self, table: str, role: str) -> TableShape:
        """Columns, primary key and size of ``table`` from ``information_schema`` on ``role``."""
        database, _, name = table.partition(".")
        with self._connect(role) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_ROWS, DATA_LENGTH FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND TABLE_TYPE = 'BASE TABLE'",
                (database, name),
            )
            found = cur.fetchone()
            if found is None:
                raise SourceEngineError(
                    f"source {self.source.name}: table {table} does not exist on the {role}"
                )
            cur.execute(
                "SELECT COLUMN_NAME, LOWER(DATA_TYPE), COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION, "
                "NUMERIC_SCALE FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (database, name),
            )
            columns = tuple(
                SourceColumn(
                    name=str(column),
                    type_name=str(type_name),
                    declared=str(declared),
                    nullable=str(nullable) == "YES",
                    precision=None if precision is None else int(precision),
                    scale=None if scale is None else int(scale),
                    kind="enum" if str(type_name) in ("enum", "set") else "base",
                )
                for column, type_name, declared, nullable, precision, scale in cur.fetchall()
            )
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
                (database, name),
            )
            primary_key = tuple(str(row[0]) for row in cur.fetchall())
            rows = int(found[0] or 0)
            if rows < _EXACT_COUNT_BELOW:
                cur.execute(f"SELECT COUNT(*) FROM {quote_table(table)}")
                rows = int(cur.fetchone()[0])
        return TableShape(table, columns, primary_key, rows, int(found[1] or 0))

    def column_defaults(self, table: str, columns: Sequence[str], role: str) -> dict[str, str | None]:
        """``COLUMN_DEFAULT`` of ``information_schema.COLUMNS`` (MariaDB spells "no default" ``NULL``, a
        string default quoted, an expression such as ``uuid()`` bare); generated and auto-increment
        columns have their expression or ``auto_increment`` as their default."""
        database, _, name = table.partition(".")
        with self._connect(role) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME, COLUMN_DEFAULT, EXTRA, GENERATION_EXPRESSION "
                "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (database, name),
            )
            rows = cur.fetchall()
        found: dict[str, str | None] = {}
        for column, default, extra, generated in rows:
            if str(column) not in columns:
                continue
            if generated:
                found[str(column)] = f"generated as ({generated})"
            elif "auto_increment" in str(extra or "").lower():
                found[str(column)] = "auto_increment"
            else:
                found[str(column)] = None if default is None or default in self.no_default else str(default)
        return found

    def rewrite_log_start(self, table: str) -> int | None:
        """None: MySQL and MariaDB log their DDL in the connector's schema history (read by
        :mod:`cdc_lake.apply.swaps`); an ``ALTER ... MODIFY`` changes the writer schema the schema-change
        rules judge."""
        return None

    def rewrite_log_version(self) -> tuple[int, int] | None:
        """None: no rewrite log (:meth:`rewrite_log_start`)."""
        return None

    def table_rewrites(self, table: str, start: int) -> list[TableRewrite]:
        """None logged (:meth:`rewrite_log_start`)."""
        return []

    def replica_evaluates(self, default: str) -> bool:
        """A function whose value statement-based replication does not carry: the replica runs an
        ``ALTER TABLE`` itself (a DDL always replicates as a statement), so ``uuid()`` or ``rand()`` give
        its rows values of its own; ``now()``/``CURRENT_TIMESTAMP`` take the statement's logged time."""
        return _REPLICA_OWN_VALUE.search(default) is not None

    def sample_key_literals(
        self, table: str, key: tuple[str, ...], sample_rows: int, estimated_rows: int, role: str
    ) -> list[tuple[str, ...]]:
        """A random sample of the key (a full key scan), sorted, each value as a SQL literal."""
        columns = ", ".join(quote(name) for name in key)
        fraction = sample_rows / max(estimated_rows, 1)
        where = "" if fraction >= 1 else f" WHERE RAND(7) < {fraction!r}"
        with self._connect(role) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute(f"SELECT {columns} FROM {quote_table(table)}{where} ORDER BY {columns}")
            rows = cur.fetchall()
        return [tuple(_literal(value, self.source.name, table) for value in row) for row in rows]

    def check_replica(self) -> str:
        """The replica's address and applied position; no replication or a stopped thread is an error."""
        address = self.address(self.connection("replica"))
        with self._connect("replica") as conn, conn.cursor(DictCursor) as cur:
            cur.execute(self.replica_status_query)
            status = cur.fetchone()
        if not status:
            raise SourceEngineError(
                f"source {self.source.name}: replica {address} is not a replica ({self.replica_status_query} "
                "is empty)"
            )
        io = str(_field(status, "Replica_IO_Running", "Slave_IO_Running"))
        sql_thread = str(_field(status, "Replica_SQL_Running", "Slave_SQL_Running"))
        if io != "Yes" or sql_thread != "Yes":
            errors = [_field(status, key) for key in ("Last_SQL_Error", "Last_IO_Error", "Last_Error")]
            error = next((str(e) for e in errors if e), "no error recorded")
            raise SourceEngineError(
                f"source {self.source.name}: replica {address} is not replicating "
                f"(IO thread {io}, SQL thread {sql_thread}): {error}"
            )
        return f"replica {address} applied {self.replica_position() or 'nothing'}"

    def primary_clock_ms(self) -> int:
        """The primary's clock in epoch milliseconds."""
        return int(self._scalar("primary", "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"))

    def replica_replay_time_ms(self) -> int | None:
        """The replica's clock minus its reported delay (None while its SQL thread is not running)."""
        with self._connect("replica") as conn, conn.cursor(DictCursor) as cur:
            cur.execute("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS now_ms")
            now_ms = int(cur.fetchone()["now_ms"])
            cur.execute(self.replica_status_query)
            status = cur.fetchone() or {}
        behind = _field(status, "Seconds_Behind_Source", "Seconds_Behind_Master")
        return None if behind in (None, "") else now_ms - int(str(behind)) * 1000

    def replica_lag(self, position: str) -> str:
        """The replica's applied GTIDs against ``position``, and the delay it reports."""
        with self._connect("replica") as conn, conn.cursor(DictCursor) as cur:
            cur.execute(self.replica_status_query)
            status = cur.fetchone() or {}
        behind = _field(status, "Seconds_Behind_Source", "Seconds_Behind_Master")
        delay = "unknown" if behind in (None, "") else f"{behind}s"
        return f"applied {self.replica_position() or 'nothing'}, not {position}; reported delay {delay}"

    def streamed_through(self, offset: Mapping[str, Any]) -> str | None:
        """Nothing beyond the offset's GTID set (docs/bootstrap.md, hand-off: the MySQL limit)."""
        return None

    # Lag (cdc-lake lag, metrics)

    def capture_lag(
        self, captures: Sequence[Capture], offsets: Mapping[str, Mapping[str, object]]
    ) -> list[CaptureLag]:
        """Each connector's binlog file and position (from its committed offset) against the binlogs kept.

        ``files_ahead_of_purge`` counts the retained files older than the one the connector needs:
        0 means the next purge (``binlog_expire_logs_seconds``, ``PURGE BINARY LOGS``) removes it.
        """
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = [(str(row[0]), int(row[1])) for row in cur.fetchall()]
        names = [name for name, _ in files]
        primary = f"{files[-1][0]}:{files[-1][1]}" if files else None
        lags = []
        for capture in captures:
            offset = offsets.get(capture.connector) or {}
            needed, pos = offset.get("file"), offset.get("pos")
            if not isinstance(needed, str) or not isinstance(pos, int):
                lags.append(CaptureLag(capture.connector, "unknown", primary_position=primary))
                continue
            gtids = offset.get("gtids")
            position = f"{needed}:{pos}" + (f" ({gtids})" if gtids else "")
            if needed not in names:
                lags.append(
                    CaptureLag(capture.connector, "purged", position=position, primary_position=primary)
                )
                continue
            index = names.index(needed)
            retained = sum(size for _, size in files[index:]) - pos
            lags.append(
                CaptureLag(
                    capture.connector,
                    "retained",
                    retained_bytes=max(0, retained),
                    unconfirmed_bytes=max(0, retained),
                    files_ahead_of_purge=index,
                    position=position,
                    primary_position=primary,
                )
            )
        return lags

    def replica_delay(self) -> ReplicaDelay:
        """The delay the replica reports (``Seconds_Behind_Source``) and whether its SQL thread runs."""
        with self._connect("replica") as conn, conn.cursor(DictCursor) as cur:
            cur.execute(self.replica_status_query)
            status = cur.fetchone() or {}
        if not status:
            raise SourceEngineError(f"source {self.source.name}: the replica does not replicate (no status)")
        behind = _field(status, "Seconds_Behind_Source", "Seconds_Behind_Master")
        running = str(_field(status, "Replica_SQL_Running", "Slave_SQL_Running") or "").lower() == "yes"
        return ReplicaDelay(
            None, None if behind in (None, "") else float(str(behind)), running, self.replica_position()
        )


class MariaDbEngine(MySqlEngine):
    """A MariaDB source: GTIDs are always on; positions are ``gtid_binlog_pos`` / ``gtid_slave_pos``."""

    capabilities = MARIADB
    position_type: ClassVar[type[LogPosition]] = MariaDbGtidPosition
    # Spark picks its MySQL dialect (backtick quoting, MySQL types) only for jdbc:mysql: URLs, which the
    # MariaDB driver accepts with permitMysqlScheme.
    jdbc_driver = "org.mariadb.jdbc.Driver"
    jdbc_url_options = "permitMysqlScheme&connectTimeout=10000&tcpKeepAlive=true"
    read_only_variable = "tx_read_only"
    flavor = "mariadb"
    no_default: ClassVar[frozenset[str]] = frozenset({"NULL"})
    replica_status_query = "SHOW SLAVE STATUS"
    replica_hosts_query = "SHOW SLAVE HOSTS"
    position_query = "SELECT @@GLOBAL.gtid_binlog_pos"
    replica_position_query = "SELECT @@GLOBAL.gtid_slave_pos"

    def wait_replica_past(self, position: str, timeout: float) -> str:
        """Block on the replica until it has applied ``position`` (``MASTER_GTID_WAIT``)."""
        query = "SELECT MASTER_GTID_WAIT(%s, %s)"
        result = self._scalar("replica", query, (position, timeout), read_timeout=_waiting(timeout))
        if result is None or int(result) != 0:
            self._timed_out(position, timeout)
        return self.replica_position()

    def streamed_through(self, offset: Mapping[str, Any]) -> str | None:
        """The GTID position at the offset's binlog ``file`` and ``pos``, with the row-free groups after it.

        Debezium adds a GTID to its offset's ``gtids`` only once the next event group starts, so after a
        group without rows (a DDL or a GRANT, in any database) its committed GTIDs stop short of the
        primary's for as long as the server stays idle.  The offset's ``file`` and ``pos`` are where the
        connector would restart (every change before them is streamed); ``BINLOG_GTID_POS`` gives the
        GTID position there, and the groups right after it that hold no row (:func:`row_free_gtids`)
        have nothing to stream.  None when the offset carries no GTIDs, when this primary does not know
        that binlog position, or when its GTID position there is not exactly the offset's own: after a
        failover the new primary may hold a binlog of the same name, further on at the same ``pos``, and
        right after a rotation the two differ too (the wait then ends with the next captured write).
        """
        file, pos = offset.get("file"), offset.get("pos")
        committed = MariaDbGtidPosition.from_connector_offset(offset)
        if not file or pos is None or committed is None:
            return None
        with self._connect("primary") as conn, conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (str(file), int(pos)))
            row = cur.fetchone()
            if row is None or row[0] is None:
                return None
            there = str(row[0])
            if MariaDbGtidPosition.parse(there) != committed:
                return None
            cur.execute(
                "SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s", (str(file), int(pos), BINLOG_SCAN_EVENTS)
            )
            events = [(str(event[2]), str(event[5])) for event in cur.fetchall()]
        return ",".join([there, *row_free_gtids(events, len(events) < BINLOG_SCAN_EVENTS)])


def row_free_gtids(events: Sequence[tuple[str, str]], to_the_end: bool) -> list[str]:
    """The GTIDs of the leading event groups of ``events`` that hold no row change.

    ``events`` are ``SHOW BINLOG EVENTS`` rows (type, info) from the start of a group.  A group counts
    when its GTID event is standalone (``GTID d-s-n``: no BEGIN, so no transaction: DDL, GRANT) and
    every other event of it is a Query; the first other group (``BEGIN GTID``, a Table_map, rows, XA)
    ends the list, and so does any event but a file's opening ones before the first GTID (the listing
    would start inside a group).  The last group counts only once the file ends after it (Rotate,
    Stop) or when ``to_the_end`` says the listing reached the binlog's end, so none of its events is
    unseen.
    """
    found: list[str] = []
    group: str | None = None
    for event_type, info in events:
        if event_type == "Gtid":
            if group is not None:
                found.append(group)
            standalone = _STANDALONE_GTID.match(info)
            if standalone is None:
                return found
            group = standalone.group(1)
        elif event_type in _FILE_END:
            return found if group is None else [*found, group]
        elif event_type not in (_FILE_START if group is None else ("Query",)):
            return found
    return [*found, group] if group is not None and to_the_end else found


# Below this many rows (by the statistics) a table is counted exactly when planning its bootstrap.
_EXACT_COUNT_BELOW = 100_000


def _literal(value: Any, source: str, table: str) -> str:
    """A key value as a SQL literal for a session with NO_BACKSLASH_ESCAPES (quotes doubled only)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes | bytearray):
        return f"X'{bytes(value).hex()}'"
    if isinstance(value, dt.timedelta):
        sign = "-" if value < dt.timedelta(0) else ""
        micros = abs(value) // dt.timedelta(microseconds=1)
        seconds, fraction = divmod(micros, 1_000_000)
        return f"'{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{fraction:06d}'"
    if isinstance(value, dt.datetime | dt.date):
        return "'" + value.isoformat(sep=" ") + "'" if isinstance(value, dt.datetime) else f"'{value}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise SourceEngineError(
        f"source {source}: table {table}: cannot write a key value of type {type(value).__name__} as SQL"
    )


def _waiting(timeout: float) -> float:
    """The read timeout of a query the server answers only after waiting up to ``timeout`` seconds."""
    return math.ceil(timeout) + _WAIT_ANSWER_SECONDS


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


def _replica_hosts(cur: Any, query: str) -> tuple[dict[int, str], str | None]:
    """Server ids of replicas registered with the primary, and why they could not be listed (None when
    they were: the user may lack the privilege)."""
    try:
        cur.execute(query)
    except pymysql.MySQLError as exc:
        return {}, f"{query} refused: {exc}"
    return {int(row[0]): f"the replica {row[1]}:{row[2]}" for row in cur.fetchall()}, None
