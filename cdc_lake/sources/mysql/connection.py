"""The MySQL family's connections and SQL quoting, which every role of the engines uses the same way.

:class:`MySqlBase` is the engines' part every role class extends (the preflight, the capture setup,
the snapshot reads, the operations): the source as the engine's settings model, the flavour's
facts the roles share (its name, how it shows replication), and a short-lived pymysql session per
call with read and write timeouts (:meth:`MySqlBase._connect`).
:class:`~cdc_lake.sources.mysql.engine.MySqlEngine` combines the roles.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import pymysql

from cdc_lake.sources.base import SourceEngine
from cdc_lake.sources.mysql.settings import MySqlConnection, MySqlSource
from cdc_lake.sources.mysql.tls import pymysql_settings
from cdc_lake.sources.settings import Connection, Source, engine_model

_CONNECT_TIMEOUT = 5
READ_TIMEOUT_SECONDS = 300
"""How long pymysql waits for a server's answer before giving the connection up (a partition, a hung
server).  The longest read cdc-lake issues here is the bootstrap's key sample (a sorted scan of a
table's key); the replica waits get their own wait time on top."""
WRITE_TIMEOUT_SECONDS = 60
"""How long pymysql waits to send a query."""


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


def status_field(row: dict[str, Any], *names: str) -> Any:
    """The first of ``names`` a replication status row has (MySQL renamed Master to Source)."""
    for name in names:
        if name in row:
            return row[name]
    return None


class MySqlBase(SourceEngine):
    """A MySQL or MariaDB source's settings, flavour and sessions: what every role starts from."""

    flavor = "mysql"
    replica_status_query = "SHOW REPLICA STATUS"

    def __init__(self, source: Source) -> None:
        super().__init__(source)
        self.settings = engine_model(source, MySqlSource)
        """The source as its engine's model: its server id and TLS settings."""

    def _connect(
        self, role: str = "primary", read_timeout: float = READ_TIMEOUT_SECONDS
    ) -> AbstractContextManager[pymysql.connections.Connection[Any]]:
        return self.opened(role, partial(_open, read_timeout=read_timeout), pymysql.MySQLError, _first_line)

    def _scalar(
        self, role: str, query: str, args: tuple[Any, ...] = (), read_timeout: float = READ_TIMEOUT_SECONDS
    ) -> Any:
        with self._connect(role, read_timeout) as conn, conn.cursor() as cur:
            cur.execute(query, args)
            row = cur.fetchone()
        return None if row is None else row[0]
