"""Every pymysql connection the MySQL/MariaDB engines open has read and write timeouts.

Without them a server that stops answering mid-query (a network partition, a hung server) holds
the command forever.  The replica waits (``MASTER_GTID_WAIT``, ``WAIT_FOR_EXECUTED_GTID_SET``)
block on purpose for their own timeout, so their read timeout must be longer than that.
"""

from __future__ import annotations

from typing import Any

import pytest

from cdc_lake.config import Source
from cdc_lake.sources.mysql import connection as mysql_connection
from cdc_lake.sources.mysql.engine import MariaDbEngine, MySqlEngine


class FakeCursor:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def execute(self, query: str, args: object = None) -> None:
        return None

    def fetchone(self) -> tuple[Any, ...]:
        return self.rows.pop(0)


class FakeConnection(FakeCursor):
    def cursor(self) -> FakeCursor:
        return FakeCursor(self.rows)


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every ``pymysql.connect`` call; each connection answers the next row."""
    calls: list[dict[str, Any]] = []
    rows: list[tuple[Any, ...]] = [("0-1-5",), (0,), ("0-1-5",)]

    def connect(**kwargs: Any) -> FakeConnection:
        calls.append(kwargs)
        return FakeConnection(rows)

    monkeypatch.setattr(mysql_connection.pymysql, "connect", connect)
    return calls


def _source(engine: str) -> Source:
    servers = {role: {"port": port, "user": "cdc"} for role, port in (("primary", 3306), ("replica", 3307))}
    return Source.model_validate({"name": "maria", "engine": engine, "server_id": 5401, **servers})


@pytest.mark.parametrize("engine", [MariaDbEngine, MySqlEngine], ids=["mariadb", "mysql"])
def test_queries_time_out_and_replica_waits_outlast_their_wait(
    opened: list[dict[str, Any]], engine: type[MySqlEngine]
) -> None:
    source = engine(_source(engine.capabilities.name))

    source.current_position()
    source.wait_replica_past("0-1-5", timeout=900)

    query, wait, after_wait = opened
    assert query["read_timeout"] == mysql_connection.READ_TIMEOUT_SECONDS
    assert query["write_timeout"] == mysql_connection.WRITE_TIMEOUT_SECONDS
    assert 900 < wait["read_timeout"] <= 900 + mysql_connection.READ_TIMEOUT_SECONDS
    assert wait["write_timeout"] == mysql_connection.WRITE_TIMEOUT_SECONDS
    assert after_wait["read_timeout"] == mysql_connection.READ_TIMEOUT_SECONDS
