"""The Postgres engine's connections, which every role of the engine opens the same way.

:class:`PostgresBase` is the engine's part every role class extends (the preflight, the capture
setup, the snapshot reads, the operations): the source as the engine's settings model, the database,
and a short-lived psycopg session per call (:meth:`PostgresBase._connect`), opened with the
connection's TLS settings.  :class:`~cdc_lake.sources.postgres.engine.PostgresEngine` combines the
roles.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import psycopg

from cdc_lake.sources.base import SourceEngine
from cdc_lake.sources.postgres.settings import PostgresConnection, PostgresSource
from cdc_lake.sources.settings import Connection, Source, engine_model

Conn = psycopg.Connection[tuple[Any, ...]]
"""An open psycopg connection whose rows are tuples."""

_CONNECT_TIMEOUT = 5

POLL_SECONDS = 0.5
"""How often a wait (for a replica's replay, for a slot's walsender to exit) asks again."""


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


class PostgresBase(SourceEngine):
    """A Postgres source's settings and sessions: what every role of the engine starts from."""

    def __init__(self, source: Source) -> None:
        super().__init__(source)
        self.settings = engine_model(source, PostgresSource)
        """The source as its engine's model: its slot, publication, interval and TLS settings."""
        self.database = source.primary.database or ""

    def address(self, connection: Connection) -> str:
        """Where ``connection`` points: host, port and database."""
        return f"{connection.host}:{connection.port}/{connection.database or self.database}"

    def _connect(self, role: str = "primary") -> AbstractContextManager[Conn]:
        return self.opened(role, self._open, psycopg.Error, _first_line)

    def _open(self, connection: Connection) -> Conn:
        password = connection.password.get_secret_value() if connection.password is not None else None
        libpq: dict[str, Any] = {
            "host": connection.host,
            "port": connection.port,
            "dbname": connection.database or self.database,
            "user": connection.user,
            "password": password,
            "connect_timeout": _CONNECT_TIMEOUT,
            "application_name": "cdc-lake",
            **engine_model(connection, PostgresConnection).tls_settings(),
        }
        return psycopg.connect(autocommit=True, **libpq)
