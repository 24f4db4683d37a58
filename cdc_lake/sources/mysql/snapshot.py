"""The MySQL family's snapshot reads: GTID positions, the replica, and the bootstrap's reads.

:class:`MySqlSnapshot` is the engines' part of :class:`~cdc_lake.sources.snapshot.SnapshotSource`:
the primary's executed GTIDs, the replica's applied ones and the wait past a position
(``WAIT_FOR_EXECUTED_GTID_SET``; MariaDB overrides it), the replica's state, and what the bootstrap
reads (JDBC access, a table's shape, key samples), each read on the role the caller names.  A JDBC
session that reads a replica for the bootstrap waits first until its own server has applied the
watermark's position, in its one session statement (:meth:`MySqlSnapshot.jdbc_access`).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, ClassVar

from pymysql.cursors import DictCursor

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.mysql.connection import (
    MySqlBase,
    quote,
    quote_table,
    status_field,
)
from cdc_lake.sources.mysql.positions import MySqlGtidSet
from cdc_lake.sources.mysql.settings import MySqlConnection
from cdc_lake.sources.mysql.tls import jdbc_properties
from cdc_lake.sources.positions import LogPosition
from cdc_lake.sources.settings import engine_model
from cdc_lake.sources.snapshot import (
    SESSION_WAIT_FAILED,
    JdbcAccess,
    SessionWait,
    SourceColumn,
    TableShape,
)

_WAIT_ANSWER_SECONDS = 30
"""A replica wait's answer may take this long after its own wait time."""


class MySqlSnapshot(MySqlBase):
    """The MySQL family's snapshot role: GTID positions, the replica, the bootstrap's reads."""

    position_type: ClassVar[type[LogPosition]] = MySqlGtidSet
    position_query = "SELECT @@GLOBAL.gtid_executed"
    replica_position_query = "SELECT @@GLOBAL.gtid_executed"

    # Row constructors like (a, b) >= (x, y) do not always get an index range here: predicates are
    # spelled out column by column instead.
    row_comparisons = False
    jdbc_scheme = "mysql"
    jdbc_driver = "com.mysql.cj.jdbc.Driver"
    jdbc_url_options = "connectTimeout=10000&tcpKeepAlive=true&useCursorFetch=true"
    read_only_variable = "transaction_read_only"
    applied_variable = "@@GLOBAL.gtid_executed"
    """The variable holding what a server has applied, named when a session's wait fails."""

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
            read_timeout=wait_read_timeout(timeout),
        )
        if result is None or int(result) != 0:
            self._timed_out(position, timeout)
        return self.replica_position()

    def _timed_out(self, position: str, timeout: float) -> None:
        raise SourceEngineError(
            f"source {self.source.name}: replica applied {self.replica_position() or 'nothing'}, "
            f"not {position}, after {timeout:.0f}s"
        )

    def quote_identifier(self, name: str) -> str:
        """``name`` in backticks."""
        return quote(name)

    def quote_table(self, qualified: str) -> str:
        """``database.table`` as a quoted table reference."""
        return quote_table(qualified)

    def applied_within(self, position: str, timeout: float) -> str:
        """A SQL condition that waits until this session's server has applied ``position`` for at most
        ``timeout`` seconds, and is true when it has: ``WAIT_FOR_EXECUTED_GTID_SET`` answers 0 then, 1
        after the timeout.  ``position`` must be a GTID set (validated, then quoted)."""
        gtids = quote_string(mysql_gtid_set(position))
        return f"WAIT_FOR_EXECUTED_GTID_SET({gtids}, {wait_seconds(timeout)}) = 0"

    def jdbc_access(self, role: str, wait: SessionWait | None = None) -> JdbcAccess:
        """JDBC access to ``role``: a read-only UTC session where backslashes in literals are plain.

        With ``wait``, the same statement first waits until the session's server has applied
        ``wait.position`` (:meth:`applied_within`).  It stays one statement (a driver sends no second
        one without ``allowMultiQueries``, and MySQL has no anonymous blocks): when the wait fails,
        ``sql_mode`` is set to the failure's words, which the server refuses with an error naming them
        (``Variable 'sql_mode' can't be set to the value of 'cdc-lake session wait: ...'``).  The words
        start with :data:`SESSION_WAIT_FAILED` and name what the server applied (commas and line breaks
        as spaces: the server's error quotes a value up to its first comma).
        """
        connection = self.connection(role)
        url = f"jdbc:{self.jdbc_scheme}://{connection.host}:{connection.port}/?{self.jdbc_url_options}"
        properties = {
            "driver": self.jdbc_driver,
            "user": connection.user,
            **jdbc_properties(self.flavor, engine_model(connection, MySqlConnection), role),
        }
        if connection.password is not None:
            properties["password"] = connection.password.get_secret_value()
        modes = "CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'NO_BACKSLASH_ESCAPES')"
        if wait is not None:
            spaced = f"REPLACE(REPLACE({self.applied_variable}, ',', ' '), CHAR(10 USING ascii), '')"
            applied = f"COALESCE(NULLIF({spaced}, ''), 'nothing')"
            failed = quote_string(f"{SESSION_WAIT_FAILED} this server applied ")
            within = quote_string(f" in {wait_seconds(wait.timeout_seconds)}s")
            reached = self.applied_within(wait.position, wait.timeout_seconds)
            modes = f"IF({reached}, {modes}, CONCAT({failed}, {applied}, {within}))"
        session_init = (
            f"SET SESSION {self.read_only_variable} = 1, SESSION time_zone = '+00:00', "
            f"SESSION sql_mode = {modes}"
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
        io = str(status_field(status, "Replica_IO_Running", "Slave_IO_Running"))
        sql_thread = str(status_field(status, "Replica_SQL_Running", "Slave_SQL_Running"))
        if io != "Yes" or sql_thread != "Yes":
            errors = [status_field(status, key) for key in ("Last_SQL_Error", "Last_IO_Error", "Last_Error")]
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
        behind = status_field(status, "Seconds_Behind_Source", "Seconds_Behind_Master")
        return None if behind in (None, "") else now_ms - int(str(behind)) * 1000

    def replica_lag(self, position: str) -> str:
        """The replica's applied GTIDs against ``position``, and the delay it reports."""
        with self._connect("replica") as conn, conn.cursor(DictCursor) as cur:
            cur.execute(self.replica_status_query)
            status = cur.fetchone() or {}
        behind = status_field(status, "Seconds_Behind_Source", "Seconds_Behind_Master")
        delay = "unknown" if behind in (None, "") else f"{behind}s"
        return f"applied {self.replica_position() or 'nothing'}, not {position}; reported delay {delay}"

    def streamed_through(self, offset: Mapping[str, Any]) -> str | None:
        """Nothing beyond the offset's GTID set (docs/bootstrap.md, hand-off: the MySQL limit)."""
        return None


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


_UUID = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_GTID_SET_PART = re.compile(rf"{_UUID}(?::(?:[A-Za-z_][A-Za-z0-9_]{{0,31}}|\d+(?:-\d+)?))+")
_GTID_POSITION_PART = re.compile(r"\d+-\d+-\d+")


def mysql_gtid_set(position: str) -> str:
    """``position`` as a MySQL GTID set (``uuid[:tag]:1-5:7,...``, white space removed); anything else
    raises SourceEngineError."""
    text = "".join(position.split())
    if not text or not all(_GTID_SET_PART.fullmatch(part) for part in text.split(",")):
        raise SourceEngineError(f"{position!r} is not a MySQL GTID set")
    return text


def mariadb_gtid_position(position: str) -> str:
    """``position`` as a MariaDB GTID position (``domain-server-seq,...``, white space removed);
    anything else raises SourceEngineError."""
    text = "".join(position.split())
    if not text or not all(_GTID_POSITION_PART.fullmatch(part) for part in text.split(",")):
        raise SourceEngineError(f"{position!r} is not a MariaDB GTID position")
    return text


def wait_seconds(timeout: float) -> int:
    """A wait's timeout as the whole seconds the servers' wait functions take (rounded up)."""
    if not timeout >= 0:
        raise SourceEngineError(f"a wait of {timeout!r} seconds")
    return math.ceil(timeout)


def quote_string(text: str) -> str:
    """``text`` as a string literal of a session statement: quotes doubled.  The statement is parsed
    before its own ``NO_BACKSLASH_ESCAPES`` applies, so a backslash is refused, and so is a question
    mark (a JDBC driver would take it for a parameter)."""
    if "\\" in text or "?" in text:
        raise SourceEngineError(f"{text!r} cannot be written into a session statement")
    return "'" + text.replace("'", "''") + "'"


def wait_read_timeout(timeout: float) -> float:
    """The read timeout of a query the server answers only after waiting up to ``timeout`` seconds."""
    return math.ceil(timeout) + _WAIT_ANSWER_SECONDS


def _gtid_set(value: Any) -> str:
    # MySQL prints long GTID sets over several lines.
    return "".join(str(value or "").split())
