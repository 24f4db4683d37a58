"""The statements each bootstrap JDBC session on a replica runs: wait for the watermark's position, or fail.

Spark runs ``JdbcAccess.session_init`` on every connection it opens (``sessionInitStatement``), through
the driver's prepared statement: one text, no ``?``.  With a :class:`SessionWait`, Postgres appends a
``DO`` block polling ``pg_last_wal_replay_lsn()``; MySQL and MariaDB keep their one ``SET`` statement,
whose ``sql_mode`` becomes the failure's words (refused by the server, naming them) when
``WAIT_FOR_EXECUTED_GTID_SET`` / ``MASTER_GTID_WAIT`` do not answer 0.  Positions come from the
source: each is validated as its engine's form, then quoted.  The statements run on the stack's servers
in tests/integration/test_bootstrap_behaviors.py (MySQL's only here: the stack has no MySQL server).
"""

from __future__ import annotations

from typing import Any

import pytest

from cdc_lake.config import Source
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources import engine_for
from cdc_lake.sources.snapshot import SESSION_WAIT_FAILED, SessionWait

MYSQL_UUID = "3E11FA47-71CA-11E1-9E33-C80AA9429562"


def _source(engine: str) -> Source:
    primary: dict[str, Any] = {"port": 5432, "user": "cdc", "database": "app"}
    extra: dict[str, Any] = {}
    if engine != "postgres":
        primary = {"port": 3306, "user": "cdc"}
        extra["server_id"] = 7
    replica = {**primary, "port": primary["port"] + 1}
    return Source.model_validate(
        {"name": "src", "engine": engine, "primary": primary, "replica": replica, **extra}
    )


def _session_init(engine: str, position: str, timeout: float = 30) -> str:
    return engine_for(_source(engine)).jdbc_access("replica", SessionWait(position, timeout)).session_init


def test_postgres_sessions_wait_in_a_do_block_after_their_settings() -> None:
    plain = engine_for(_source("postgres")).jdbc_access("replica").session_init

    waiting = _session_init("postgres", "16/b374d848", 2.5)

    assert waiting == (
        f"{plain}; DO $cdc_lake_wait$ DECLARE "
        "deadline timestamptz := clock_timestamp() + 2.5 * interval '1 second'; replayed pg_lsn; "
        "BEGIN LOOP replayed := (case when pg_is_in_recovery() then pg_last_wal_replay_lsn() end); "
        f"IF replayed IS NULL THEN RAISE EXCEPTION '{SESSION_WAIT_FAILED} this server is not a standby "
        "(no replay position): not a replica to read'; END IF; "
        "EXIT WHEN replayed >= '16/B374D848'::pg_lsn; "
        f"IF pg_is_wal_replay_paused() THEN RAISE EXCEPTION '{SESSION_WAIT_FAILED} this standby replayed %, "
        "and its WAL replay is paused', replayed; END IF; "
        f"IF clock_timestamp() >= deadline THEN RAISE EXCEPTION '{SESSION_WAIT_FAILED} this standby "
        "replayed % in 2.5s', replayed; END IF; "
        "PERFORM pg_sleep(0.1); END LOOP; END $cdc_lake_wait$"
    )
    assert "?" not in waiting
    assert "DO $" not in plain


def test_mysql_sessions_wait_inside_their_one_set_statement() -> None:
    position = f"{MYSQL_UUID}:1-5:7,\n{MYSQL_UUID.lower().replace('3e', '4e')}:1-3"

    statement = _session_init("mysql", position, 2.5)

    gtids = f"{MYSQL_UUID}:1-5:7,{MYSQL_UUID.lower().replace('3e', '4e')}:1-3"
    assert statement == (
        "SET SESSION transaction_read_only = 1, SESSION time_zone = '+00:00', SESSION sql_mode = "
        f"IF(WAIT_FOR_EXECUTED_GTID_SET('{gtids}', 3) = 0, "
        "CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'NO_BACKSLASH_ESCAPES'), "
        f"CONCAT('{SESSION_WAIT_FAILED} this server applied ', COALESCE(NULLIF(REPLACE(REPLACE("
        "@@GLOBAL.gtid_executed, ',', ' '), CHAR(10 USING ascii), ''), ''), 'nothing'), ' in 3s'))"
    )
    assert ";" not in statement and "?" not in statement


def test_mariadb_sessions_wait_with_master_gtid_wait() -> None:
    statement = _session_init("mariadb", "0-1-5, 1-2-7")

    assert statement == (
        "SET SESSION tx_read_only = 1, SESSION time_zone = '+00:00', SESSION sql_mode = "
        "IF(MASTER_GTID_WAIT('0-1-5,1-2-7', 30) = 0, "
        "CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'NO_BACKSLASH_ESCAPES'), "
        f"CONCAT('{SESSION_WAIT_FAILED} this server applied ', COALESCE(NULLIF(REPLACE(REPLACE("
        "@@GLOBAL.gtid_slave_pos, ',', ' '), CHAR(10 USING ascii), ''), ''), 'nothing'), ' in 30s'))"
    )


@pytest.mark.parametrize("engine", ["postgres", "mysql", "mariadb"])
def test_without_a_wait_the_session_statements_are_unchanged(engine: str) -> None:
    statement = engine_for(_source(engine)).jdbc_access("replica").session_init

    assert not any(wait in statement for wait in ("GTID_WAIT", "GTID_SET(", "pg_last_wal_replay_lsn"))


@pytest.mark.parametrize(
    ("engine", "position"),
    [
        ("postgres", "0/1'; drop table t; --"),
        ("postgres", "0/1$cdc_lake_wait$"),
        ("postgres", ""),
        ("mysql", f"{MYSQL_UUID}:1-5'), sleep(1) -- "),
        ("mysql", f"{MYSQL_UUID}:1-5?"),
        ("mysql", "not-a-uuid:1-5"),
        ("mysql", f"{MYSQL_UUID}:"),
        ("mysql", ""),
        ("mariadb", "0-1-5' OR '1"),
        ("mariadb", "0-1"),
        ("mariadb", "0-1-5,"),
        ("mariadb", ""),
    ],
)
def test_a_position_not_in_its_engines_form_is_refused(engine: str, position: str) -> None:
    with pytest.raises(SourceEngineError, match="is not a"):
        _session_init(engine, position)


def test_mysql_tagged_gtids_are_a_position() -> None:
    statement = _session_init("mysql", f"{MYSQL_UUID}:1-5:nightly_job:1-2")

    assert f"WAIT_FOR_EXECUTED_GTID_SET('{MYSQL_UUID}:1-5:nightly_job:1-2', 30) = 0" in statement
